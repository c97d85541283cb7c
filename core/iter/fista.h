#pragma once
// FISTA (Beck & Teboulle, "A fast iterative shrinkage-thresholding algorithm for linear inverse
// problems", SIAM J. Imaging Sci. 2:183, 2009, Section 4) for
//     min_x 1/2 ||A x - y||^2 + g(x)
// with g given by its proximal map (core/iter/prox.h): l1-wavelet SENSE (BART's `pics -l1`) when A is
// the sampled SENSE encoding and g = lambda ||W x||_1. Each iteration: one normal-operator application
// at the extrapolated point z, a gradient step of size `step` (<= 1 / ||A^H A||, from the power method),
// the prox, and the momentum update t_{k+1} = (1 + sqrt(1 + 4 t_k^2)) / 2.
#include <memory>
#include <vector>

#include "core/iter/alg.h"
#include "core/iter/prox.h"
#include "core/linops/linop.h"

namespace larmor {

struct FistaOptions {
    int max_iterations = 50;
    // Stop once ||x_k - x_{k-1}|| / ||x_k|| <= tolerance (0: run max_iterations).
    double tolerance = 0.0;
    // false: no change norms and no read back per iteration (residuals() stays {1}; tolerance must be
    // 0), so iterations queue without the host waiting: what a timed benchmark runs.
    bool track_residuals = true;
};

class Fista final : public Alg {
public:
    // a: the forward model (its normal() is used, so Toeplitz or FFT overrides apply); aty = A^H y;
    // prox on a's ishape; x: start and result (the caller's array). step > 0.
    Fista(LinOp a, const CArray& aty, std::unique_ptr<Prox> prox, CArray x, float step, FistaOptions options);

    void update() override;
    bool done() const override;
    int iteration() const override { return iteration_; }

    // ||x_k - x_{k-1}|| / ||x_k|| per iteration (entry 0 is 1: the start); waits for the last one.
    const std::vector<double>& residuals() const;
    const CArray& x() const { return x_; }
    float step() const { return step_; }

private:
    void absorb(const std::vector<cfloat>& v) const;

    LinOp a_;
    Backend& be_;
    std::unique_ptr<Prox> prox_;
    float step_;
    FistaOptions opt_;
    CArray aty_, x_, z_, grad_, next_, scalars_, change_, size_;
    double t_ = 1.0;
    int iteration_ = 0;
    mutable std::unique_ptr<Backend::PendingRead> pending_;
    mutable bool converged_ = false;
    mutable std::vector<double> residuals_{1.0};
};

}  // namespace larmor
