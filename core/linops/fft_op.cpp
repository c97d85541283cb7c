#include "core/linops/fft_op.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "core/cpu/backend_checks.h"

namespace larmor {
namespace {

class FFTOp final : public LinearOperator {
public:
    FFTOp(std::shared_ptr<Backend> be, const Shape& shape, AxisMask axes)
        : LinearOperator(std::move(be), shape, shape, "FFT" + detail::axes_str(axes)), axes_(axes) {
        detail::check_fft_axes(shape, axes);
    }

protected:
    void apply_forward(const CArray& x, CArray& y) override { backend().fft(x, y, axes_, FFTDirection::Forward); }
    void apply_adjoint(const CArray& y, CArray& x) override { backend().fft(y, x, axes_, FFTDirection::Inverse); }
    void apply_normal(const CArray& x, CArray& z) override { backend().copy(x, z); }

private:
    AxisMask axes_;
};

}  // namespace

LinOp fft_op(std::shared_ptr<Backend> backend, const Shape& shape, AxisMask axes) {
    if (!backend) throw std::invalid_argument("fft_op: null backend for shape " + shape.str());
    return std::make_shared<FFTOp>(std::move(backend), shape, axes);
}

}  // namespace larmor
