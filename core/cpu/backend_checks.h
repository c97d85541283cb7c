#pragma once
// Argument validation shared by every Backend implementation (the CPU one here and cuda/), so that
// both reject the same calls with the same words. Every message names the offending value.
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <string>
#include <vector>

#include "core/backend.h"

namespace larmor::detail {

inline std::string axes_str(AxisMask axes) {
    std::string s = "{";
    bool first = true;
    for (int i = 0; i < 32; ++i)
        if (axes & (1u << i)) {
            s += (first ? "" : ",") + std::to_string(i);
            first = false;
        }
    return s + "}";
}

template <class T>
inline void check_device(const Array<T>& a, Device want, const char* op, const char* name) {
    if (a.empty()) return;
    if (a.device() != want)
        throw std::invalid_argument(std::string(op) + ": " + name + " " + a.shape().str() + " lives on " +
                                    device_name(a.device()) + ", this backend is " + device_name(want));
}

template <class T>
inline void check_allocated(const Array<T>& a, const char* op, const char* name) {
    if (a.size() > 0 && a.data() == nullptr)
        throw std::invalid_argument(std::string(op) + ": " + name + " " + a.shape().str() + " has no storage");
}

// Axes must name existing axes; returns the mask restricted to axes longer than 1 (a length-1 centred
// orthonormal transform is the identity).
inline AxisMask check_fft_axes(const Shape& s, AxisMask axes) {
    if (s.rank() < 32 && (axes >> s.rank()) != 0)
        throw std::invalid_argument("fft: axes " + axes_str(axes) + " do not exist in shape " + s.str());
    AxisMask live = 0;
    for (int a = 0; a < s.rank(); ++a)
        if ((axes & (1u << a)) && s[a] > 1) live |= 1u << a;
    return live;
}

inline Shape without_last_axis(const Shape& s) {
    Shape r;
    for (int a = 0; a + 1 < s.rank(); ++a) r.push_back(s[a]);
    return r;
}

inline void check_crop_pad(const CArray& src, const CArray& dst) {
    if (src.shape().rank() != dst.shape().rank())
        throw std::invalid_argument("crop_pad_centred: src " + src.shape().str() + " and dst " + dst.shape().str() +
                                    " differ in rank");
}

// upload_rows: the last row must end inside dst (sizes named when it does not).
inline void check_rows(const CArray& dst, size_t row_len, size_t rows, size_t offset, size_t pitch, const char* op) {
    if (rows == 0 || row_len == 0) return;
    if (row_len > pitch && rows > 1)
        throw std::invalid_argument(std::string(op) + ": rows of " + std::to_string(row_len) +
                                    " elements overlap at a destination pitch of " + std::to_string(pitch));
    const size_t end = offset + (rows - 1) * pitch + row_len;
    if (end > dst.size())
        throw std::invalid_argument(std::string(op) + ": " + std::to_string(rows) + " rows of " +
                                    std::to_string(row_len) + " from offset " + std::to_string(offset) + " (pitch " +
                                    std::to_string(pitch) + ") end at element " + std::to_string(end) + ", past dst " +
                                    dst.shape().str());
}

// copy_rows: both ends inside their arrays, rows not overlapping, src and dst not the same storage.
inline void check_copy_rows(const CArray& src, size_t src_offset, size_t src_pitch, const CArray& dst,
                            size_t dst_offset, size_t dst_pitch, size_t row_len, size_t rows) {
    if (rows == 0 || row_len == 0) return;
    if (rows > 1 && src_pitch < row_len)
        throw std::invalid_argument("copy_rows: rows of " + std::to_string(row_len) +
                                    " elements overlap at a source pitch of " + std::to_string(src_pitch));
    const size_t src_end = src_offset + (rows - 1) * src_pitch + row_len;
    if (src_end > src.size())
        throw std::invalid_argument("copy_rows: " + std::to_string(rows) + " rows of " + std::to_string(row_len) +
                                    " from offset " + std::to_string(src_offset) + " (pitch " + std::to_string(src_pitch) +
                                    ") end at element " + std::to_string(src_end) + ", past src " + src.shape().str());
    check_rows(dst, row_len, rows, dst_offset, dst_pitch, "copy_rows");
    if (src.data() == dst.data() || (src.data() < dst.data() + dst.size() && dst.data() < src.data() + src.size()))
        throw std::invalid_argument("copy_rows: src " + src.shape().str() + " and dst " + dst.shape().str() + " overlap");
}

}  // namespace larmor::detail

