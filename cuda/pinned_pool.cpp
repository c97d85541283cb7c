#include "cuda/pinned_pool.h"

#include <cuda_runtime.h>

#include <deque>
#include <mutex>
#include <utility>

#include "core/backend.h"

namespace larmor::cuda {
namespace {

struct Pool {
    std::mutex mutex;
    std::deque<std::pair<void*, size_t>> idle;  // oldest first
    size_t idle_bytes = 0;
    std::shared_ptr<MemoryBudget> budget;
    PinnedPoolStats stats;
};

Pool& pool() {
    static Pool* p = new Pool;  // never destroyed: blocks may come back during static destruction
    return *p;
}

void free_block(void* p) noexcept {
    if (cudaFreeHost(p) != cudaSuccess) cudaGetLastError();
}

}  // namespace

void* pinned_pool_take(size_t bytes) noexcept {
    Pool& pl = pool();
    std::lock_guard<std::mutex> lock(pl.mutex);
    // The newest block of the size: its pages are the likeliest to be warm in the caches.
    for (auto it = pl.idle.rbegin(); it != pl.idle.rend(); ++it)
        if (it->second == bytes) {
            void* p = it->first;
            pl.idle.erase(std::next(it).base());
            pl.idle_bytes -= bytes;
            if (pl.budget) pl.budget->release(bytes);
            ++pl.stats.reused;
            return p;
        }
    return nullptr;
}

bool pinned_pool_keep(void* p, size_t bytes) noexcept {
    if (!p || bytes == 0) return false;
    Pool& pl = pool();
    std::lock_guard<std::mutex> lock(pl.mutex);
    size_t same = 0;
    for (const auto& b : pl.idle) same += b.second == bytes;
    bool keep = same < kIdlePerSize && pl.idle_bytes + bytes <= kIdleBytes;
    if (keep && pl.budget) {
        try {
            pl.budget->reserve(bytes, "idle page-locked host block kept between sessions");
        } catch (...) {
            keep = false;
        }
    }
    if (!keep) {
        ++pl.stats.refused;
        return false;
    }
    try {
        pl.idle.emplace_back(p, bytes);
    } catch (...) {
        if (pl.budget) pl.budget->release(bytes);
        return false;
    }
    pl.idle_bytes += bytes;
    ++pl.stats.kept;
    return true;
}

void set_pinned_pool_budget(std::shared_ptr<MemoryBudget> budget) {
    Pool& pl = pool();
    std::lock_guard<std::mutex> lock(pl.mutex);
    if (pl.budget) pl.budget->release(pl.idle_bytes);
    pl.budget = std::move(budget);
    if (!pl.budget) return;
    // What is idle now moves to the new budget, as far as it has room; the rest is freed.
    while (!pl.idle.empty()) {
        try {
            pl.budget->reserve(pl.idle_bytes, "idle page-locked host blocks kept between sessions");
            return;
        } catch (...) {
            free_block(pl.idle.front().first);
            pl.idle_bytes -= pl.idle.front().second;
            pl.idle.pop_front();
        }
    }
}

uint64_t release_idle_pinned_blocks(uint64_t bytes) noexcept {
    Pool& pl = pool();
    std::lock_guard<std::mutex> lock(pl.mutex);
    uint64_t freed = 0;
    while (freed < bytes && !pl.idle.empty()) {
        const auto [p, n] = pl.idle.front();
        pl.idle.pop_front();
        free_block(p);
        pl.idle_bytes -= n;
        if (pl.budget) pl.budget->release(n);
        freed += n;
    }
    return freed;
}

PinnedPoolStats pinned_pool_stats() {
    Pool& pl = pool();
    std::lock_guard<std::mutex> lock(pl.mutex);
    PinnedPoolStats s = pl.stats;
    s.idle_bytes = pl.idle_bytes;
    s.idle_blocks = pl.idle.size();
    return s;
}

}  // namespace larmor::cuda

namespace larmor {

void set_cuda_host_cache_budget(std::shared_ptr<MemoryBudget> host) { cuda::set_pinned_pool_budget(std::move(host)); }

uint64_t release_idle_cuda_host_memory(uint64_t bytes) { return cuda::release_idle_pinned_blocks(bytes); }

uint64_t idle_cuda_host_memory() { return cuda::pinned_pool_stats().idle_bytes; }

}  // namespace larmor
