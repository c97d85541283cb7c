// The process-wide plan store (core/plan_registry.h) and its use by the FFTW plans
// (core/cpu/fftw_plans.h): a shape planned once per process, concurrent first uses waiting for one
// creation, other keys never waiting for it, failures reported and retried, the bound, and images
// identical from one session (backend) to the next.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/cpu/fftw_plans.h"
#include "core/plan_registry.h"
#include "tests/support/reference_dft.h"

namespace larmor {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

TEST(PlanRegistry, ConcurrentFirstUsesOfOneKeyWaitForOneCreation) {
    PlanRegistry<int> r(16);
    std::atomic<int> made{0};
    auto make = [&] {
        ++made;
        std::this_thread::sleep_for(milliseconds(200));
        return std::make_shared<int>(7);
    };
    std::vector<std::future<std::shared_ptr<int>>> uses;
    for (int i = 0; i < 8; ++i) uses.push_back(std::async(std::launch::async, [&] { return r.get({1, 2}, make); }));
    std::shared_ptr<int> first = uses[0].get();
    for (auto& u : uses) {
        if (!u.valid()) continue;  // uses[0], read above
        EXPECT_EQ(u.get(), first);  // the same plan object, not an equal one
    }
    EXPECT_EQ(made.load(), 1);
    const PlanRegistryStats s = r.stats();
    EXPECT_EQ(s.created, 1u);
    EXPECT_EQ(s.reused, 7u);
    EXPECT_EQ(s.entries, 1u);
}

// A slow creation (an awkward FFTW size, an LTO callback plan) holds no lock another key needs: the
// creation of key 1 does not finish until uses of key 2 have returned, so a registry that made them
// wait would never get there (the wait below gives up after 30 s and fails instead of hanging).
TEST(PlanRegistry, ASlowCreationDoesNotHoldUpOtherKeys) {
    PlanRegistry<int> r(16);
    std::promise<void> started, release;
    std::shared_future<void> released = release.get_future().share();
    auto slow = std::async(std::launch::async, [&] {
        return r.get({1}, [&] {
            started.set_value();
            released.wait();
            return std::make_shared<int>(1);
        });
    });
    started.get_future().wait();
    auto other = std::async(std::launch::async, [&] {
        return *r.get({2}, [] { return std::make_shared<int>(2); }) + *r.get({2}, [] { return std::make_shared<int>(3); });
    });
    const bool finished = other.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
    release.set_value();
    EXPECT_TRUE(finished) << "uses of another key waited for the creation in progress";
    EXPECT_EQ(other.get(), 4);
    EXPECT_EQ(*slow.get(), 1);
}

TEST(PlanRegistry, AFailedCreationReachesEveryWaiterAndIsTriedAgain) {
    PlanRegistry<int> r(16);
    std::atomic<int> calls{0};
    auto failing = [&]() -> std::shared_ptr<int> {
        ++calls;
        std::this_thread::sleep_for(milliseconds(100));
        throw std::runtime_error("cufftMakePlanMany: out of GPU memory");
    };
    auto a = std::async(std::launch::async, [&] { return r.get({5}, failing); });
    std::this_thread::sleep_for(milliseconds(20));
    auto b = std::async(std::launch::async, [&] { return r.get({5}, failing); });
    EXPECT_THROW(a.get(), std::runtime_error);
    EXPECT_THROW(b.get(), std::runtime_error);
    EXPECT_EQ(calls.load(), 1);
    EXPECT_EQ(r.stats().entries, 0u);
    EXPECT_EQ(*r.get({5}, [] { return std::make_shared<int>(9); }), 9);  // not stored as failed
    EXPECT_EQ(r.stats().failed, 1u);
}

TEST(PlanRegistry, TheBoundDropsTheLeastRecentlyUsedIdlePlansOnly) {
    PlanRegistry<int> r(3);
    std::shared_ptr<int> held = r.get({0}, [] { return std::make_shared<int>(0); });  // a session holds it
    for (size_t k = 1; k <= 5; ++k) r.get({k}, [k] { return std::make_shared<int>(int(k)); });
    PlanRegistryStats s = r.stats();
    EXPECT_EQ(s.entries, 3u);
    EXPECT_EQ(s.dropped, 3u);
    // The held plan stayed, although it is the oldest; the two newest idle ones too.
    int made = 0;
    auto make = [&] {
        ++made;
        return std::make_shared<int>(-1);
    };
    EXPECT_EQ(r.get({0}, make), held);
    EXPECT_EQ(*r.get({5}, make), 5);
    EXPECT_EQ(made, 0);
    EXPECT_EQ(*r.get({1}, make), -1);  // dropped, so made again
    held.reset();
    r.drop_idle();
    EXPECT_EQ(r.stats().entries, 0u);
}

// Issue 19, item 5: stored plans are charged to the server's budget and give way before a session is
// refused for memory; a plan the budget cannot take is still used, only not kept.
TEST(PlanRegistry, StoredPlansAreChargedAndGiveTheirBytesBack) {
    auto budget = std::make_shared<MemoryBudget>("server host memory budget", 1000);
    PlanRegistry<int> r(16);
    r.charge_to(budget, [](const int& plan) { return uint64_t(plan); });
    std::shared_ptr<int> held = r.get({1}, [] { return std::make_shared<int>(300); });
    r.get({2}, [] { return std::make_shared<int>(500); });
    EXPECT_EQ(budget->in_use(), 800u);
    EXPECT_EQ(r.stats().charged_bytes, 800u);
    // No room for 400 more: handed out, not stored (the next use makes it again).
    EXPECT_EQ(*r.get({3}, [] { return std::make_shared<int>(400); }), 400);
    EXPECT_EQ(r.stats().entries, 2u);
    EXPECT_EQ(budget->in_use(), 800u);
    // Under memory pressure the idle plan goes; the one a session holds stays.
    EXPECT_EQ(r.drop_idle(), 500u);
    EXPECT_EQ(budget->in_use(), 300u);
    EXPECT_EQ(r.stats().entries, 1u);
    held.reset();
    EXPECT_EQ(r.drop_idle(), 300u);
    EXPECT_EQ(budget->in_use(), 0u);
}

// Two backends (two sessions) transform the same shape: one plan for the process, and bit-identical
// results (each session measuring its own plan could pick another algorithm, whose rounding differs).
TEST(FftwPlans, SessionsShareOnePlanPerShapeAndGetIdenticalResults) {
    const Shape shape{192, 160, 4};  // measured (30720 x 4 elements, 2^a 3^b 5^c lengths), and no other test's
    const CArray x = test::random_array(shape, 41);
    std::vector<CArray> out;
    const uint64_t before = fftw_plan_stats().created;
    for (int session = 0; session < 3; ++session) {
        auto be = make_cpu_backend();
        CArray y = be->empty(shape);
        be->fft(x, y, 3u, FFTDirection::Forward);
        out.push_back(be->to_host(y));
    }
    EXPECT_EQ(fftw_plan_stats().created - before, 1u) << "each session planned the shape again";
    for (size_t s = 1; s < out.size(); ++s)
        for (size_t i = 0; i < out[0].size(); ++i)
            ASSERT_EQ(out[s].data()[i], out[0].data()[i]) << "session " << s << " element " << i;
}

// A second session's first transform of a shape the first one measured is not planned again.
TEST(FftwPlans, ASecondSessionPaysNoPlanning) {
    const Shape shape{224, 224, 8};
    const CArray x = test::random_array(shape, 42);
    double seconds[2] = {0, 0};
    uint64_t planned[2] = {0, 0};
    for (int session = 0; session < 2; ++session) {
        auto be = make_cpu_backend();
        CArray y = be->empty(shape);
        const uint64_t before = fftw_plan_stats().created;
        const auto t0 = Clock::now();
        be->fft(x, y, 3u, FFTDirection::Forward);
        seconds[session] = seconds_since(t0);
        planned[session] = fftw_plan_stats().created - before;
    }
    std::printf("[ fft ] first session's transform %.4f s (planned), second session's %.4f s\n", seconds[0], seconds[1]);
    EXPECT_EQ(planned[0], 1u);
    EXPECT_EQ(planned[1], 0u);
}

TEST(FftwPlans, WisdomIsKeptInTheFileAndACorruptFileIsReported) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("larmor_wisdom_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const fs::path file = dir / "fftw_wisdom";
    {
        std::ofstream(file) << "this is not FFTW wisdom\n";
    }
    const std::string problem = fftw_wisdom_file(file.string());
    EXPECT_NE(problem.find(file.string()), std::string::npos) << problem;
    // A new measured shape rewrites the file with FFTW's wisdom.
    auto be = make_cpu_backend();
    const Shape shape{200, 168, 2};
    CArray y = be->empty(shape);
    be->fft(test::random_array(shape, 43), y, 3u, FFTDirection::Forward);
    std::ifstream in(file);
    std::string first_line;
    std::getline(in, first_line);
    EXPECT_NE(first_line.find("fftw"), std::string::npos) << "wisdom file starts with '" << first_line << "'";
    EXPECT_EQ(fftw_wisdom_file(file.string()), "");  // and it reads back
    EXPECT_EQ(fftw_wisdom_file(""), "");
    fs::remove_all(dir);
}

}  // namespace
}  // namespace larmor
