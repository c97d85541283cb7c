// The settings and solver loop shared by the iterative gadgets (gadgets/iterative), on a scripted
// solver, so what each gadget inherits is pinned down without a reconstruction around it.
#include <cmath>
#include <limits>
#include <variant>

#include <gtest/gtest.h>

#include "gadgets/chain_config.h"
#include "gadgets/image_header.h"
#include "gadgets/iterative/settings.h"
#include "gadgets/iterative/solver_loop.h"
#include "wire/progress.h"

using namespace larmor;

namespace {

// Halves its residual every iteration and stops after `max` iterations.
class ScriptedSolver {
public:
    explicit ScriptedSolver(int max) : max_(max) {}
    void update() {
        ++iteration_;
        residuals_.push_back(residuals_.back() * 0.5);
    }
    bool done() const { return iteration_ >= max_; }
    int iteration() const { return iteration_; }
    const std::vector<double>& residuals() const { return residuals_; }
    std::vector<double>& script() { return residuals_; }

private:
    int max_, iteration_ = 0;
    std::vector<double> residuals_{1.0};
};

struct Collect final : Emitter {
    std::vector<Message> out;
    void emit(Message m) override { out.push_back(std::move(m)); }
    std::vector<wire::Progress> progress() const {
        std::vector<wire::Progress> p;
        for (const Message& m : out)
            if (const Text* t = std::get_if<Text>(&m))
                if (auto pr = wire::parse_progress(t->text)) p.push_back(*pr);
        return p;
    }
};

SolverKnobs knobs(int iterations, int progress_interval, float deadline_ms = 0.f) {
    SolverKnobs k;
    k.iterations = iterations;
    k.progress_interval = progress_interval;
    k.deadline_ms = deadline_ms;
    return k;
}

std::string config_error(const std::function<void()>& f) {
    try {
        f();
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "accepted";
}

}  // namespace

TEST(SolverLoop, ReportsEveryIntervalAndOnceAtTheEndUnderTheCallersStage) {
    ScriptedSolver s(25);
    ResidualAlgRef<ScriptedSolver> alg(s);
    Collect out;
    EXPECT_FALSE(run_solver_loop(alg, knobs(25, 10), "fhd_cg", std::chrono::steady_clock::now(), out));
    const std::vector<wire::Progress> p = out.progress();
    ASSERT_EQ(p.size(), 3u);
    for (size_t i = 0; i < p.size(); ++i) {
        EXPECT_EQ(p[i].stage, "fhd_cg");
        EXPECT_EQ(p[i].iterations, 25u);
        EXPECT_EQ(p[i].iteration, (std::vector<uint32_t>{10, 20, 25})[i]);
        const double expected = std::ldexp(1.0, -static_cast<int>(p[i].iteration));
        EXPECT_NEAR(p[i].residual, expected, 5e-3 * expected);  // the line carries 3 digits
    }
    // Ending on a multiple of the interval gives one line for it, not two.
    ScriptedSolver t(20);
    ResidualAlgRef<ScriptedSolver> talg(t);
    Collect tout;
    run_solver_loop(talg, knobs(20, 10), "fhd_cg", std::chrono::steady_clock::now(), tout);
    EXPECT_EQ(tout.progress().size(), 2u);
    // -1: silent.
    ScriptedSolver q(5);
    ResidualAlgRef<ScriptedSolver> qalg(q);
    Collect quiet;
    run_solver_loop(qalg, knobs(5, -1), "fhd_cg", std::chrono::steady_clock::now(), quiet);
    EXPECT_TRUE(quiet.out.empty());
    EXPECT_EQ(q.iteration(), 5);
}

TEST(SolverLoop, ADeadlineAlreadySpentRunsNoIterationAndZeroMeansNone) {
    const auto long_ago = std::chrono::steady_clock::now() - std::chrono::hours(1);
    ScriptedSolver s(10);
    ResidualAlgRef<ScriptedSolver> alg(s);
    Collect out;
    EXPECT_TRUE(run_solver_loop(alg, knobs(10, -1, 1.f), "x", long_ago, out));
    EXPECT_EQ(s.iteration(), 0);
    ScriptedSolver t(10);
    ResidualAlgRef<ScriptedSolver> talg(t);
    EXPECT_FALSE(run_solver_loop(talg, knobs(10, -1, 0.f), "x", long_ago, out));
    EXPECT_EQ(t.iteration(), 10);
}

TEST(SolverLoop, RecordsTheSolverUnderTheCallersPrefix) {
    ScriptedSolver s(3);
    ResidualAlgRef<ScriptedSolver> alg(s);
    Collect out;
    SolverKnobs k = knobs(3, -1);
    k.lambda = 0.25f;
    k.tolerance = 1e-5f;
    run_solver_loop(alg, k, "x", std::chrono::steady_clock::now(), out);
    ISMRMRD::MetaContainer meta;
    record_solver_meta(meta, "Fhd", alg, k, false);
    EXPECT_EQ(meta.as_long("FhdIterations"), 3);
    EXPECT_DOUBLE_EQ(meta.as_double("FhdResidual"), 0.125);
    ASSERT_EQ(meta.length("FhdResidualHistory"), 4u);
    EXPECT_DOUBLE_EQ(meta.as_double("FhdResidualHistory", 0), 1.0);
    EXPECT_DOUBLE_EQ(meta.as_double("FhdResidualHistory", 3), 0.125);
    EXPECT_DOUBLE_EQ(meta.as_double("FhdLambda"), 0.25);
    EXPECT_DOUBLE_EQ(meta.as_double("FhdTolerance"), static_cast<double>(1e-5f));
    EXPECT_EQ(meta.length("FhdStoppedByDeadline"), 0u);
    record_solver_meta(meta, "Fhd", alg, k, true);
    EXPECT_EQ(meta.as_long("FhdStoppedByDeadline"), 1);
}

TEST(SolverLoop, FailuresNameTheStepAndTheValues) {
    const SolverKnobs k = knobs(10, -1, 5.f);
    ScriptedSolver fresh(10);
    ResidualAlgRef<ScriptedSolver> alg(fresh);
    EXPECT_EQ(solver_failure("FHd CG", alg, k, true).rfind("FHd CG stopped at iteration 0: the deadline of 5.000000 ms", 0),
              0u);
    EXPECT_NE(solver_failure("FHd CG", alg, k, false).find("FHd CG stopped at iteration 0 with residual 1.0"),
              std::string::npos);
    fresh.update();
    EXPECT_EQ(solver_failure("FHd CG", alg, k, false), "");
    fresh.script().back() = std::numeric_limits<double>::quiet_NaN();
    EXPECT_EQ(solver_failure("FHd CG", alg, k, false).rfind("FHd CG diverged: the residual is nan after iteration 1", 0),
              0u);

    // A failed image still goes out, marked, before the error.
    Collect out;
    EXPECT_THROW(emit_or_fail(ImageArray{}, "FHd CG diverged", out), std::runtime_error);
    ASSERT_EQ(out.out.size(), 1u);
    const ImageArray& sent = std::get<ImageArray>(out.out[0]);
    EXPECT_TRUE(is_marked_failed(sent.meta));
    EXPECT_STREQ(sent.meta.as_str(kMetaFailure), "FHd CG diverged");
    Collect ok;
    emit_or_fail(ImageArray{}, "", ok);
    ASSERT_EQ(ok.out.size(), 1u);
    EXPECT_FALSE(is_marked_failed(std::get<ImageArray>(ok.out[0]).meta));
}

TEST(IterativeSettings, EmptyMessagesGiveTheDocumentedDefaults) {
    const SolverKnobs k = solver_knobs(config::SolverSettings{}, "G");
    const SolverKnobs d;
    EXPECT_EQ(k.iterations, 30);
    EXPECT_EQ(k.tolerance, 1e-6f);
    EXPECT_EQ(k.lambda, 0.01f);
    EXPECT_EQ(k.progress_interval, 10);
    EXPECT_EQ(k.deadline_ms, 0.f);
    EXPECT_EQ(d.iterations, k.iterations);
    EXPECT_EQ(d.tolerance, k.tolerance);
    EXPECT_EQ(d.lambda, k.lambda);
    EXPECT_EQ(d.progress_interval, k.progress_interval);
    EXPECT_EQ(k.cg().max_iterations, 30);
    EXPECT_EQ(k.cg().tolerance, static_cast<double>(1e-6f));
    // The defaults are NufftOptions' doubles, not float roundings of them.
    const NufftOptions o = nufft_options(config::NufftSettings{}, "G");
    EXPECT_EQ(o.tolerance, 1e-3);
    EXPECT_EQ(o.upsampling, 2.0);
    // Set to 0 explicitly: tolerance 0 runs all iterations, lambda 0 is plain least squares.
    config::SolverSettings zero;
    zero.set_tolerance(0.f);
    zero.set_lambda(0.f);
    EXPECT_EQ(solver_knobs(zero, "G").tolerance, 0.f);
    EXPECT_EQ(solver_knobs(zero, "G").lambda, 0.f);
}

TEST(IterativeSettings, RefusalsNameTheGadgetTheFieldAndTheValue) {
    config::SolverSettings s;
    s.set_iterations(10001);
    EXPECT_EQ(config_error([&] { solver_knobs(s, "FhdCg", "cg"); }), "FhdCg: cg.iterations 10001 is outside 1..10000 (0 = 30)");
    s = config::SolverSettings{};
    s.set_lambda(std::numeric_limits<float>::infinity());
    EXPECT_EQ(config_error([&] { solver_knobs(s, "G"); }), "G: solver.lambda inf is not a finite number >= 0");
    s = config::SolverSettings{};
    s.set_tolerance(std::nanf(""));
    EXPECT_NE(config_error([&] { solver_knobs(s, "G"); }).find("G: solver.tolerance nan "), std::string::npos);
    s = config::SolverSettings{};
    s.set_deadline_ms(std::numeric_limits<float>::infinity());
    EXPECT_EQ(config_error([&] { solver_knobs(s, "G"); }), "accepted");  // no deadline
    s = config::SolverSettings{};
    s.set_deadline_ms(std::nanf(""));
    EXPECT_NE(config_error([&] { solver_knobs(s, "G"); }).find("G: solver.deadline_ms nan "), std::string::npos);
    config::NufftSettings n;
    n.set_tolerance(0.5f);
    EXPECT_EQ(config_error([&] { nufft_options(n, "G"); }), "G: nufft.tolerance 0.5 is outside 1e-6..0.1 (0 = 1e-3)");
    n = config::NufftSettings{};
    n.set_upsampling(1.2f);
    EXPECT_NE(config_error([&] { nufft_options(n, "G"); }).find("G: nufft.upsampling 1.2 is outside 1.25..2"),
              std::string::npos);
}
