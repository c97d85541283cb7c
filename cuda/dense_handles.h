#pragma once
// cuSOLVER and cuBLAS handles for the dense layer. A handle is costly to make (cusolverDnCreate
// allocates device memory and a cuBLAS handle of its own) and must not be used by two host threads at
// once, so each device keeps a small pool: a call takes a free handle for its duration (or makes one
// when all are taken: the pool grows to the largest number of concurrent calls on that device), binds
// it to the session's stream, and gives it back. A handle's internal buffers must not serve two
// streams at once either, and a call may return before its work is done (gram does not wait), so each
// pooled handle carries an event recorded after its last call's work, which the next call's stream
// waits for (a no-op when the handle stays with one session, the usual case). The pools are
// process-wide (sessions come and go, handles stay) and destroy their handles at exit.
//
// What is not charged to the session's budgets: the handles' own device memory (cuSOLVER's internal
// cuBLAS workspace), a few MiB per handle, made once per device and concurrent call. Workspaces and
// info arrays of the calls themselves come from the backend (cuda/dense_cusolver.cpp,
// cuda/dense_cublas.cpp).
#include <cuda_runtime.h>

#include <cublas_v2.h>
#include <cusolverDn.h>

namespace larmor::cuda {

template <class H>
struct PooledHandle {
    H handle = nullptr;
    cudaEvent_t done = nullptr;  // recorded after the work of the handle's last call
};

class SolverHandle {
public:
    // A handle of `device` (made current here), bound to `stream`, which first waits for the handle's
    // previous work.
    SolverHandle(int device, cudaStream_t stream);
    ~SolverHandle();
    SolverHandle(const SolverHandle&) = delete;
    SolverHandle& operator=(const SolverHandle&) = delete;
    cusolverDnHandle_t get() const { return e_.handle; }

private:
    int device_;
    cudaStream_t stream_;
    PooledHandle<cusolverDnHandle_t> e_;
};

class BlasHandle {
public:
    // A handle of `device`, bound to `stream` as SolverHandle's. Binding resets cuBLAS's workspace to
    // its default (cublasSetStream), so a caller that gives cuBLAS a workspace does so after this.
    BlasHandle(int device, cudaStream_t stream);
    ~BlasHandle();
    BlasHandle(const BlasHandle&) = delete;
    BlasHandle& operator=(const BlasHandle&) = delete;
    cublasHandle_t get() const { return e_.handle; }

private:
    int device_;
    cudaStream_t stream_;
    PooledHandle<cublasHandle_t> e_;
};

}  // namespace larmor::cuda
