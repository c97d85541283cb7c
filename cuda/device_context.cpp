#include "cuda/device_context.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/fault_injection.h"
#include "core/recording.h"
#include "cuda/cuda_check.h"
#include "cuda/pinned_pool.h"

namespace larmor::cuda {

DeviceGuard::DeviceGuard(int device) : device_(device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
        cudaGetLastError();
        previous_ = -1;
    }
    if (previous_ != device_ && cudaSetDevice(device_) != cudaSuccess) cudaGetLastError();
}

DeviceGuard::~DeviceGuard() {
    if (previous_ >= 0 && previous_ != device_ && cudaSetDevice(previous_) != cudaSuccess) cudaGetLastError();
}

namespace {

// The default pool returns freed memory to the driver at every synchronisation unless its release
// threshold says otherwise; a streaming server allocates the same sizes frame after frame, so keep
// everything (the pool still gives memory back when an allocation would otherwise fail).
void keep_pool_memory(int device) {
    static std::mutex m;
    static std::vector<bool> done;
    std::lock_guard<std::mutex> lock(m);
    if (static_cast<size_t>(device) < done.size() && done[static_cast<size_t>(device)]) return;
    cudaMemPool_t pool = nullptr;
    const std::string ctx = "device " + std::to_string(device);
    LARMOR_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device), ctx);
    uint64_t threshold = std::numeric_limits<uint64_t>::max();
    LARMOR_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), ctx);
    if (done.size() <= static_cast<size_t>(device)) done.resize(static_cast<size_t>(device) + 1, false);
    done[static_cast<size_t>(device)] = true;
}

// cudaGetDeviceProperties queries every attribute of the device (about a millisecond); they do not
// change while the process runs, so each device is asked once, not once per session.
const cudaDeviceProp& device_properties(int device) {
    static std::mutex m;
    static std::map<int, cudaDeviceProp> known;
    std::lock_guard<std::mutex> lock(m);
    auto it = known.find(device);
    if (it != known.end()) return it->second;
    cudaDeviceProp p{};
    LARMOR_CUDA_CHECK(cudaGetDeviceProperties(&p, device), "device " + std::to_string(device));
    return known.emplace(device, p).first->second;
}

class DeviceStorage final : public Storage {
public:
    DeviceStorage(std::shared_ptr<DeviceContext> ctx, size_t bytes, const std::string& what, cudaStream_t stream)
        : ctx_(std::move(ctx)), bytes_(bytes) {
        if (bytes_ == 0) return;
        // A graph would keep using a block this session may free or reuse once the capture ends.
        if (ctx_->recording_here())
            throw RecordingRefused("allocating " + std::to_string(bytes_) + " bytes for " + what + " inside a recording");
        // Only blocks for the compute stream come from the session's cache: an upload-stream block
        // must not be one that queued compute work may still read.
        if (!stream || stream == ctx_->stream()) ptr_ = ctx_->take_block(bytes_);
        if (ptr_) return;  // a cached block is still charged to the budget
        ctx_->charge_device(bytes_, what);  // before the allocation: over budget allocates nothing
        try {
            allocate(stream, what);
        } catch (...) {
            ptr_ = nullptr;
            ctx_->uncharge_device(bytes_);
            throw;
        }
    }
    // Back to the session's cache, or to the pool stream-ordered: after all work queued so far on the
    // compute stream, the only stream that uses the block after its upload.
    ~DeviceStorage() override {
        if (ptr_) ctx_->give_block(ptr_, bytes_);
    }
    void* data() override { return ptr_; }
    size_t bytes() const override { return bytes_; }
    Device device() const override { return Device::Cuda; }
    int device_index() const { return ctx_->device(); }

private:
    void allocate(cudaStream_t stream, const std::string& what) {
        DeviceGuard guard(ctx_->device());
        if (inject_fault(FaultSite::DeviceAlloc))
            throw_out_of_memory("cudaMallocAsync (injected fault)", bytes_, ctx_->device(), what);
        cudaError_t e = cudaMallocAsync(&ptr_, bytes_, stream ? stream : ctx_->stream());
        if (e == cudaErrorMemoryAllocation) {
            cudaGetLastError();
            ctx_->release_cached_blocks();  // blocks of other sizes this session holds on to
            e = cudaMallocAsync(&ptr_, bytes_, stream ? stream : ctx_->stream());
        }
        if (e == cudaErrorMemoryAllocation) throw_out_of_memory("cudaMallocAsync", bytes_, ctx_->device(), what);
        if (e != cudaSuccess)
            throw_cuda("cudaMallocAsync", e, std::to_string(bytes_) + " bytes for " + what + " on device " +
                                                 std::to_string(ctx_->device()));
    }

