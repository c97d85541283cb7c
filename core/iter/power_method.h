#pragma once
// The power method (von Mises 1929) for the largest eigenvalue of a Hermitian positive semi-definite
// operator N, as an Alg: x <- N x / ||N x||, lambda = ||N x|| for unit x. FISTA's step is 1 / L with
// L = ||A^H A||; a few iterations from a random start land within a few percent below L, so callers
// add a margin.
#include <memory>

#include "core/iter/alg.h"
#include "core/linops/linop.h"

namespace larmor {

class PowerMethod final : public Alg {
public:
    // n: ishape == oshape. The start is a fixed pseudo-random vector (seed), so runs repeat.
    PowerMethod(LinOp n, int iterations, unsigned seed = 1);

    void update() override;
    bool done() const override { return iteration_ >= iterations_; }
    int iteration() const override { return iteration_; }
    // The estimate after the iterations run so far (0 before the first).
    double eigenvalue() const { return eigenvalue_; }

private:
    LinOp n_;
    Backend& be_;
    int iterations_;
    int iteration_ = 0;
    double eigenvalue_ = 0;
    CArray x_, y_, norm_;
};

// Runs the power method and returns its estimate of N's largest eigenvalue.
double max_eigenvalue(LinOp n, int iterations = 30);

}  // namespace larmor
