#include "core/iter/prox.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "core/cpu/backend_checks.h"

namespace larmor {
namespace {

class SoftThresholdProx final : public Prox {
public:
    SoftThresholdProx(std::shared_ptr<Backend> be, const Shape& shape, float lambda, size_t joint)
        : Prox(std::move(be), shape), lambda_(lambda), joint_(joint) {}

    void apply(float step, const CArray& x, CArray& out) override {
        check(x, out, "soft_threshold_prox");
        backend().soft_threshold(step * lambda_, x, out, joint_);
    }

private:
    float lambda_;
    size_t joint_;
};

class DataConsistency final : public Prox {
public:
    DataConsistency(std::shared_ptr<Backend> be, const RArray& mask, const CArray& y)
        : Prox(std::move(be), y.shape()) {
        if (!detail::is_leading_shape(mask.shape(), y.shape()) || mask.size() == 0)
            throw std::invalid_argument("data_consistency_projection: mask " + mask.shape().str() +
                                        " does not broadcast over data " + y.shape().str());
        // One blend per projection, out = (1 - M) out + M (M y): with a binary mask only the sampled
        // entries move (R times less than two sweeps over the whole array), and they get y exactly.
        mask_ = backend().to_device(mask);
        measured_ = backend().empty(y.shape());
        backend().mul(backend().to_device(y), mask_, measured_);
    }

    void apply(float, const CArray& x, CArray& out) override {
        check(x, out, "data_consistency_projection");
        if (!same_view(x, out)) backend().copy(x, out);
        backend().blend(mask_, measured_, out);
    }

private:
    RArray mask_;
    CArray measured_;
};

class LinearStep final : public Prox {
public:
    explicit LinearStep(LinOp a) : Prox(a->backend_ptr(), a->ishape()), a_(std::move(a)), t_(backend().empty(shape())) {}

    void apply(float, const CArray& x, CArray& out) override {
        check(x, out, "linear_step");
        a_->forward(x, t_);
        backend().copy(t_, out);
    }

private:
    LinOp a_;
    CArray t_;
};

class InBasis final : public Prox {
public:
    InBasis(LinOp u, std::unique_ptr<Prox> p)
        : Prox(u->backend_ptr(), u->ishape()), u_(std::move(u)), p_(std::move(p)), t_(backend().empty(u_->oshape())) {}

    void apply(float step, const CArray& x, CArray& out) override {
        check(x, out, "in_basis");
        u_->forward(x, t_);
        p_->apply(step, t_, t_);
        u_->adjoint(t_, out);
    }

private:
    LinOp u_;
    std::unique_ptr<Prox> p_;
    CArray t_;
};

}  // namespace

void Prox::check(const CArray& x, const CArray& out, const char* name) const {
    if (x.shape() != shape_ || out.shape() != shape_)
        throw std::invalid_argument(std::string(name) + ": x " + x.shape().str() + " and out " + out.shape().str() +
                                    " must both be " + shape_.str());
}

std::unique_ptr<Prox> soft_threshold_prox(std::shared_ptr<Backend> backend, const Shape& shape, float lambda,
                                          size_t joint) {
    if (!backend) throw std::invalid_argument("soft_threshold_prox: null backend");
    if (!(lambda >= 0.f)) throw std::invalid_argument("soft_threshold_prox: lambda " + std::to_string(lambda) + " < 0");
    if (joint == 0 || shape.size() % joint != 0)
        throw std::invalid_argument("soft_threshold_prox: joint " + std::to_string(joint) + " does not divide " +
                                    shape.str());
    return std::make_unique<SoftThresholdProx>(std::move(backend), shape, lambda, joint);
}

std::unique_ptr<Prox> data_consistency_projection(std::shared_ptr<Backend> backend, const RArray& mask,
                                                  const CArray& y) {
    if (!backend) throw std::invalid_argument("data_consistency_projection: null backend");
    return std::make_unique<DataConsistency>(std::move(backend), mask, y);
}

}  // namespace larmor

namespace larmor {

std::unique_ptr<Prox> linear_step(LinOp a) {
    if (!a) throw std::invalid_argument("linear_step: null operator");
    if (a->ishape() != a->oshape()) throw std::invalid_argument("linear_step: " + a->describe() + " is not square");
    return std::make_unique<LinearStep>(std::move(a));
}

std::unique_ptr<Prox> in_basis(LinOp u, std::unique_ptr<Prox> p) {
    if (!u || !p) throw std::invalid_argument("in_basis: null operator or prox");
    if (p->shape() != u->oshape())
        throw std::invalid_argument("in_basis: prox of " + p->shape().str() + " for " + u->describe());
    return std::make_unique<InBasis>(std::move(u), std::move(p));
}

}  // namespace larmor