    std::shared_ptr<DeviceContext> ctx_;
    size_t bytes_;
    void* ptr_ = nullptr;
};

class PinnedStorage final : public Storage {
public:
    PinnedStorage(const std::shared_ptr<DeviceContext>& ctx, size_t bytes, const std::string& what)
        : charge_(ctx->budgets().host, bytes, what), bytes_(bytes) {
        if (bytes_ == 0) return;
        if (ctx->recording_here()) throw RecordingRefused("page-locked " + what + " inside a recording");
        ptr_ = alloc_pinned(ctx->device(), bytes_, what);
        std::memset(ptr_, 0, bytes_);
    }
    ~PinnedStorage() override { free_pinned(ptr_, bytes_); }
    void* data() override { return ptr_; }
    size_t bytes() const override { return bytes_; }
    Device device() const override { return Device::Cpu; }
    bool pinned() const override { return true; }

private:
    BudgetCharge charge_;  // first: over budget, nothing is allocated
    size_t bytes_;
    void* ptr_ = nullptr;
};

}  // namespace

void* alloc_pinned(int device, size_t bytes, const std::string& what) {
    if (void* kept = pinned_pool_take(bytes)) return kept;
    DeviceGuard guard(device);
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (e == cudaErrorMemoryAllocation)
        throw std::runtime_error("cudaHostAlloc: out of page-locked host memory allocating " + std::to_string(bytes) +
                                 " bytes for " + what);
    if (e != cudaSuccess) throw_cuda("cudaHostAlloc", e, std::to_string(bytes) + " bytes for " + what);
    return p;
}

void free_pinned(void* p, size_t bytes) noexcept {
    if (!p || pinned_pool_keep(p, bytes)) return;
    if (cudaFreeHost(p) != cudaSuccess) cudaGetLastError();
}

// A block of a PinnedCache, handed back to it when the last handle goes.
class CachedPinnedStorage final : public Storage {
public:
    CachedPinnedStorage(std::shared_ptr<PinnedCache> cache, void* p, size_t bytes)
        : cache_(std::move(cache)), ptr_(p), bytes_(bytes) {}
    ~CachedPinnedStorage() override {
        if (ptr_) cache_->give_back(ptr_, bytes_);
    }
    void* data() override { return ptr_; }
    size_t bytes() const override { return bytes_; }
    Device device() const override { return Device::Cpu; }
    bool pinned() const override { return true; }

private:
    std::shared_ptr<PinnedCache> cache_;
    void* ptr_;
    size_t bytes_;
};

PinnedCache::~PinnedCache() {
    for (const auto& [p, bytes] : free_.drain()) free_block(p, bytes);
}

std::shared_ptr<Storage> PinnedCache::take(size_t bytes, const std::string& what) {
    void* p = nullptr;
    if (bytes) {
        p = free_.take(bytes);
        if (!p) {
            if (budget_) budget_->reserve(bytes, what);
            try {
                p = alloc_pinned(device_, bytes, what);
            } catch (...) {
                if (budget_) budget_->release(bytes);
                throw;
            }
        }
    }
    try {
        return std::make_shared<CachedPinnedStorage>(shared_from_this(), p, bytes);
    } catch (...) {
        give_back(p, bytes);
        throw;
    }
}

size_t PinnedCache::cached_bytes() const { return free_.bytes(); }

void PinnedCache::give_back(void* p, size_t bytes) noexcept {
    if (p && !free_.keep(p, bytes)) free_block(p, bytes);
}

void PinnedCache::free_block(void* p, size_t bytes) noexcept {
    free_pinned(p, bytes);
    if (budget_) budget_->release(bytes);
}

DeviceContext::DeviceContext(int device, MemoryBudgets budgets) : device_(device), budgets_(std::move(budgets)) {
    DeviceGuard guard(device_);
    const std::string ctx = "device " + std::to_string(device_);
    props_ = device_properties(device_);
    // Kernels write into page-locked host memory through its host pointer (download_part), which
    // unified addressing guarantees; every 64-bit Linux system with a supported GPU has it.
    if (!props_.unifiedAddressing)
        throw std::runtime_error("CUDA device " + std::to_string(device_) + " (" + props_.name +
                                 ") lacks unified addressing, which the CUDA backend needs");
    keep_pool_memory(device_);
    LARMOR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), ctx);
    try {
        LARMOR_CUDA_CHECK(cudaStreamCreateWithFlags(&upload_, cudaStreamNonBlocking), ctx);
    } catch (...) {
        if (upload_) cudaStreamDestroy(upload_);
        cudaStreamDestroy(stream_);
        throw;
    }
}

