#include "core/linops/diag.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "core/cpu/backend_checks.h"

namespace larmor {
namespace {

template <class W>
void check_weights(const Shape& shape, const Array<W>& w) {
    if (!detail::is_leading_shape(w.shape(), shape) || w.size() == 0)
        throw std::invalid_argument("diag: weights " + w.shape().str() + " are neither " + shape.str() +
                                    " nor the shape of its leading axes");
}

class ComplexDiag final : public LinearOperator {
public:
    ComplexDiag(std::shared_ptr<Backend> be, const Shape& shape, const CArray& w)
        : LinearOperator(std::move(be), shape, shape, "diag") {
        check_weights(shape, w);
        w_ = backend().to_device(w);
        w2_ = backend().empty(w.shape());
        backend().mul(w_, w_, w2_, true);  // |w|^2 (zero imaginary part)
    }

protected:
    void apply_forward(const CArray& x, CArray& y) override { backend().mul(x, w_, y); }
    void apply_adjoint(const CArray& y, CArray& x) override { backend().mul(y, w_, x, true); }
    void apply_normal(const CArray& x, CArray& z) override { backend().mul(x, w2_, z); }

private:
    CArray w_, w2_;
};

class RealDiag final : public LinearOperator {
public:
    RealDiag(std::shared_ptr<Backend> be, const Shape& shape, const RArray& w, bool idempotent, const char* name)
        : LinearOperator(std::move(be), shape, shape, name) {
        check_weights(shape, w);
        w_ = backend().to_device(w);
        if (idempotent) {
            w2_ = w_;
        } else {
            w2_ = backend().empty_real(w.shape());
            backend().mul(w_, w_, w2_);
        }
    }

protected:
    void apply_forward(const CArray& x, CArray& y) override { backend().mul(x, w_, y); }
    void apply_adjoint(const CArray& y, CArray& x) override { backend().mul(y, w_, x); }
    void apply_normal(const CArray& x, CArray& z) override { backend().mul(x, w2_, z); }

private:
    RArray w_, w2_;
};

}  // namespace

LinOp diag(std::shared_ptr<Backend> backend, const Shape& shape, const CArray& weights) {
    return std::make_shared<ComplexDiag>(std::move(backend), shape, weights);
}

LinOp diag(std::shared_ptr<Backend> backend, const Shape& shape, const RArray& weights) {
    return std::make_shared<RealDiag>(std::move(backend), shape, weights, false, "diag");
}

LinOp sampling_mask(std::shared_ptr<Backend> backend, const Shape& shape, const RArray& mask) {
    if (!backend) throw std::invalid_argument("sampling_mask: null backend");
    const RArray host = backend->to_host(mask);
    for (size_t i = 0; i < host.size(); ++i)
        if (host.data()[i] != 0.f && host.data()[i] != 1.f)
            throw std::invalid_argument("sampling_mask: value " + std::to_string(host.data()[i]) + " at index " +
                                        std::to_string(i) + " of " + mask.shape().str() + " is neither 0 nor 1");
    return std::make_shared<RealDiag>(std::move(backend), shape, mask, true, "mask");
}

}  // namespace larmor
