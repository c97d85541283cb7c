#include "gadgets/iterative/solver_loop.h"

#include <cmath>
#include <stdexcept>

#include "gadgets/image_header.h"
#include "wire/progress.h"

namespace larmor {
namespace {

void report(const ResidualAlg& solver, const SolverKnobs& knobs, const std::string& stage, Emitter& out) {
    wire::Progress pr;
    pr.stage = stage;
    pr.iteration = static_cast<uint32_t>(solver.iteration());
    pr.iterations = static_cast<uint32_t>(knobs.iterations);
    pr.residual = solver.residual();
    out.emit(Text{wire::format_progress(pr)});
}

}  // namespace

double milliseconds_since(SteadyTime t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

bool run_solver_loop(ResidualAlg& solver, const SolverKnobs& knobs, const std::string& stage, SteadyTime t0,
                     Emitter& out) {
    bool stopped_by_deadline = false;
    while (!solver.done()) {
        if (knobs.deadline_ms > 0.f && milliseconds_since(t0) >= knobs.deadline_ms) {
            stopped_by_deadline = true;
            break;
        }
        solver.update();
        // The last iteration's line comes after the loop, once, whatever stopped it.
        if (knobs.progress_interval > 0 && solver.iteration() % knobs.progress_interval == 0 && !solver.done())
            report(solver, knobs, stage, out);
    }
    if (knobs.progress_interval > 0) report(solver, knobs, stage, out);
    return stopped_by_deadline;
}

void record_solver_meta(ISMRMRD::MetaContainer& meta, const std::string& prefix, const ResidualAlg& solver,
                        const SolverKnobs& knobs, bool stopped_by_deadline) {
    meta.set((prefix + "Iterations").c_str(), static_cast<long>(solver.iteration()));
    meta.set((prefix + "Residual").c_str(), solver.residual());
    meta.set((prefix + "Lambda").c_str(), static_cast<double>(knobs.lambda));
    meta.set((prefix + "Tolerance").c_str(), static_cast<double>(knobs.tolerance));
    if (stopped_by_deadline) meta.set((prefix + "StoppedByDeadline").c_str(), 1L);
    const std::string history = prefix + "ResidualHistory";
    for (double r : solver.residuals()) meta.append(history.c_str(), r);
}

std::string solver_failure(const std::string& step, const ResidualAlg& solver, const SolverKnobs& knobs,
                           bool stopped_by_deadline) {
    if (!std::isfinite(solver.residual()))
        return step + " diverged: the residual is " + std::to_string(solver.residual()) + " after iteration " +
               std::to_string(solver.iteration()) +
               " (non-finite values in the data or the coil maps, or norms that overflowed float: k-space this "
               "large must be scaled down)";
    if (solver.iteration() == 0 && stopped_by_deadline)
        return step + " stopped at iteration 0: the deadline of " + std::to_string(knobs.deadline_ms) +
               " ms passed before the first iteration, so the image is the zero start";
    if (solver.iteration() == 0)
        return step + " stopped at iteration 0 with residual " + std::to_string(solver.residual()) +
               ": the right-hand side E^H y is zero, so no signal reached the solver";
    return {};
}

void emit_or_fail(ImageArray img, const std::string& failure, Emitter& out) {
    if (failure.empty()) {
        out.emit(std::move(img));
        return;
    }
    mark_failed(img.meta, failure);
    out.emit(std::move(img));
    throw std::runtime_error(failure);
}

}  // namespace larmor
