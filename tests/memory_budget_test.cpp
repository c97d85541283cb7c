// Memory budgets (core/memory_budget.h), the server's limits and admission (server/memory_limits.h,
// server/memory_admission.h), and the backends charging their arrays to them.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <ismrmrd/xml.h>

#include "core/backend.h"
#include "core/memory_budget.h"
#include "gadgets/encoding.h"
#include "gadgets/precompute_cache.h"
#include "server/memory_admission.h"
#include "server/memory_limits.h"

namespace larmor {
namespace {

using namespace std::chrono_literals;
constexpr uint64_t MiB = uint64_t{1} << 20, GiB = uint64_t{1} << 30;

std::string refusal(const std::function<void()>& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

TEST(MemoryBudget, ChargesWithinItsLimitAndNamesItselfWhenFull) {
    MemoryBudget b("test budget (--test)", 100);
    b.reserve(60, "a");
    b.reserve(40, "b");
    EXPECT_EQ(b.in_use(), 100u);
    try {
        b.reserve(1, "one more byte");
        FAIL() << "over the limit";
    } catch (const MemoryBudgetExceeded& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("one more byte needs 1 bytes more"), std::string::npos) << m;
        EXPECT_NE(m.find("test budget (--test) of 100 bytes"), std::string::npos) << m;
        EXPECT_EQ(e.requested(), 1u);
        EXPECT_EQ(e.limit(), 100u);
        EXPECT_EQ(e.in_use(), 100u);
    }
    EXPECT_EQ(b.in_use(), 100u) << "a refused request charges nothing";
    b.release(60);
    EXPECT_EQ(b.in_use(), 40u);
    EXPECT_EQ(b.peak(), 100u);
}

TEST(MemoryBudget, ChildChargesItsParentAndTheFullerOneRefuses) {
    auto server = std::make_shared<MemoryBudget>("server budget", 1000);
    auto a = std::make_shared<MemoryBudget>("session budget", 800, server);
    auto b = std::make_shared<MemoryBudget>("session budget", 800, server);
    a->reserve(600, "x");
    EXPECT_EQ(server->in_use(), 600u);
    // b is far from its own limit, but the server has only 400 left: the server's name is in the error.
    const std::string m = refusal([&] { b->reserve(500, "y"); });
    EXPECT_NE(m.find("over the server budget"), std::string::npos) << m;
    EXPECT_EQ(b->in_use(), 0u) << "nothing charged to the child when the parent refuses";
    EXPECT_EQ(server->in_use(), 600u);
    a.reset();  // a session that goes gives back what it held (its arrays hold it alive otherwise)
    EXPECT_EQ(server->in_use(), 0u);
}

TEST(MemoryBudget, ClaimReservesAheadAndUseWithinItCostsTheParentNothingMore) {
    auto server = std::make_shared<MemoryBudget>("server budget", 1000);
    auto s = std::make_shared<MemoryBudget>("session budget", 1000, server);
    ASSERT_TRUE(s->claim(700, 0ms));
    EXPECT_EQ(server->in_use(), 700u);
    s->reserve(500, "within the claim");
    EXPECT_EQ(server->in_use(), 700u);
    s->reserve(300, "beyond the claim");  // 800 in use: 100 past the claim
    EXPECT_EQ(server->in_use(), 800u);
    s->release(800);
    EXPECT_EQ(server->in_use(), 700u) << "the claim stays until the session goes";
    s.reset();
    EXPECT_EQ(server->in_use(), 0u);
}

TEST(MemoryBudget, ClaimWaitsForRoomAndGivesUpAfterItsWait) {
    auto server = std::make_shared<MemoryBudget>("server budget", 1000);
    auto first = std::make_shared<MemoryBudget>("session", 1000, server);
    ASSERT_TRUE(first->claim(800, 0ms));
    auto second = std::make_shared<MemoryBudget>("session", 1000, server);
    EXPECT_FALSE(second->claim(500, 50ms)) << "no room and nobody leaves";
    EXPECT_EQ(server->in_use(), 800u);
    auto later = std::async(std::launch::async, [&] {
        std::this_thread::sleep_for(100ms);
        first.reset();
    });
    EXPECT_TRUE(second->claim(500, 10s)) << "room once the first session went";
    later.get();
    EXPECT_EQ(server->in_use(), 500u);
}

TEST(MemoryBudget, ConcurrentChargesAddUpExactly) {
    auto server = std::make_shared<MemoryBudget>("server budget", MemoryBudget::kUnlimited);
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&] {
            auto s = std::make_shared<MemoryBudget>("session", MemoryBudget::kUnlimited, server);
            for (int i = 0; i < 10000; ++i) {
                BudgetCharge c(s, 64, "block");
            }
            s->reserve(1000, "kept");
            s->release(1000);
        });
    for (auto& t : threads) t.join();
    EXPECT_EQ(server->in_use(), 0u);
    EXPECT_GE(server->peak(), 64u);
}

