#include "cuda/dense_handles.h"

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/cuda_libraries.h"
#include "cuda/dense_check.h"
#include "cuda/device_context.h"

namespace larmor::cuda {
namespace {

// Free handles per device, each with the event recorded after the work of its last call. Made on
// first use, which follows the CUDA runtime's initialisation (a backend exists), so at exit this pool
// is destroyed before the runtime and the dlopen'ed libraries tear themselves down (destructors and
// atexit handlers run in reverse order of registration).
template <class H>
class Pool {
public:
    using Destroy = void (*)(H);
    explicit Pool(Destroy destroy) : destroy_(destroy) {}
    ~Pool() {
        for (auto& [device, entries] : free_) {
            DeviceGuard g(device);
            for (const PooledHandle<H>& e : entries) discard(e);
        }
    }
    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;

    // A free handle of `device`, or one with a null handle when there is none.
    PooledHandle<H> take(int device) {
        std::lock_guard<std::mutex> lock(m_);
        auto it = free_.find(device);
        if (it == free_.end() || it->second.empty()) return {};
        const PooledHandle<H> e = it->second.back();
        it->second.pop_back();
        return e;
    }

    void give(int device, const PooledHandle<H>& e) noexcept {
        try {
            std::lock_guard<std::mutex> lock(m_);
            free_[device].push_back(e);
        } catch (...) {  // no memory to keep it: destroy it instead
            DeviceGuard g(device);
            discard(e);
        }
    }

    // Destroys the handle and its event (the current device being theirs); statuses are ignored: this
    // runs on error paths and at exit.
    void discard(const PooledHandle<H>& e) noexcept {
        if (e.handle) destroy_(e.handle);
        if (e.done) cudaEventDestroy(e.done);
    }

private:
    Destroy destroy_;
    std::mutex m_;
    std::map<int, std::vector<PooledHandle<H>>> free_;
};

Pool<cusolverDnHandle_t>& solver_pool() {
    static Pool<cusolverDnHandle_t> pool([](cusolverDnHandle_t h) { cusolver_library().destroy(h); });
    return pool;
}

Pool<cublasHandle_t>& blas_pool() {
    static Pool<cublasHandle_t> pool([](cublasHandle_t h) { cublas_library().destroy(h); });
    return pool;
}

std::string on_device(int device) { return "dense layer, CUDA device " + std::to_string(device); }

// The stream waits until the handle's previous work (maybe another session's, on another stream) is
// done: a handle's internal buffers must not serve two streams at once. An event never recorded
// makes the wait a no-op.
template <class H>
void wait_for_last_use(const PooledHandle<H>& e, cudaStream_t stream, int device) {
    LARMOR_CUDA_CHECK(cudaStreamWaitEvent(stream, e.done, 0), on_device(device));
}

// Records the end of this call's work on the handle and returns it to the pool; a handle whose
// event cannot be recorded is destroyed instead (after the stream's work, which may still use it).
template <class H>
void release(Pool<H>& pool, const PooledHandle<H>& e, cudaStream_t stream, int device) noexcept {
    if (!e.handle) return;
    DeviceGuard g(device);
    if (cudaEventRecord(e.done, stream) == cudaSuccess) {
        pool.give(device, e);
        return;
    }
    cudaGetLastError();
    if (cudaStreamSynchronize(stream) != cudaSuccess) cudaGetLastError();
    pool.discard(e);
}

cudaEvent_t make_event(int device) {
    cudaEvent_t ev = nullptr;
    LARMOR_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), on_device(device));
    return ev;
}

}  // namespace

SolverHandle::SolverHandle(int device, cudaStream_t stream) : device_(device), stream_(stream) {
    const CusolverLibrary& lib = cusolver_library();
    DeviceGuard g(device);
    e_ = solver_pool().take(device);
    try {
        if (!e_.handle) {
            e_.done = make_event(device);
            cusolverDnHandle_t h = nullptr;  // set only once made: a failed create leaves nothing to pool
            LARMOR_CUSOLVER_CHECK(lib.create(&h), on_device(device));
            e_.handle = h;
        }
        wait_for_last_use(e_, stream, device);
        LARMOR_CUSOLVER_CHECK(lib.set_stream(e_.handle, stream), on_device(device));
    } catch (...) {
        if (e_.handle)
            solver_pool().give(device, e_);
        else if (e_.done)
            cudaEventDestroy(e_.done);
        throw;
    }
}

SolverHandle::~SolverHandle() { release(solver_pool(), e_, stream_, device_); }

BlasHandle::BlasHandle(int device, cudaStream_t stream) : device_(device), stream_(stream) {
    const CublasLibrary& lib = cublas_library();
    DeviceGuard g(device);
    e_ = blas_pool().take(device);
    try {
        if (!e_.handle) {
            e_.done = make_event(device);
            cublasHandle_t h = nullptr;
            LARMOR_CUBLAS_CHECK(lib.create(&h), on_device(device));
            e_.handle = h;
            // Full FP32 arithmetic (no TF32 tensor-core shortcut): the dense layer's results are
            // compared with LAPACK to float tolerance.
            LARMOR_CUBLAS_CHECK(lib.set_math_mode(e_.handle, CUBLAS_DEFAULT_MATH), on_device(device));
        }
        wait_for_last_use(e_, stream, device);
        LARMOR_CUBLAS_CHECK(lib.set_stream(e_.handle, stream), on_device(device));
    } catch (...) {
        if (e_.handle)
            blas_pool().give(device, e_);
        else if (e_.done)
            cudaEventDestroy(e_.done);
        throw;
    }
}

BlasHandle::~BlasHandle() { release(blas_pool(), e_, stream_, device_); }

}  // namespace larmor::cuda
