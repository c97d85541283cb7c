#pragma once
// Projections onto convex sets, generalised to a cycle of non-expansive steps (Bregman 1965; the
// solver of l1-SPIRiT, Lustig & Pauly, MRM 64:457, 2010, Section "POCS", and Murphy et al., IEEE TMI
// 31:1250, 2012, Figure 1): each iteration applies the steps in order, x <- P_n(... P_1(x)). For
// l1-SPIRiT the steps are SPIRiT consistency x <- G x, the joint wavelet soft threshold and k-space
// data consistency (core/recon/l1_spirit.h).
#include <memory>
#include <vector>

#include "core/iter/alg.h"
#include "core/iter/prox.h"

namespace larmor {

class Pocs final : public Alg {
public:
    // steps: each on x's shape and backend; x: start and result (the caller's array). Without
    // track_residuals the iterations skip the change's norm (one fused pass over x and the last
    // iterate, Backend::change_norms) and residuals() holds only the start.
    // tolerance > 0 (with tracking): stop once ||x_k - x_{k-1}|| / ||x_k|| <= tolerance, seen one iteration
    // late as CG and FISTA see theirs (the change's norm travels to the host while the next iteration runs).
    Pocs(std::vector<std::unique_ptr<Prox>> steps, CArray x, int iterations, bool track_residuals = true,
         double tolerance = 0.0);

    void update() override;
    bool done() const override { return iteration_ >= iterations_ || converged_; }
    int iteration() const override { return iteration_; }

    // ||x_k - x_{k-1}|| / ||x_k|| per iteration (entry 0 is 1: the start); waits for the last one.
    const std::vector<double>& residuals() const;
    // ||x_k - x_{k-1}||^2 and ||x_k||^2 of iterations 1, 2, ... as far as they have reached the host
    // (without waiting; wait_all() waits for the last): a solver split into parts (core/recon/
    // l1_spirit_slabs.h) adds them up into the change of the whole.
    struct Change {
        double change2 = 0, size2 = 0;
    };
    const std::vector<Change>& changes() const { return changes_; }
    void wait_all() const { residuals(); }
    const CArray& x() const { return x_; }
    // Step i alone on x (benchmarks time each step of an iteration).
    void apply_step(size_t i) { steps_.at(i)->apply(1.f, x_, x_); }
    size_t steps() const { return steps_.size(); }

private:
    std::vector<std::unique_ptr<Prox>> steps_;
    Backend& be_;
    CArray x_, previous_, scalars_;  // scalars_: {||x_k - x_{k-1}||^2, ||x_k||^2}
    int iterations_;
    bool track_;
    double tolerance_;
    int iteration_ = 0;
    void absorb(const std::vector<cfloat>& v) const;
    mutable std::unique_ptr<Backend::PendingRead> pending_;
    mutable std::vector<double> residuals_{1.0};
    mutable std::vector<Change> changes_;
    mutable bool converged_ = false;
};

}  // namespace larmor
