#include "core/linops/sampled_fft.h"

#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/cpu/backend_checks.h"
#include "core/linops/diag.h"
#include "core/linops/fft_op.h"

namespace larmor {
namespace {

class SampledFFT final : public LinearOperator {
public:
    SampledFFT(std::shared_ptr<Backend> be, const Shape& shape, AxisMask axes, const RArray& mask, AxisMask normal_axes)
        : LinearOperator(be, shape, shape, "sampled_fft"),
          mask_(sampling_mask(be, shape, mask)),
          fft_(fft_op(be, shape, axes)),
          normal_fft_(normal_axes == axes ? fft_ : fft_op(be, shape, normal_axes)) {}

protected:
    void apply_forward(const CArray& x, CArray& y) override {
        CArray& t = scratch(0, ishape());
        fft_->forward(x, t);
        mask_->forward(t, y);
    }
    void apply_adjoint(const CArray& y, CArray& x) override {
        CArray& t = scratch(0, ishape());
        mask_->forward(y, t);
        fft_->adjoint(t, x);
    }
    void apply_normal(const CArray& x, CArray& z) override {
        CArray& t = scratch(0, ishape());
        CArray& u = scratch(1, ishape());
        normal_fft_->forward(x, t);
        mask_->forward(t, u);
        normal_fft_->adjoint(u, z);
    }

private:
    LinOp mask_, fft_, normal_fft_;
};

}  // namespace

AxisMask mask_varying_axes(const RArray& mask, AxisMask axes) {
    const Shape& s = mask.shape();
    const float* m = mask.data();
    AxisMask varying = 0;
    for (int a = 0; a < s.rank(); ++a) {
        if (!(axes & (1u << a)) || s[a] <= 1) continue;
        // Each element against its predecessor along a: the slab of an outer index, shifted by one
        // step of a, compared with itself in one memcmp (bitwise is right for 0/1 masks).
        const size_t n = s[a], stride = s.stride(a), outer = mask.size() / (n * stride);
        bool differs = false;
        for (size_t o = 0; o < outer && !differs; ++o) {
            const float* slab = m + o * n * stride;
            differs = std::memcmp(slab + stride, slab, (n - 1) * stride * sizeof(float)) != 0;
        }
        if (differs) varying |= 1u << a;
    }
    return varying;
}

LinOp sampled_fft(std::shared_ptr<Backend> backend, const Shape& shape, AxisMask axes, const RArray& mask) {
    if (!backend) throw std::invalid_argument("sampled_fft: null backend");
    detail::check_fft_axes(shape, axes);
    if (!detail::is_leading_shape(mask.shape(), shape))
        throw std::invalid_argument("sampled_fft: mask " + mask.shape().str() + " does not broadcast over " + shape.str());
    const RArray host = backend->to_host(mask);
    return std::make_shared<SampledFFT>(std::move(backend), shape, axes, mask, mask_varying_axes(host, axes));
}

}  // namespace larmor
