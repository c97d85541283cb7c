// Backend::record (core/recording.h): a recorded body replayed equals the body called, bit for bit;
// recording runs nothing; on CUDA the body becomes a graph, and a body that allocates, waits or reads
// back falls back to being called, saying why; a session's other threads keep their own stream while
// one thread records; CG replays its iterations and gives the same bits as CG without recording.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/iter/cg.h"
#include "core/linops/algebra.h"
#include "core/linops/sampled_fft.h"
#include "core/linops/sense.h"
#include "core/linops/sense_normal.h"
#include "tests/support/backends.h"
#include "tests/support/operator_checks.h"

namespace larmor {
namespace {

class BackendRecord : public test::BackendTest {};
LARMOR_INSTANTIATE_BACKEND_TEST(BackendRecord);

TEST_P(BackendRecord, RecordingRunsNothingAndEachReplayIsOneCall) {
    CArray a = test::random_on(*be, {1000}, 1), b = be->zeros({1000});
    auto rec = be->record([&] {
        be->axpy(cfloat(0.5f, -0.25f), a, b);
        be->scale(1.5f, b, b);
    });
    EXPECT_EQ(test::download(*be, b), std::vector<test::cdouble>(1000, 0.0));  // nothing ran
    CArray want = be->zeros({1000});
    for (int k = 0; k < 3; ++k) {
        rec->replay();
        be->axpy(cfloat(0.5f, -0.25f), a, want);
        be->scale(1.5f, want, want);
        EXPECT_EQ(test::download(*be, b), test::download(*be, want)) << "replay " << k;
    }
    if (be->device() == Device::Cuda) {
        EXPECT_TRUE(rec->captured()) << rec->why_not_captured();
        EXPECT_EQ(rec->why_not_captured(), "");
    } else {
        EXPECT_FALSE(rec->captured());
        EXPECT_NE(rec->why_not_captured().find("runs the body"), std::string::npos) << rec->why_not_captured();
    }
}

TEST_P(BackendRecord, ScalarsOnTheDeviceAreReadAtReplayNotAtRecording) {
    // A solver's coefficients are results of earlier replays: the graph must read them when it runs.
    CArray x = test::random_on(*be, {256}, 2), y = be->zeros({256}), s = be->zeros({1});
    auto rec = be->record([&] {
        be->norm2(x, s);
        be->axpy(Coef::ratio(1.f, s, CArray{}), x, y);  // y += ||x||^2 x
        be->scale(0.5f, x, x);
    });
    CArray x2 = test::random_on(*be, {256}, 2), y2 = be->zeros({256}), s2 = be->zeros({1});
    for (int k = 0; k < 4; ++k) {
        rec->replay();
        be->norm2(x2, s2);
        be->axpy(Coef::ratio(1.f, s2, CArray{}), x2, y2);
        be->scale(0.5f, x2, x2);
    }
    EXPECT_EQ(test::download(*be, y), test::download(*be, y2));
    EXPECT_EQ(test::download(*be, s), test::download(*be, s2));
}

TEST_P(BackendRecord, BodiesThatAllocateWaitOrReadBackAreCalledInstead) {
    if (be->device() != Device::Cuda) GTEST_SKIP() << "the CPU backend captures nothing";
    CArray a = test::random_on(*be, {64}, 3), b = be->zeros({64});
    struct Case {
        const char* says;
        std::function<void()> body;
    };
    const Case cases[] = {
        {"allocating", [&] { CArray t = be->empty({64}); be->copy(a, t); be->axpy(1.f, t, b); }},
        {"synchronize", [&] { be->axpy(1.f, a, b); be->synchronize(); }},
        {"read_async", [&] { be->axpy(1.f, a, b); (void)be->read_async(b); }},
        {"to_host", [&] { be->axpy(1.f, a, b); (void)be->to_host(b); }},
        {"recording inside a recording", [&] { (void)be->record([&] { be->axpy(1.f, a, b); }); }},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.says);
        be->fill(b, cfloat(0.f, 0.f));
        auto rec = be->record(c.body);
        EXPECT_FALSE(rec->captured());
        EXPECT_NE(rec->why_not_captured().find(c.says), std::string::npos) << rec->why_not_captured();
        // Nothing of the failed capture ran, and the session's stream works as before.
        const auto zero = test::download(*be, b);
        for (const auto& v : zero) ASSERT_EQ(v, test::cdouble(0.0));
        rec->replay();
        const auto got = test::download(*be, b), want = test::download(*be, a);
        if (std::string(c.says) != "recording inside a recording") {
            EXPECT_EQ(got, want);
        }
    }
}

TEST_P(BackendRecord, AnotherThreadOfTheSessionKeepsItsStreamWhileOneRecords) {
    if (be->device() != Device::Cuda) GTEST_SKIP() << "the CPU backend captures nothing";
    CArray a = test::random_on(*be, {4096}, 4), b = be->zeros({4096});
    CArray c = test::random_on(*be, {4096}, 5), d = be->zeros({4096});
    std::mutex m;
    std::condition_variable cv;
    bool recording = false, other_done = false;
    std::vector<test::cdouble> other_saw;
    std::thread other([&] {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return recording; });
        lock.unlock();
        // Queued, waited for and read back while the first thread is inside its recording: this work
        // must run now, on the real stream, not end up in the graph.
        be->copy(c, d);
        be->synchronize();
        other_saw = test::download(*be, d);
        lock.lock();
        other_done = true;
        cv.notify_all();
    });
    auto rec = be->record([&] {
        be->axpy(2.f, a, b);
        std::unique_lock<std::mutex> lock(m);
        recording = true;
        cv.notify_all();
        cv.wait(lock, [&] { return other_done; });
    });
    other.join();
    EXPECT_TRUE(rec->captured()) << rec->why_not_captured();
    EXPECT_EQ(other_saw, test::download(*be, c));
    EXPECT_EQ(test::download(*be, b), std::vector<test::cdouble>(4096, 0.0));
    rec->replay();
    CArray want = be->zeros({4096});
    be->axpy(2.f, a, want);
    EXPECT_EQ(test::download(*be, b), test::download(*be, want));
}

