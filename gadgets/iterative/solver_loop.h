#pragma once
// The loop every iterative gadget runs around its solver. core's solvers are Algs (core/iter/alg.h):
// they do one iteration per update() and leave the loop to the caller, so the gadget can talk to the
// client between iterations. What it does there is the same for every gadget and lives here, once:
// progress lines (TEXT, wire/progress.h), the deadline, the solver's record in the image meta, and the
// check that the solver produced an image at all.
//
//     ResidualAlgRef<ConjugateGradient> solver(cg);
//     const bool stopped = run_solver_loop(solver, knobs, "cg_sense", t0, out);
//     record_solver_meta(img.meta, "CgSense", solver, knobs, stopped);
//     emit_or_fail(std::move(img), solver_failure("CG-SENSE", solver, knobs, stopped), out);
#include <chrono>
#include <string>
#include <vector>

#include <ismrmrd/meta.h>

#include "core/iter/alg.h"
#include "gadgets/gadget.h"
#include "gadgets/iterative/settings.h"

namespace larmor {

// An Alg that keeps its relative residual history, which the progress lines, the meta and the failure
// check read. core's Alg has no residual (not every algorithm has one that means the same), so a
// solver that has one is seen through ResidualAlgRef rather than by widening Alg.
class ResidualAlg : public Alg {
public:
    // ||r_k|| / ||b|| for k = 0 .. iteration(), entry 0 the start.
    virtual const std::vector<double>& residuals() const = 0;
    double residual() const { return residuals().back(); }
};

// Any solver with Alg's update/done/iteration and a residuals() of that meaning (ConjugateGradient),
// by reference: the solver must outlive it.
template <class Solver>
class ResidualAlgRef final : public ResidualAlg {
public:
    explicit ResidualAlgRef(Solver& solver) : s_(solver) {}
    void update() override { s_.update(); }
    bool done() const override { return s_.done(); }
    int iteration() const override { return s_.iteration(); }
    const std::vector<double>& residuals() const override { return s_.residuals(); }

private:
    Solver& s_;
};

using SteadyTime = std::chrono::steady_clock::time_point;

double milliseconds_since(SteadyTime t0);

// Runs solver.update() until solver.done(), or until knobs.deadline_ms have passed since t0 (checked
// before each iteration, so a deadline already spent runs none). A progress line for `stage` (a
// wire::Progress stage name) every knobs.progress_interval iterations and one at the end, unless the
// interval is -1. True when the deadline stopped it.
bool run_solver_loop(ResidualAlg& solver, const SolverKnobs& knobs, const std::string& stage, SteadyTime t0,
                     Emitter& out);

// The solver's record in the image meta, each key `prefix` + Iterations, Residual, ResidualHistory (one
// value per entry of residuals()), Lambda, Tolerance and, only when the deadline stopped it,
// StoppedByDeadline = 1.
void record_solver_meta(ISMRMRD::MetaContainer& meta, const std::string& prefix, const ResidualAlg& solver,
                        const SolverKnobs& knobs, bool stopped_by_deadline);

// Why the solver's result is no image, or empty when it is one: a residual that is not finite
// (diverged), or no iteration run (a deadline spent before the first, or a zero right-hand side).
// `step` names the reconstruction in the message ("CG-SENSE").
std::string solver_failure(const std::string& step, const ResidualAlg& solver, const SolverKnobs& knobs,
                           bool stopped_by_deadline);

// Emits img. With a failure, the image still goes out, marked (LarmorStatus "failed", LarmorFailure),
// so a client that keeps images can tell it from a good one; then std::runtime_error(failure) is
// thrown, which the session counts and sends as TEXT.
void emit_or_fail(ImageArray img, const std::string& failure, Emitter& out);

}  // namespace larmor