TEST(MemoryBudget, SaturatingArithmeticNeverWraps) {
    const uint64_t max = std::numeric_limits<uint64_t>::max();
    EXPECT_EQ(saturating_mul(uint64_t{1} << 40, uint64_t{1} << 30), max);
    EXPECT_EQ(saturating_mul(0, max), 0u);
    EXPECT_EQ(saturating_add(max - 1, 5), max);
    EXPECT_EQ(saturating_add(2, 3), 5u);
    EXPECT_EQ(format_bytes(4 * GiB), "4.00 GiB (4294967296 bytes)");
    EXPECT_EQ(format_bytes(512), "512 bytes");
}

ISMRMRD::IsmrmrdHeader header_with(uint16_t x, uint16_t y, uint16_t z, uint16_t channels) {
    ISMRMRD::IsmrmrdHeader h;
    ISMRMRD::Encoding e;
    e.encodedSpace.matrixSize = {x, y, z};
    e.reconSpace.matrixSize = {x, y, z};
    h.encoding.push_back(e);
    ISMRMRD::AcquisitionSystemInformation sys;
    sys.receiverChannels = channels;
    h.acquisitionSystemInformation = sys;
    return h;
}

TEST(MemoryBudget, DeclaredKSpaceOfTheIssuesHeaders) {
    // 1024 x 1024 x 64 x 8 channels of complex float: the 4 GiB buffer of the hostile stream.
    EXPECT_EQ(declared_kspace_bytes(header_with(1024, 1024, 64, 8)), 4 * GiB);
    // 4096 x 4096 x 256 x 64: 2 TiB.
    EXPECT_EQ(declared_kspace_bytes(header_with(4096, 4096, 256, 64)), uint64_t{2} << 40);
    // The largest a header can declare saturates instead of wrapping to a small number.
    EXPECT_EQ(declared_kspace_bytes(header_with(65535, 65535, 65535, 65535), 10), std::numeric_limits<uint64_t>::max());
    EXPECT_EQ(declared_image_bytes(header_with(256, 256, 1, 32)), 256u * 256u * 8u);
}

TEST(MemoryLimits, ParsesSizesAndPercentages) {
    using server::parse_memory_size;
    EXPECT_EQ(parse_memory_size("4GiB", 0, "--x"), 4 * GiB);
    EXPECT_EQ(parse_memory_size("4 GB", 0, "--x"), 4 * GiB);
    EXPECT_EQ(parse_memory_size("512M", 0, "--x"), 512 * MiB);
    EXPECT_EQ(parse_memory_size("1.5g", 0, "--x"), 3 * GiB / 2);
    EXPECT_EQ(parse_memory_size("1073741824", 0, "--x"), GiB);
    EXPECT_EQ(parse_memory_size("0", 0, "--x"), 0u);
    EXPECT_EQ(parse_memory_size("75%", 24 * GiB, "--x"), 18 * GiB);
    EXPECT_EQ(parse_memory_size("100%", 123, "--x"), 123u);
    for (const char* bad : {"", "abc", "-1G", "150%", "4XB", "nan", "inf", "1e30T"}) {
        const std::string m = refusal([&] { parse_memory_size(bad, GiB, "--memory-limit"); });
        EXPECT_NE(m.find("--memory-limit '" + std::string(bad) + "'"), std::string::npos) << bad << ": " << m;
    }
}

TEST(MemoryLimits, DefaultsOnA24GiBHost) {
    server::MemoryLimitOptions o;
    uint64_t host = 0, session = 0;
    server::resolve_host_limits(o, 24 * GiB, host, session);
    EXPECT_EQ(host, 18 * GiB);
    EXPECT_EQ(session, 18 * GiB / 4);
    EXPECT_GT(server::machine_memory(), 0u);
}

uint64_t eight_gib_device(int) { return 8 * GiB; }

