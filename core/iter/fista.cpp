#include "core/iter/fista.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace larmor {

Fista::Fista(LinOp a, const CArray& aty, std::unique_ptr<Prox> prox, CArray x, float step, FistaOptions options)
    : a_(std::move(a)), be_(a_->backend()), prox_(std::move(prox)), step_(step), opt_(options), x_(std::move(x)) {
    const Shape& s = a_->ishape();
    if (!prox_) throw std::invalid_argument("FISTA: no proximal map");
    if (prox_->shape() != s)
        throw std::invalid_argument("FISTA: prox of " + prox_->shape().str() + " for " + a_->describe());
    if (aty.shape() != s || x_.shape() != s)
        throw std::invalid_argument("FISTA: A^H y " + aty.shape().str() + " and x " + x_.shape().str() + " must be " +
                                    s.str() + " for " + a_->describe());
    if (!(step > 0.f) || !std::isfinite(step)) throw std::invalid_argument("FISTA: step " + std::to_string(step) + " <= 0");
    if (opt_.max_iterations < 1)
        throw std::invalid_argument("FISTA: max_iterations " + std::to_string(opt_.max_iterations) + " < 1");
    if (!opt_.track_residuals && opt_.tolerance > 0)
        throw std::invalid_argument("FISTA: tolerance " + std::to_string(opt_.tolerance) +
                                    " needs the residuals tracked");
    aty_ = be_.to_device(aty);
    z_ = be_.empty(s);
    be_.copy(x_, z_);
    grad_ = be_.empty(s);
    next_ = be_.empty(s);
    scalars_ = be_.zeros({2});
    change_ = scalars_.view(0, {1});
    size_ = scalars_.view(1, {1});
}

void Fista::update() {
    // x_{k+1} = prox(z - step (A^H A z - A^H y))
    a_->normal(z_, grad_);
    be_.axpy(-1.f, aty_, grad_);
    be_.copy(z_, next_);
    be_.axpy(-step_, grad_, next_);
    prox_->apply(step_, next_, next_);
    const double t_next = 0.5 * (1.0 + std::sqrt(1.0 + 4.0 * t_ * t_));
    const float momentum = float((t_ - 1.0) / t_next);
    t_ = t_next;
    // x_k <- x_{k+1} - x_k (the step), z = x_{k+1} + momentum (x_{k+1} - x_k), then x_k <- x_{k+1}.
    be_.xpay(-1.f, next_, x_);
    if (opt_.track_residuals) {
        be_.norm2(x_, change_);
        be_.norm2(next_, size_);
    }
    be_.copy(next_, z_);
    be_.axpy(momentum, x_, z_);
    be_.copy(next_, x_);
    ++iteration_;
    if (!opt_.track_residuals) return;
    // The step's size arrives while the next iteration is queued (as in core/iter/cg.h).
    std::unique_ptr<Backend::PendingRead> previous = std::move(pending_);
    pending_ = be_.read_async(scalars_);
    if (previous) absorb(previous->wait());
}

void Fista::absorb(const std::vector<cfloat>& v) const {
    const double change = std::real(v[0]), size = std::real(v[1]);
    residuals_.push_back(size > 0 ? std::sqrt(change / size) : 0.0);
    if (opt_.tolerance > 0 && residuals_.back() <= opt_.tolerance) converged_ = true;
}

const std::vector<double>& Fista::residuals() const {
    if (pending_) {
        absorb(pending_->wait());
        pending_.reset();
    }
    return residuals_;
}

bool Fista::done() const {
    if (iteration_ >= opt_.max_iterations) return true;
    return converged_;
}

}  // namespace larmor
