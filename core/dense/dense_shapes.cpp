#include "core/dense/dense_shapes.h"

#include <climits>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace larmor::dense::detail {
namespace {

size_t trailing_product(const Shape& s, int from) {
    size_t n = 1;
    for (int a = from; a < s.rank(); ++a) n *= s[a];
    return n;
}

CArray allocate(Backend& be, const Shape& s, cfloat) { return be.empty(s); }
RArray allocate(Backend& be, const Shape& s, float) { return be.empty_real(s); }

}  // namespace

MatrixDims matrix_dims(const Shape& s, const char* op, const char* name) {
    if (s.rank() < 2)
        throw std::invalid_argument(std::string(op) + ": " + name + " " + s.str() +
                                    " is not a batch of matrices [rows, cols, batch...]");
    return MatrixDims{s[0], s[1], trailing_product(s, 2)};
}

Shape with_batch_of(std::initializer_list<size_t> lead, const Shape& like, int like_lead_axes) {
    Shape s(lead);
    for (int a = like_lead_axes; a < like.rank(); ++a) s.push_back(like[a]);
    return s;
}

template <class T>
void check_input(Backend& be, const Array<T>& a, const char* op, const char* name) {
    if (a.size() == 0) return;
    if (a.device() != be.device())
        throw std::invalid_argument(std::string(op) + ": " + name + " " + a.shape().str() + " lives on " +
                                    device_name(a.device()) + ", the backend is " + device_name(be.device()));
    if (a.data() == nullptr)
        throw std::invalid_argument(std::string(op) + ": " + name + " " + a.shape().str() + " has no storage");
}

template <class T>
void prepare_output(Backend& be, Array<T>& out, const Shape& want, int lead_axes, size_t batch, const char* op,
                    const char* name) {
    if (!out.storage()) {
        out = allocate(be, want, T{});
        return;
    }
    bool ok = out.shape().rank() >= lead_axes && trailing_product(out.shape(), lead_axes) == batch;
    for (int a = 0; ok && a < lead_axes; ++a) ok = out.shape()[a] == want[a];
    if (!ok)
        throw std::invalid_argument(std::string(op) + ": " + name + " " + out.shape().str() + " does not match " +
                                    want.str() + " (" + std::to_string(batch) + " matrices)");
    check_input(be, out, op, name);
}

template <class A, class B>
void check_no_overlap(const Array<A>& out, const char* out_name, const Array<B>& in, const char* in_name,
                      const char* op, bool allow_same_view) {
    if (!overlaps(out, in)) return;
    if constexpr (std::is_same_v<A, B>)
        if (allow_same_view && same_view(out, in)) return;
    const char* why = allow_same_view ? " (only the very same view may be both)" : " (needs its own memory)";
    throw std::invalid_argument(std::string(op) + ": " + out_name + " " + out.shape().str() + " overlaps " + in_name +
                                " " + in.shape().str() + why);
}

void check_int(size_t v, const char* what, const Shape& s, const char* op) {
    if (v > static_cast<size_t>(INT_MAX))
        throw std::invalid_argument(std::string(op) + ": " + what + " " + std::to_string(v) + " of " + s.str() +
                                    " exceeds the 32-bit sizes of LAPACK and cuSOLVER");
}

template void check_input(Backend&, const CArray&, const char*, const char*);
template void check_input(Backend&, const RArray&, const char*, const char*);
template void prepare_output(Backend&, CArray&, const Shape&, int, size_t, const char*, const char*);
template void prepare_output(Backend&, RArray&, const Shape&, int, size_t, const char*, const char*);
template void check_no_overlap(const CArray&, const char*, const CArray&, const char*, const char*, bool);
template void check_no_overlap(const RArray&, const char*, const CArray&, const char*, const char*, bool);

}  // namespace larmor::dense::detail