TEST(ServerMemory, RefusesOverTheSessionLimitAndWhenBusy) {
    server::MemoryLimitOptions o;
    o.host = "1GiB";
    o.session_host = "50%";
    o.device = "100%";
    o.session_device = "25%";
    o.admission_wait = std::chrono::seconds(0);
    const server::ServerMemory memory(o, 64 * GiB, {0}, &eight_gib_device);
    EXPECT_NE(memory.describe().find("CUDA device 0 8.00 GiB"), std::string::npos) << memory.describe();

    std::string m = refusal([&] { memory.admit(600 * MiB, -1, "the header"); });
    EXPECT_NE(m.find("the header: the chain needs an estimated 600 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("session host memory budget (--session-memory-limit) of 512 MiB"), std::string::npos) << m;

    m = refusal([&] { memory.admit(3 * GiB, 0, "the header"); });
    EXPECT_NE(m.find("--session-device-memory-limit"), std::string::npos) << m;

    MemoryBudgets a = memory.admit(400 * MiB, -1, "first");
    MemoryBudgets b = memory.admit(400 * MiB, -1, "second");
    EXPECT_EQ(memory.host()->in_use(), 800 * MiB);
    m = refusal([&] { memory.admit(400 * MiB, -1, "third"); });
    EXPECT_NE(m.find("server busy: third"), std::string::npos) << m;
    EXPECT_NE(m.find("other sessions hold 800 MiB"), std::string::npos) << m;
    a = {};
    EXPECT_NO_THROW(memory.admit(400 * MiB, -1, "third, later"));
}

// Kernels in the precompute cache are charged to the server's host budget, but a host session that
// would not fit beside them makes the cache give up its least recently used entries rather than wait.
TEST(ServerMemory, AdmissionEvictsThePrecomputeCacheBeforeRefusing) {
    server::MemoryLimitOptions o;
    o.host = "1GiB";
    o.session_host = "50%";
    o.admission_wait = std::chrono::seconds(0);
    server::ServerMemory memory(o, 64 * GiB, {}, &eight_gib_device);
    auto cache = std::make_shared<PrecomputeCache>(PrecomputeCache::Options{600 * MiB, "", 0}, memory.host());
    for (const char* key : {"a", "b", "c"})  // 3 x 128 MiB
        cache->get(key, false, [] { return CArray::host({16 * MiB}); });
    EXPECT_EQ(memory.host()->in_use(), 384 * MiB);
    MemoryBudgets first = memory.admit(400 * MiB, -1, "first");  // fits beside the cache
    EXPECT_EQ(cache->stats().entries, 3u);
    // 784 MiB held: the next 400 MiB needs 184 MiB of the cache, two entries, oldest first.
    EXPECT_THROW(memory.admit(400 * MiB, -1, "no reclaimer yet"), server::AdmissionError);
    memory.set_reclaimer([&](int device, uint64_t bytes) { return cache->shrink(bytes, device); });
    MemoryBudgets second = memory.admit(400 * MiB, -1, "second");
    EXPECT_EQ(cache->stats().entries, 1u);
    EXPECT_EQ(cache->stats().evicted, 2u);
    EXPECT_EQ(cache->get("c", false, [] { return CArray::host({1}); }).source, PrecomputeCache::Source::Memory);
    // With the cache empty and the sessions holding the rest, a third is still told the server is busy.
    const std::string m = refusal([&] { memory.admit(400 * MiB, -1, "third"); });
    EXPECT_NE(m.find("server busy: third"), std::string::npos) << m;
    EXPECT_EQ(cache->stats().entries, 0u);
}

TEST(BackendBudget, CpuArraysAreChargedAndRefusedBeforeAllocation) {
    auto budget = std::make_shared<MemoryBudget>("session host memory budget", 4 * MiB);
    auto be = make_cpu_backend(1, MemoryBudgets{budget, nullptr});
    {
        CArray a = be->zeros({256, 256});  // 512 KiB
        RArray r = be->zeros_real({1024});
        EXPECT_EQ(budget->in_use(), 256u * 256u * 8u + 1024u * 4u);
        CArray view = a;  // a second handle on the same storage costs nothing
        EXPECT_EQ(budget->in_use(), 256u * 256u * 8u + 1024u * 4u);
        const std::string m = refusal([&] { be->zeros({1024, 1024}); });
        EXPECT_NE(m.find("host array [1024x1024] needs 8.00 MiB"), std::string::npos) << m;
    }
    EXPECT_EQ(budget->in_use(), 0u);
    EXPECT_EQ(be->budgets().host, budget);
}

TEST(BackendBudget, CudaDeviceArraysAndTheBlockCacheAreCharged) {
    if (!cuda_available()) GTEST_SKIP() << "no usable CUDA device";
    auto device = std::make_shared<MemoryBudget>("session device budget", 64 * MiB);
    auto host = std::make_shared<MemoryBudget>("session host budget", MemoryBudget::kUnlimited);
    auto be = make_cuda_backend(0, MemoryBudgets{host, device});
    const uint64_t baseline = device->in_use();  // the backend's own scratch
    {
        CArray a = be->zeros({2 * 1024 * 1024});  // 16 MiB
        EXPECT_EQ(device->in_use() - baseline, 16 * MiB);
    }
    be->synchronize();
    EXPECT_EQ(device->in_use() - baseline, 16 * MiB) << "a cached block still counts";
    {
        // 48 MiB fits only once the cached 16 MiB block is given back to the driver.
        CArray b = be->zeros({6 * 1024 * 1024});
        EXPECT_EQ(device->in_use() - baseline, 48 * MiB);
        const std::string m = refusal([&] { be->zeros({4 * 1024 * 1024}); });
        EXPECT_NE(m.find("session device budget"), std::string::npos) << m;
    }
    CArray h = be->to_host(be->zeros({1024}));
    EXPECT_GT(host->in_use(), 0u) << "page-locked download buffers are host memory";
}

}  // namespace
}  // namespace larmor
