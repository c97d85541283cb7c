#pragma once
// Per-session device resources of the CUDA backend: the compute stream every operation is queued on
// and an upload stream so host-to-device copies overlap queued kernels. Device arrays keep the context alive (shared_ptr), so their stream-ordered
// frees (cudaFreeAsync) always have a live stream, even after the Backend itself is gone.
// Memory budgets (core/memory_budget.h): device memory is charged to the session's device budget
// from cudaMallocAsync to cudaFreeAsync, so the blocks its cache keeps count as used; page-locked
// host memory is charged to its host budget.
#include <cuda_runtime.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "core/array.h"
#include "core/memory_budget.h"
#include "cuda/block_list.h"

namespace larmor::cuda {

// Makes `device` current for the scope, restoring the previous device after. Never throws.
class DeviceGuard {
public:
    explicit DeviceGuard(int device);
    ~DeviceGuard();
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;

private:
    int previous_ = -1;
    int device_;
};

class DeviceContext {
public:
    explicit DeviceContext(int device, MemoryBudgets budgets = {});
    ~DeviceContext();
    DeviceContext(const DeviceContext&) = delete;
    DeviceContext& operator=(const DeviceContext&) = delete;

    int device() const { return device_; }
    const MemoryBudgets& budgets() const { return budgets_; }
    // The compute stream; on the thread that is recording (Backend::record), the capture stream, so
    // the work that thread queues is captured while the session's other threads go on queuing theirs.
    cudaStream_t stream() const {
        return recording_thread_.load(std::memory_order_relaxed) == std::this_thread::get_id() ? capture_ : stream_;
    }
    // The real compute stream, whichever thread asks (replays are launched here).
    cudaStream_t compute_stream() const { return stream_; }
    cudaStream_t upload_stream() const { return upload_; }
    const cudaDeviceProp& props() const { return props_; }
    // cuFFT plans must not be used from two host threads at once; a session's gadget threads share
    // one backend, so calls into cuFFT take this lock.
    std::mutex& library_mutex() { return library_mutex_; }

    // Device blocks released by this session's arrays, kept for its next allocations of the same
    // size. Every array of a session is used on its compute stream, so a block freed there may be
    // handed to later work on that stream at once (stream order keeps the old uses first): the hot
    // path of a streaming chain (the same few sizes every batch and frame) then makes no
    // cudaMallocAsync/cudaFreeAsync calls, each several microseconds of host time.
    // take_block returns nullptr when none of `bytes` is cached; give_block caches the block or,
    // beyond kCachedPerSize blocks of a size or kCachedBytes in all, frees it stream-ordered.
    static constexpr size_t kCachedPerSize = 8;
    static constexpr size_t kCachedBytes = size_t{1} << 30;
    void* take_block(size_t bytes);
    void give_block(void* p, size_t bytes) noexcept;
    // Frees every cached block (stream-ordered); used when an allocation fails for lack of memory
    // or of budget.
    void release_cached_blocks() noexcept;

    // Charges `bytes` of device memory about to be allocated to the device budget; when that would
    // exceed it, frees the cached blocks (which it counts) and tries once more, then throws
    // MemoryBudgetExceeded naming `what`. charge_device/uncharge_device pair with the allocation and
    // the cudaFreeAsync of a block (give_block and release_cached_blocks uncharge what they free).
    void charge_device(size_t bytes, const std::string& what);
    void uncharge_device(size_t bytes) noexcept;

    // Recording: begin_recording() makes the calling thread's stream() the capture stream, in
    // capture (thread-local mode, so other threads' allocations are not disturbed), and holds off
    // other recordings; end_recording() ends the capture and returns its graph (nullptr when the
    // capture failed), restoring stream(). recording_here(): the calling thread is recording, so an
    // allocation, a wait or a read back must refuse (core/recording.h RecordingRefused).
    void begin_recording();
    cudaGraph_t end_recording() noexcept;
    bool recording_here() const { return recording_thread_.load(std::memory_order_relaxed) == std::this_thread::get_id(); }
    // Throws RecordingRefused naming `what` when the calling thread is recording.
    void refuse_while_recording(const char* what) const;

private:
    void free_block(void* p, size_t bytes) noexcept;

    int device_;
    MemoryBudgets budgets_;
    cudaDeviceProp props_{};
    cudaStream_t stream_ = nullptr;
    cudaStream_t upload_ = nullptr;
    std::mutex library_mutex_;
    std::mutex recording_mutex_;  // one recording at a time per session
    cudaStream_t capture_ = nullptr;  // created at the first recording
    std::atomic<std::thread::id> recording_thread_{};
    BlockList blocks_{kCachedPerSize, kCachedBytes};
};

// Device memory from the device's stream-ordered pool, allocated on `stream` (default: the
// context's compute stream) and freed on the compute stream when the last handle goes.
std::shared_ptr<Storage> make_device_storage(const std::shared_ptr<DeviceContext>& ctx, size_t bytes,
                                             const std::string& what, cudaStream_t stream = nullptr);
// Page-locked host memory (cudaHostAlloc), zeroed, charged to the context's host budget; pinned() is true.
std::shared_ptr<Storage> make_pinned_storage(const std::shared_ptr<DeviceContext>& ctx, size_t bytes,
                                             const std::string& what);
// Page-locked host blocks reused across downloads (to_host): take() hands out a Storage whose block
// comes back here when its last handle goes, so hold the cache through a shared_ptr (each Storage
// keeps it alive, arrays may outlive their backend). Blocks are cached by exact size, at most
// kPerSize of one size and kMaxBytes in all; larger blocks are freed when released. Blocks are
// charged to `host_budget` while they exist, cached ones included. Thread-safe.
class PinnedCache : public std::enable_shared_from_this<PinnedCache> {
public:
    static constexpr size_t kPerSize = 4;
    static constexpr size_t kMaxBytes = size_t{256} << 20;

    explicit PinnedCache(int device, std::shared_ptr<MemoryBudget> host_budget = nullptr)
        : device_(device), budget_(std::move(host_budget)) {}
    ~PinnedCache();
    PinnedCache(const PinnedCache&) = delete;
    PinnedCache& operator=(const PinnedCache&) = delete;

    // `bytes` of page-locked host memory, contents unspecified (not zeroed); pinned() is true.
    std::shared_ptr<Storage> take(size_t bytes, const std::string& what);
    // Bytes held for reuse now.
    size_t cached_bytes() const;

private:
    friend class CachedPinnedStorage;
    void give_back(void* p, size_t bytes) noexcept;
    void free_block(void* p, size_t bytes) noexcept;

    int device_;
    std::shared_ptr<MemoryBudget> budget_;
    BlockList free_{kPerSize, kMaxBytes};
};

// Page-locked host memory (cudaHostAlloc, portable, not zeroed), and its release; out of memory is
// an error naming `what`. Both go through the process's pool of idle blocks (cuda/pinned_pool.h), so
// a block a session releases serves the next session that asks for its size.
void* alloc_pinned(int device, size_t bytes, const std::string& what);
void free_pinned(void* p, size_t bytes) noexcept;

// Device of a CUDA array's storage, or -1 when it is not one of ours.
int storage_device(const Storage& s);

}  // namespace larmor::cuda
