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
    w_ = be_.empty(s);
    p_ = be_.zeros(s);  // beta is 0 the first time, so p = r and s = w; zeros keep NaN out of 0 * p
    s_ = be_.zeros(s);
    scalars_ = be_.zeros({5});  // zero gamma and alpha: the first coefficients are a steepest-descent step's
    coefficients_ = scalars_.view(0, {4});
    rr_ = scalars_.view(0, {1});
    bb_ = scalars_.view(4, {1});

    // r = b - N x, w = N r and the first coefficients; ||b||^2 and ||r||^2 come back in one read.
    n_->forward(x_, w_);
    be_.copy(b, r_);
    be_.axpy(-1.f, w_, r_);
    n_->forward_cg(r_, w_, coefficients_);
    be_.norm2(b, bb_);
    const auto read = be_.read_async(scalars_);
    const std::vector<cfloat>& v = read->wait();
    b_norm2_ = double(v[4].real());
    absorb(double(v[0].real()));
}

void ConjugateGradient::absorb(double rr) const {
    residuals_.push_back(b_norm2_ > 0.0 ? std::sqrt(rr / b_norm2_) : 0.0);
    if (rr == 0.0 || (opt_.tolerance > 0.0 && residuals_.back() <= opt_.tolerance)) converged_ = true;
}

void ConjugateGradient::iterate() {
    // The directions and the step with the coefficients of r_k (p_k = r_k + beta_k p_k-1, s_k = w_k +
    // beta_k s_k-1, x += alpha_k p_k, r -= alpha_k s_k), then w = N r_k+1 and the coefficients of
    // r_k+1, whose gamma is ||r_k+1||^2: the same arrays every time, so the iteration records.
    be_.cg_update(w_, coefficients_, p_, s_, x_, r_);
    n_->forward_cg(r_, w_, coefficients_);
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