void* DeviceContext::take_block(size_t bytes) { return blocks_.take(bytes); }

void DeviceContext::give_block(void* p, size_t bytes) noexcept {
    if (blocks_.keep(p, bytes)) return;
    DeviceGuard guard(device_);
    free_block(p, bytes);
}

void DeviceContext::free_block(void* p, size_t bytes) noexcept {
    // Errors (e.g. at process exit, when the runtime is already unloading) are ignored: this runs in
    // destructors, which must not throw.
    if (cudaFreeAsync(p, stream_) != cudaSuccess) cudaGetLastError();
    uncharge_device(bytes);
}

void DeviceContext::charge_device(size_t bytes, const std::string& what) {
    if (!budgets_.device) return;
    try {
        budgets_.device->reserve(bytes, what);
    } catch (const MemoryBudgetExceeded&) {
        if (blocks_.bytes() == 0) throw;
        release_cached_blocks();  // the cache counts against the budget: make room, then ask again
        budgets_.device->reserve(bytes, what);
    }
}

void DeviceContext::uncharge_device(size_t bytes) noexcept {
    if (budgets_.device) budgets_.device->release(bytes);
}

void DeviceContext::release_cached_blocks() noexcept {
    std::vector<std::pair<void*, size_t>> blocks;
    try {
        blocks = blocks_.drain();
    } catch (...) {  // no memory for the list: nothing can be freed now
        return;
    }
    DeviceGuard guard(device_);
    for (const auto& [p, bytes] : blocks) free_block(p, bytes);
    // The pool can hand the memory to an allocation on another stream only once the frees ran.
    if (cudaStreamSynchronize(stream_) != cudaSuccess) cudaGetLastError();
}

void DeviceContext::begin_recording() {
    if (recording_here()) throw RecordingRefused("a recording inside a recording");
    recording_mutex_.lock();
    try {
        DeviceGuard guard(device_);
        if (!capture_)
            LARMOR_CUDA_CHECK(cudaStreamCreateWithFlags(&capture_, cudaStreamNonBlocking),
                              "capture stream on device " + std::to_string(device_));
        // Thread-local mode: only this thread's unsafe calls (cudaMalloc, synchronous copies) break
        // the capture; the session's other threads and other sessions carry on.
        LARMOR_CUDA_CHECK(cudaStreamBeginCapture(capture_, cudaStreamCaptureModeThreadLocal),
                          "recording on device " + std::to_string(device_));
    } catch (...) {
        recording_mutex_.unlock();
        throw;
    }
    recording_thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);
}

cudaGraph_t DeviceContext::end_recording() noexcept {
    recording_thread_.store(std::thread::id(), std::memory_order_relaxed);
    cudaGraph_t graph = nullptr;
    {
        DeviceGuard guard(device_);
        if (cudaStreamEndCapture(capture_, &graph) != cudaSuccess) {
            cudaGetLastError();
            if (graph) cudaGraphDestroy(graph);
            graph = nullptr;
        }
    }
    recording_mutex_.unlock();
    return graph;
}

void DeviceContext::refuse_while_recording(const char* what) const {
    if (recording_here()) throw RecordingRefused(std::string(what) + " inside a recording");
}

DeviceContext::~DeviceContext() {
    DeviceGuard guard(device_);
    release_cached_blocks();
    if (cudaStreamSynchronize(stream_) != cudaSuccess) cudaGetLastError();
    if (capture_ && cudaStreamDestroy(capture_) != cudaSuccess) cudaGetLastError();
    if (upload_ && cudaStreamDestroy(upload_) != cudaSuccess) cudaGetLastError();
    if (cudaStreamDestroy(stream_) != cudaSuccess) cudaGetLastError();
}

std::shared_ptr<Storage> make_device_storage(const std::shared_ptr<DeviceContext>& ctx, size_t bytes,
                                             const std::string& what, cudaStream_t stream) {
    return std::make_shared<DeviceStorage>(ctx, bytes, what, stream);
}

std::shared_ptr<Storage> make_pinned_storage(const std::shared_ptr<DeviceContext>& ctx, size_t bytes,
                                             const std::string& what) {
    return std::make_shared<PinnedStorage>(ctx, bytes, what);
}

int storage_device(const Storage& s) {
    const auto* d = dynamic_cast<const DeviceStorage*>(&s);
    return d ? d->device_index() : -1;
}

}  // namespace larmor::cuda
