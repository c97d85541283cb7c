#pragma once
// Page-locked host blocks kept by the process between sessions. cudaHostAlloc pins pages one by one
// (about 2 ms for the 8 MiB upload staging of a session on the H200) and cudaFreeHost unpins them
// (0.6 ms): measured by an interposer on the CUDA runtime, the two pinned blocks every CUDA session
// made and freed cost about 5 ms of its first frame (bench/RESULTS.md, session 20). Blocks a session
// lets go are kept here by exact size and handed to the next session that asks for that size.
//
// Bounded (kIdleBytes in all, kIdlePerSize of one size) and accounted: while idle, a block is charged
// to the budget given by set_pinned_pool_budget (the server's host budget), so the server's figures
// hold it, and when that budget has no room the block is freed instead of kept;
// release_idle_pinned_blocks frees idle blocks when admission needs the room.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/memory_budget.h"

namespace larmor::cuda {

constexpr size_t kIdleBytes = size_t{256} << 20;
constexpr size_t kIdlePerSize = 8;

// A kept block of exactly `bytes`, contents unspecified, or nullptr when none is kept.
void* pinned_pool_take(size_t bytes) noexcept;
// Keeps `p` (`bytes`, from cudaHostAlloc) for a later take; false when the pool is full or its budget
// has no room, and the caller frees it.
bool pinned_pool_keep(void* p, size_t bytes) noexcept;

void set_pinned_pool_budget(std::shared_ptr<MemoryBudget> budget);

// Frees idle blocks, the least recently kept first, until at least `bytes` are freed or none is left;
// returns the bytes freed.
uint64_t release_idle_pinned_blocks(uint64_t bytes) noexcept;

struct PinnedPoolStats {
    size_t idle_bytes = 0, idle_blocks = 0;
    uint64_t reused = 0, kept = 0, refused = 0;
};
PinnedPoolStats pinned_pool_stats();

}  // namespace larmor::cuda
