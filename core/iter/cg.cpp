#include "core/iter/cg.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace larmor {
namespace {

class TikhonovNormal final : public LinearOperator {
public:
    TikhonovNormal(LinOp a, float lambda)
        : LinearOperator(a->backend_ptr(), a->ishape(), a->ishape(), "tikhonov_normal(" + a->name() + ")"),
          a_(std::move(a)), lambda_(lambda) {}

protected:
    void apply_forward(const CArray& x, CArray& y) override {
        a_->normal(x, y);
        if (lambda_ != 0.f) backend().axpy(lambda_, x, y);
    }
    void apply_adjoint(const CArray& y, CArray& x) override { apply_forward(y, x); }  // Hermitian
    void apply_normal(const CArray& x, CArray& z) override {
        CArray& t = scratch(0, ishape());
        apply_forward(x, t);
        apply_forward(t, z);
    }

private:
    LinOp a_;
    float lambda_;
};

}  // namespace

ConjugateGradient::ConjugateGradient(LinOp n, const CArray& b, CArray x, CGOptions options)
    : n_(std::move(n)), be_(n_ ? n_->backend() : throw std::invalid_argument("ConjugateGradient: null operator")),
      opt_(options), x_(std::move(x)) {
    if (n_->ishape() != n_->oshape())
        throw std::invalid_argument("ConjugateGradient: " + n_->describe() + " is not square");
    if (b.shape() != n_->ishape() || x_.shape() != n_->ishape())
        throw std::invalid_argument("ConjugateGradient: b " + b.shape().str() + " and x " + x_.shape().str() +
                                    " must both be " + n_->ishape().str() + " for " + n_->describe());
    if (opt_.max_iterations < 0)
        throw std::invalid_argument("ConjugateGradient: max_iterations " + std::to_string(opt_.max_iterations) + " < 0");
    if (!(opt_.tolerance >= 0.0))
        throw std::invalid_argument("ConjugateGradient: tolerance " + std::to_string(opt_.tolerance) + " < 0");
    const Shape& s = n_->ishape();
    r_ = be_.empty(s);
    p_ = be_.empty(s);
    np_ = be_.empty(s);
    scalars_ = be_.zeros({4});  // the previous ||r||^2 starts at 0, so the first direction's beta is 0
    norms_ = scalars_.view(0, {2});
    rr_previous_ = scalars_.view(0, {1});
    rr_ = scalars_.view(1, {1});
    pnp_ = scalars_.view(2, {1});
    bb_ = scalars_.view(3, {1});

    // r = b - N x, p = r (any finite p would do: beta is 0 the first time); ||b||^2 and ||r||^2 come
    // back in one read.
    n_->forward(x_, np_);
    be_.copy(b, r_);
    be_.axpy(-1.f, np_, r_);
    be_.copy(r_, p_);
    be_.norm2(b, bb_);
    be_.norm2(r_, rr_);
    const auto read = be_.read_async(scalars_);
    const std::vector<cfloat>& v = read->wait();
    b_norm2_ = double(v[3].real());
    absorb(double(v[1].real()));
}

void ConjugateGradient::absorb(double rr) const {
    residuals_.push_back(b_norm2_ > 0.0 ? std::sqrt(rr / b_norm2_) : 0.0);
    if (rr == 0.0 || (opt_.tolerance > 0.0 && residuals_.back() <= opt_.tolerance)) converged_ = true;
}

void ConjugateGradient::iterate() {
    // p = r + beta p with beta = ||r_k||^2 / ||r_k-1||^2, then N p and <p, N p>. The textbook
    // iteration ends with the direction update; here it opens the next one, the same values in the
    // same order, so that the previous norm is still at hand (beta is 0 the first time).
    be_.xpay(Coef::ratio(1.f, rr_, rr_previous_), r_, p_);
    n_->forward(p_, np_);
    be_.dot(p_, np_, pnp_);
    // alpha = ||r_k||^2 / <p, N p>; x += alpha p; r -= alpha N p; the new ||r||^2 replaces the old,
    // which becomes the previous: one pass (Backend::cg_step), and no copy of scalars, so the
    // recorded iteration is the same arrays every time.
    be_.cg_step(Coef::ratio(1.f, rr_, pnp_), p_, np_, x_, r_, norms_);
}

void ConjugateGradient::update() {
    if (done()) return;
    if (step_) {
        step_->replay();
    } else {
        iterate();
        if (opt_.record && iteration_ + 1 < opt_.max_iterations) step_ = be_.record([this] { iterate(); });
    }
    ++iteration_;
    // This iteration's ||r||^2 starts towards the host; the previous one's is awaited only now, with
    // this iteration already queued behind it.
    auto read = be_.read_async(rr_);
    if (pending_) absorb(double(pending_->wait()[0].real()));
    pending_ = std::move(read);
}

std::string ConjugateGradient::why_not_recorded() const {
    if (!opt_.record) return "recording is off";
    if (!step_) return "not recorded yet (the first iteration runs directly)";
    return step_->why_not_captured();
}

const std::vector<double>& ConjugateGradient::residuals() const {
    if (pending_) {
        absorb(double(pending_->wait()[0].real()));
        pending_.reset();
    }
    return residuals_;
}

bool ConjugateGradient::done() const { return converged_ || iteration_ >= opt_.max_iterations; }

LinOp tikhonov_normal(LinOp a, float lambda) {
    if (!a) throw std::invalid_argument("tikhonov_normal: null operator");
    if (!(lambda >= 0.f)) throw std::invalid_argument("tikhonov_normal: lambda " + std::to_string(lambda) + " < 0");
    return std::make_shared<TikhonovNormal>(std::move(a), lambda);
}

std::unique_ptr<ConjugateGradient> cg_least_squares(LinOp a, const CArray& y, CArray x, float lambda,
                                                    CGOptions options) {
    if (!a) throw std::invalid_argument("cg_least_squares: null operator");
    CArray b = a->backend().empty(a->ishape());
    a->adjoint(y, b);
    return std::make_unique<ConjugateGradient>(tikhonov_normal(a, lambda), b, std::move(x), options);
}

}  // namespace larmor