// ---- BLAS-1 and pointwise primitives (core/backend.h: the aliasing contract of core/array.h).
namespace larmor::detail {

template <class T>
inline void check_same_shape(const Array<T>& a, const char* an, const Array<T>& b, const char* bn, const char* op) {
    if (a.shape() != b.shape())
        throw std::invalid_argument(std::string(op) + ": " + an + " " + a.shape().str() + " and " + bn + " " +
                                    b.shape().str() + " differ in shape");
}

// An output may be the very same view as an input (in place) but must not partly overlap it.
template <class A, class B>
inline void check_in_place_or_disjoint(const Array<A>& out, const char* on, const Array<B>& in, const char* in_name,
                                       const char* op) {
    if (!overlaps(out, in)) return;
    if constexpr (std::is_same_v<A, B>)
        if (same_view(out, in)) return;
    throw std::invalid_argument(std::string(op) + ": " + on + " " + out.shape().str() + " partly overlaps " + in_name +
                                " " + in.shape().str() + " (only the very same view may be both input and output)");
}

template <class A, class B>
inline void check_disjoint(const Array<A>& out, const char* on, const Array<B>& in, const char* in_name, const char* op) {
    if (overlaps(out, in))
        throw std::invalid_argument(std::string(op) + ": " + on + " " + out.shape().str() + " overlaps " + in_name + " " +
                                    in.shape().str() + "; this primitive needs a distinct output");
}

// True when `lead` is `full` itself or the shape of its leading axes (the broadcasting rule).
inline bool is_leading_shape(const Shape& lead, const Shape& full) {
    if (lead.rank() > full.rank()) return false;
    for (int a = 0; a < lead.rank(); ++a)
        if (lead[a] != full[a]) return false;
    return true;
}

template <class A, class B>
inline void check_broadcast(const Array<A>& a, const Array<B>& b, const char* op) {
    if (!is_leading_shape(b.shape(), a.shape()))
        throw std::invalid_argument(std::string(op) + ": b " + b.shape().str() + " is neither a " + a.shape().str() +
                                    " nor the shape of its leading axes, so it cannot be broadcast over a");
}

// mul / div: out of a's shape, b broadcast over a's trailing axes; out may be a (or an equally
// shaped b) itself but must not partly overlap them. Returns false when there is nothing to do.
template <class A, class B>
inline bool check_pointwise(const Array<A>& a, const Array<B>& b, const Array<A>& out, const char* op) {
    check_same_shape(a, "a", out, "out", op);
    check_broadcast(a, b, op);
    check_in_place_or_disjoint(out, "out", a, "a", op);
    if (b.size() == a.size())
        check_in_place_or_disjoint(out, "out", b, "b", op);
    else
        check_disjoint(out, "out", b, "b", op);
    if (a.size() == 0) return false;
    if (b.size() == 0) throw std::invalid_argument(std::string(op) + ": b " + b.shape().str() + " is empty");
    return true;
}

inline void check_scalar_out(const CArray& out, const char* op) {
    if (out.size() != 1)
        throw std::invalid_argument(std::string(op) + ": out " + out.shape().str() +
                                    " must be a one-element array (a scalar slot)");
}

inline void check_coef(const Coef& c, Device want, const char* op) {
    for (const CArray* s : {&c.num, &c.den}) {
        if (!s->storage()) continue;
        if (s->size() != 1)
            throw std::invalid_argument(std::string(op) + ": coefficient scalar " + s->shape().str() +
                                        " must have one element");
        check_device(*s, want, op, "coefficient scalar");
    }
}

// reduce_conj_mul: a and b of one shape, out of the shape of their leading axes, no overlap.
inline void check_reduce(const CArray& a, const CArray& b, const CArray& out) {
    check_same_shape(a, "a", b, "b", "reduce_conj_mul");
    if (!is_leading_shape(out.shape(), a.shape()))
        throw std::invalid_argument("reduce_conj_mul: out " + out.shape().str() + " is not the shape of leading axes of " +
                                    a.shape().str());
    check_disjoint(out, "out", a, "a", "reduce_conj_mul");
    check_disjoint(out, "out", b, "b", "reduce_conj_mul");
}

inline void check_soft_threshold(float lambda, const CArray& x, const CArray& out, size_t joint) {
    check_same_shape(x, "x", out, "out", "soft_threshold");
    check_in_place_or_disjoint(out, "out", x, "x", "soft_threshold");
    if (!(lambda >= 0.f))
        throw std::invalid_argument("soft_threshold: lambda " + std::to_string(lambda) + " must be >= 0");
    if (joint == 0 || x.size() % joint != 0)
        throw std::invalid_argument("soft_threshold: joint " + std::to_string(joint) + " does not divide the " +
                                    std::to_string(x.size()) + " elements of " + x.shape().str());
}

inline void check_change_norms(const CArray& x, const CArray& previous, const CArray& out) {
    check_same_shape(x, "x", previous, "previous", "change_norms");
    check_disjoint(previous, "previous", x, "x", "change_norms");
    if (out.size() != 2)
        throw std::invalid_argument("change_norms: out " + out.shape().str() + " must have two elements");
    check_disjoint(out, "out", x, "x", "change_norms");
    check_disjoint(out, "out", previous, "previous", "change_norms");
}

inline void check_cg_scalars(const CArray& scalars, const char* op) {
    if (scalars.size() != 4)
        throw std::invalid_argument(std::string(op) + ": scalars " + scalars.shape().str() + " must have four elements");
}

inline void check_cg_coefficients(const CArray& r, const CArray& w, const CArray& scalars) {
    check_same_shape(r, "r", w, "w", "cg_coefficients");
    check_cg_scalars(scalars, "cg_coefficients");
    check_disjoint(scalars, "scalars", r, "r", "cg_coefficients");
    check_disjoint(scalars, "scalars", w, "w", "cg_coefficients");
}

inline void check_cg_update(const CArray& w, const CArray& scalars, const CArray& p, const CArray& s, const CArray& x,
                            const CArray& r) {
    check_same_shape(w, "w", p, "p", "cg_update");
    check_same_shape(w, "w", s, "s", "cg_update");
    check_same_shape(w, "w", x, "x", "cg_update");
    check_same_shape(w, "w", r, "r", "cg_update");
    check_cg_scalars(scalars, "cg_update");
    const std::pair<const CArray*, const char*> written[] = {{&p, "p"}, {&s, "s"}, {&x, "x"}, {&r, "r"}};
    for (size_t i = 0; i < 4; ++i) {
        for (size_t j = i + 1; j < 4; ++j)
            check_disjoint(*written[i].first, written[i].second, *written[j].first, written[j].second, "cg_update");
        check_disjoint(*written[i].first, written[i].second, w, "w", "cg_update");
        check_disjoint(*written[i].first, written[i].second, scalars, "scalars", "cg_update");
    }
}

// blend: x and y of one shape, m broadcast over their trailing axes, x apart from both.
inline void check_blend(const RArray& m, const CArray& y, const CArray& x) {
    check_same_shape(y, "y", x, "x", "blend");
    check_broadcast(x, m, "blend");
    check_disjoint(x, "x", y, "y", "blend");
    check_disjoint(x, "x", m, "m", "blend");
    if (x.size() != 0 && m.size() == 0) throw std::invalid_argument("blend: m " + m.shape().str() + " is empty");
}

inline void check_copy_sizes(size_t src, size_t dst, const Shape& ss, const Shape& ds) {
    if (src != dst)
        throw std::invalid_argument("copy: src " + ss.str() + " and dst " + ds.str() + " differ in size");
}

}  // namespace larmor::detail
