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

    // y = F x. x is never modified unless it shares y's storage, and y may be REBOUND to new storage,
    // as Backend::fft's argument may: other handles to y's old storage don't see the result.
    //   x and y share storage: Backend::fft on y (no copy at all).
    //   GPU backend: Backend::fft transforms out of place there, so it runs on a second handle to x
    //     and y is rebound to its result (cuFFT reads x and writes the output: no copy).
    //   CPU backend (transforms in place): x is copied into y and y transformed (one copy).
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
