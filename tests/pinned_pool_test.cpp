// The page-locked blocks the CUDA backend keeps between sessions (cuda/pinned_pool.h): a new session
// reuses what an ended one let go, idle blocks are charged to the budget given and freed when it has
// no room, the bounds hold, and release frees them. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/backend.h"
#include "core/memory_budget.h"
#include "tests/support/reference_dft.h"
#ifdef LARMOR_WITH_CUDA
#include "cuda/device_context.h"
#include "cuda/pinned_pool.h"
#endif

namespace larmor {
namespace {

#ifdef LARMOR_WITH_CUDA
#define REQUIRE_CUDA() \
    if (!larmor::cuda_available()) GTEST_SKIP() << "no CUDA device"

// Each test starts from an empty pool with no budget.
struct PinnedPoolTest : ::testing::Test {
    void SetUp() override {
        if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
        cuda::set_pinned_pool_budget(nullptr);
        cuda::release_idle_pinned_blocks(UINT64_MAX);
    }
    void TearDown() override {
        cuda::set_pinned_pool_budget(nullptr);
        cuda::release_idle_pinned_blocks(UINT64_MAX);
    }
};

TEST_F(PinnedPoolTest, ANewSessionReusesTheBlocksAnEndedOneLetGo) {
    const CArray x = test::random_array({512, 16, 8}, 3);
    auto session = [&] {
        auto be = make_cuda_backend();
        CArray d = be->empty(x.shape());
        be->upload_rows(x.data(), 512, 512, 16 * 8, d, 0, 512);  // through the session's upload staging
        const CArray back = be->to_host(d);  // through its download blocks
        EXPECT_EQ(std::vector<cfloat>(back.data(), back.data() + back.size()),
                  std::vector<cfloat>(x.data(), x.data() + x.size()));
    };
    session();
    const cuda::PinnedPoolStats after_first = cuda::pinned_pool_stats();
    EXPECT_GE(after_first.idle_blocks, 2u) << "the upload staging and the download block were not kept";
    session();
    const cuda::PinnedPoolStats after_second = cuda::pinned_pool_stats();
    EXPECT_GE(after_second.reused - after_first.reused, 2u) << "the second session allocated its own";
    EXPECT_EQ(after_second.idle_blocks, after_first.idle_blocks);
}

TEST_F(PinnedPoolTest, IdleBlocksAreChargedAndGiveWay) {
    auto server = std::make_shared<MemoryBudget>("server host memory", 3 << 20);
    cuda::set_pinned_pool_budget(server);
    std::vector<void*> blocks;
    for (int i = 0; i < 4; ++i) blocks.push_back(cuda::alloc_pinned(0, 1 << 20, "test block"));
    for (void* p : blocks) cuda::free_pinned(p, 1 << 20);  // three kept within the budget, one freed
    EXPECT_EQ(cuda::pinned_pool_stats().idle_blocks, 3u);
    EXPECT_EQ(server->in_use(), uint64_t(3) << 20);
    void* again = cuda::alloc_pinned(0, 1 << 20, "test block");  // from the pool, uncharged there
    EXPECT_EQ(server->in_use(), uint64_t(2) << 20);
    cuda::free_pinned(again, 1 << 20);
    EXPECT_EQ(cuda::release_idle_pinned_blocks(1), uint64_t(1) << 20);  // the oldest, and only what was asked
    EXPECT_EQ(server->in_use(), uint64_t(2) << 20);
    EXPECT_EQ(cuda::release_idle_pinned_blocks(UINT64_MAX), uint64_t(2) << 20);
    EXPECT_EQ(server->in_use(), 0u);
}

TEST_F(PinnedPoolTest, TheBoundsHold) {
    std::vector<void*> blocks;
    for (size_t i = 0; i < cuda::kIdlePerSize + 2; ++i) blocks.push_back(cuda::alloc_pinned(0, 4096, "test block"));
    for (void* p : blocks) cuda::free_pinned(p, 4096);
    EXPECT_EQ(cuda::pinned_pool_stats().idle_blocks, cuda::kIdlePerSize);
    // One block larger than the whole pool is never kept.
    void* big = cuda::alloc_pinned(0, cuda::kIdleBytes + 4096, "test block");
    const uint64_t refused = cuda::pinned_pool_stats().refused;
    cuda::free_pinned(big, cuda::kIdleBytes + 4096);
    EXPECT_EQ(cuda::pinned_pool_stats().refused, refused + 1);
}
#endif

}  // namespace
}  // namespace larmor
