#pragma once
// Per-session device resources of the CUDA backend: the compute stream every operation is queued on,
// an upload stream so host-to-device copies overlap queued kernels, and the cuBLAS handle bound to
// the compute stream. Device arrays keep the context alive (shared_ptr), so their stream-ordered
// frees (cudaFreeAsync) always have a live stream, even after the Backend itself is gone.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <string>

#include "core/carray.h"

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
    explicit DeviceContext(int device);
    ~DeviceContext();
    DeviceContext(const DeviceContext&) = delete;
    DeviceContext& operator=(const DeviceContext&) = delete;

    int device() const { return device_; }
    cudaStream_t stream() const { return stream_; }
    cudaStream_t upload_stream() const { return upload_; }
    cublasHandle_t blas() const { return blas_; }
    const cudaDeviceProp& props() const { return props_; }
    // cuFFT plans and the cuBLAS handle must not be used from two host threads at once; a session's
    // gadget threads share one backend, so calls into those libraries take this lock.
    std::mutex& library_mutex() { return library_mutex_; }

private:
    int device_;
    cudaDeviceProp props_{};
    cudaStream_t stream_ = nullptr;
    cudaStream_t upload_ = nullptr;
    cublasHandle_t blas_ = nullptr;
    std::mutex library_mutex_;
};

// Device memory from the device's stream-ordered pool, allocated on `stream` (default: the
// context's compute stream) and freed on the compute stream when the last handle goes.
std::shared_ptr<Storage> make_device_storage(const std::shared_ptr<DeviceContext>& ctx, size_t bytes,
                                             const std::string& what, cudaStream_t stream = nullptr);
// Page-locked host memory (cudaHostAlloc), zeroed; pinned() is true.
std::shared_ptr<Storage> make_pinned_storage(const std::shared_ptr<DeviceContext>& ctx, size_t bytes,
                                             const std::string& what);
// Device of a CUDA array's storage, or -1 when it is not one of ours.
int storage_device(const Storage& s);

}  // namespace larmor::cuda
