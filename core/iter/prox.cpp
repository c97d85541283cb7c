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
        mask_ = backend().to_device(mask);
        y_ = backend().to_device(y);
        t_ = backend().empty(y.shape());
    }

    void apply(float, const CArray& x, CArray& out) override {
        check(x, out, "data_consistency_projection");
        backend().copy(y_, t_);
        backend().axpy(-1.f, x, t_);
        backend().mul(t_, mask_, t_);
        if (!same_view(x, out)) backend().copy(x, out);
        backend().axpy(1.f, t_, out);
    }

private:
    RArray mask_;
    CArray y_, t_;
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
