#pragma once
// The centred orthonormal FFT over a set of axes as a LinearOperator: forward = Backend::fft Forward,
// adjoint = inverse (the transform is unitary, so A^H = A^-1).
#include <memory>

#include "core/backend.h"
#include "core/linop.h"

namespace larmor {

class FFTOperator final : public LinearOperator {
public:
    FFTOperator(std::shared_ptr<Backend> backend, Shape shape, AxisMask axes);

    const Shape& ishape() const override { return shape_; }
    const Shape& oshape() const override { return shape_; }

    // In place when x and y share storage (no copy at all); otherwise x is copied into y and y is
    // transformed in place (one device copy, no temporary).
    void forward(const CArray& x, CArray& y) override;
    void adjoint(const CArray& y, CArray& x) override;

    AxisMask axes() const { return axes_; }
    const std::shared_ptr<Backend>& backend() const { return backend_; }

private:
    void apply(const CArray& in, CArray& out, FFTDirection dir, const char* op);

    std::shared_ptr<Backend> backend_;
    Shape shape_;
    AxisMask axes_;
};

}  // namespace larmor
