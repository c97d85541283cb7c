#pragma once
// Conjugate gradients (Hestenes & Stiefel 1952) for N x = b with N Hermitian positive definite, the
// solver of CG-SENSE (Pruessmann et al., MRM 46:638, 2001) and of every l2-regularised least-squares
// reconstruction: with N = A^H A + lambda I and b = A^H y it minimises ||A x - y||^2 + lambda ||x||^2.
//
// The iteration is Chronopoulos & Gear's (1989, Algorithm 2; core/cg_step_sizes.h): N is applied to
// the residual, w = N r, both inner products <r, r> and <r, w> are taken in one pass, and the
// directions p and s = N p follow by recurrence, so an iteration is the operator, one reduction and
// one vector update (Backend::cg_coefficients, cg_update), one launch fewer than Hestenes & Stiefel's
// form with the same iterates in exact arithmetic and the same vector traffic. Its one extra
// operator application is at the start (w_0 = N r_0). The operator and the reduction go through
// LinearOperator::forward_cg, so an operator whose kernel writes w can take the inner products in
// the same pass (the fused SENSE normal operator on CUDA: two launches per iteration).
// All scalars stay on the backend's device and are read there by the update, so an iteration
// queues its work without waiting for the GPU. ||r_k||^2 travels to the host asynchronously; update() k+1 waits for iteration k's value only
// after queuing iteration k+1, so the device never idles while the host decides whether to go on.
// The price: the tolerance test sees the residual one iteration late, so the solver may run one
// iteration past it (a better x, never a worse one).
// From the second iteration on, an iteration is replayed from a recording (Backend::record): the
// same arrays every time, so on CUDA one graph launch queues it in place of four or more launches,
// whose host time otherwise bounds a short iteration. The first iteration runs directly, so the
// operator's scratch arrays exist before the recording (which may not allocate).
#include <memory>
#include <string>
#include <vector>

#include "core/iter/alg.h"
#include "core/linops/linop.h"

namespace larmor {

struct CGOptions {
    int max_iterations = 30;
    // Stop once ||r_k|| / ||b|| <= tolerance (0: run max_iterations).
    double tolerance = 0.0;
    // Replay iterations from a recording (above); off: queue each operation every iteration.
    bool record = true;
};

class ConjugateGradient final : public Alg {
public:
    // n: the Hermitian positive definite operator (ishape == oshape); b: the right-hand side;
    // x: the start, updated in place (the caller's array, e.g. zeros). All on n's backend.
    ConjugateGradient(LinOp n, const CArray& b, CArray x, CGOptions options);

    void update() override;
    bool done() const override;
    int iteration() const override { return iteration_; }

    // ||r_k|| / ||b|| for k = 0 .. iteration() (entry 0: the start); waits for the last iteration.
    const std::vector<double>& residuals() const;
    double residual() const { return residuals().back(); }
    const CArray& x() const { return x_; }
    // Whether iterations replay a captured recording (a CUDA graph), and if not, why.
    bool recorded() const { return step_ && step_->captured(); }
    std::string why_not_recorded() const;

    ConjugateGradient(const ConjugateGradient&) = delete;  // the recording holds `this`
    ConjugateGradient& operator=(const ConjugateGradient&) = delete;

private:
    // Queues one iteration on the solver's fixed arrays (the recorded body).
    void iterate();
    // Records a residual read and applies the stopping rule.
    void absorb(double rr) const;

    LinOp n_;
    Backend& be_;
    CGOptions opt_;
    CArray x_, r_, p_, s_, w_;  // s = N p, w = N r
    CArray scalars_;            // [gamma = ||r||^2, alpha, beta, delta, ||b||^2] on the device
    CArray coefficients_, rr_, bb_;  // views of scalars_: the first four (Backend::cg_coefficients), ||r||^2, ||b||^2
    std::unique_ptr<Recording> step_;  // iterate(), recorded after the first iteration
    double b_norm2_ = 0.0;
    int iteration_ = 0;
    // Residuals arrive late (see above): the pending read of the latest iteration, and what is known.
    mutable std::unique_ptr<Backend::PendingRead> pending_;
    mutable bool converged_ = false;
    mutable std::vector<double> residuals_;
};

// N = A^H A + lambda I as an operator (A's normal(), so its overrides apply).
LinOp tikhonov_normal(LinOp a, float lambda);

// The regularised least-squares problem min ||A x - y||^2 + lambda ||x||^2 set up for CG: computes
// b = A^H y and returns the solver (x: start and result, on A's backend).
std::unique_ptr<ConjugateGradient> cg_least_squares(LinOp a, const CArray& y, CArray x, float lambda,
                                                    CGOptions options);

}  // namespace larmor
