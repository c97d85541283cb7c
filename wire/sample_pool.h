#pragma once
// Storage for sample vectors that is handed back and reused instead of returned to malloc. An
// acquisition's samples (32 channels x 512 samples: 128 KiB) are one block above glibc's mmap
// threshold; received by one thread and freed by another, such blocks made the server's heaps grow and
// shrink with every few acquisitions, so the socket's copy into each fresh block faulted its pages in
// and the kernel zeroed them first (perf of a passthrough session, 2026-12-06: page faults and page
// clearing about a fifth of larmor-server's CPU time; passthrough 157-191 ms against 103-135 ms with
// glibc's trimming turned off, the raw socket copy 113-123 ms). Kept blocks stay resident, so a steady
// stream of same-sized acquisitions allocates nothing and touches no new page.
//
// Bounded: blocks from 64 KiB to 4 MiB, at most kPoolBytes held in all, process-wide (one lock per
// allocation and per free, against a page fault per 4 KiB). Blocks outside the range, or beyond the
// bound, go to and come from the global operator new as before; a full pool drops its oldest blocks
// to keep a freed one. The held bytes are not charged to any
// session's budget: they are the allocator's, like malloc's own free lists.
#include <cstddef>

namespace larmor::wire {

inline constexpr size_t kPoolMinBlock = size_t{64} << 10;
inline constexpr size_t kPoolMaxBlock = size_t{4} << 20;
inline constexpr size_t kPoolBytes = size_t{32} << 20;

// A block of `bytes` (reused when one of that size is held), aligned for any sample type.
void* pool_allocate(size_t bytes);
// Back to the pool (or freed); `bytes` as allocated.
void pool_deallocate(void* p, size_t bytes) noexcept;
// Bytes held for reuse now (tests, metrics).
size_t pool_held_bytes() noexcept;

}  // namespace larmor::wire
