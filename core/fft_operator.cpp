#include "core/fft_operator.h"

#include <stdexcept>
#include <string>
#include <utility>

namespace larmor {

FFTOperator::FFTOperator(std::shared_ptr<Backend> backend, Shape shape, AxisMask axes)
    : backend_(std::move(backend)), shape_(shape), axes_(axes) {
    if (!backend_) throw std::invalid_argument("FFTOperator: null backend for shape " + shape_.str());
    if (shape_.rank() < 32 && (axes_ >> shape_.rank()) != 0)
        throw std::invalid_argument("FFTOperator: axes mask " + std::to_string(axes_) + " names axes beyond shape " +
                                    shape_.str());
}

void FFTOperator::forward(const CArray& x, CArray& y) { apply(x, y, FFTDirection::Forward, "FFTOperator::forward"); }

void FFTOperator::adjoint(const CArray& y, CArray& x) { apply(y, x, FFTDirection::Inverse, "FFTOperator::adjoint"); }

void FFTOperator::apply(const CArray& in, CArray& out, FFTDirection dir, const char* op) {
    if (in.shape() != shape_ || out.shape() != shape_)
        throw std::invalid_argument(std::string(op) + ": input " + in.shape().str() + " and output " +
                                    out.shape().str() + " must both be " + shape_.str());
    if (in.storage() && in.storage() == out.storage()) {
        backend_->fft(out, axes_, dir);
        return;
    }
    if (backend_->device() == Device::Cuda) {
        // The CUDA backend transforms out of place into fresh memory and rebinds its argument, leaving
        // the storage it was given untouched (cuda/cuda_backend.cpp): no copy.
        CArray t = in;
        backend_->fft(t, axes_, dir);
        if (t.storage() != in.storage()) {
            out = std::move(t);
            return;
        }
        // Not rebound: nothing was transformed (every axis has length 1, or the array is empty), so
        // the result is the input itself.
        backend_->crop_pad_centred(in, out);
        return;
    }
    // A same-shape centred crop/pad is a plain copy on every backend (one copy), then in place.
    backend_->crop_pad_centred(in, out);
    backend_->fft(out, axes_, dir);
}

}  // namespace larmor