// A small CG-SENSE problem on the composed operator (FFTs through the backend: cuFFT inside the graph)
// and on the fused one.
TEST_P(BackendRecord, ConjugateGradientReplaysItsIterationsBitForBit) {
    const size_t ro = 64, e1 = 64, coils = 4;
    const CArray maps = test::random_on(*be, {ro, e1, coils}, 6);
    std::vector<float> lines(e1, 0.f);
    for (size_t y = 0; y < e1; ++y) lines[y] = (y % 2 == 0 || (y >= 28 && y < 36)) ? 1.f : 0.f;
    RArray mask = RArray::host({ro, e1});
    for (size_t y = 0; y < e1; ++y)
        for (size_t x = 0; x < ro; ++x) mask.data()[y * ro + x] = lines[y];
    const LinOp e = compose(sampled_fft(be, {ro, e1, coils}, 0b011u, mask), sense(be, maps));
    const CArray y = test::random_on(*be, {ro, e1, coils}, 7);
    CArray b = be->empty({ro, e1});
    e->adjoint(y, b);
    for (const bool fused : {false, true}) {
        SCOPED_TRACE(fused ? "fused normal operator" : "composed normal operator");
        const LinOp n = fused ? sense_normal(be, be->to_host(maps), lines, 0.01f) : tikhonov_normal(e, 0.01f);
        auto solve = [&](bool record) {
            ConjugateGradient cg(n, b, be->zeros({ro, e1}), CGOptions{12, 0.0, record});
            while (!cg.done()) cg.update();
            if (record && be->device() == Device::Cuda) {
                EXPECT_TRUE(cg.recorded()) << cg.why_not_recorded();
            }
            if (!record) {
                EXPECT_FALSE(cg.recorded());
            }
            return std::make_pair(test::download(*be, cg.x()), cg.residuals());
        };
        const auto plain = solve(false), replayed = solve(true);
        EXPECT_EQ(replayed.first, plain.first);
        EXPECT_EQ(replayed.second, plain.second);
        EXPECT_EQ(replayed.second.size(), 13u);
        EXPECT_LT(replayed.second.back(), 0.5 * replayed.second.front());
    }
}

TEST_P(BackendRecord, ConjugateGradientWithAnOperatorThatReadsBackStillSolves) {
    // An operator that goes through the host (test code, a CPU-only step in a chain) cannot be captured:
    // CG says so and calls the iteration each time.
    class HostScale final : public LinearOperator {
    public:
        explicit HostScale(std::shared_ptr<Backend> be) : LinearOperator(std::move(be), Shape{16}, Shape{16}, "host_scale") {}

    protected:
        void apply_forward(const CArray& x, CArray& y) override {
            CArray h = CArray::host(x.shape());
            backend().copy(x, h);
            for (size_t i = 0; i < h.size(); ++i) h.data()[i] *= float(i + 1);
            backend().copy(h, y);
        }
        void apply_adjoint(const CArray& y, CArray& x) override { apply_forward(y, x); }
    };
    const LinOp n = std::make_shared<HostScale>(be);
    const CArray b = test::random_on(*be, {16}, 8);
    ConjugateGradient cg(n, b, be->zeros({16}), CGOptions{20, 1e-6});
    while (!cg.done()) cg.update();
    EXPECT_FALSE(cg.recorded());
    if (be->device() == Device::Cuda) {
        EXPECT_NE(cg.why_not_recorded().find("host copy"), std::string::npos) << cg.why_not_recorded();
    }
    const auto x = test::download(*be, cg.x()), bb = test::download(*be, b);
    for (size_t i = 0; i < 16; ++i) EXPECT_LE(std::abs(x[i] * double(i + 1) - bb[i]), 1e-4 * std::abs(bb[i]) + 1e-6) << i;
}

}  // namespace
}  // namespace larmor
