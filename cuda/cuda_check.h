#pragma once
// Status checks for the CUDA runtime, cuFFT and NVRTC: every failure becomes a
// std::runtime_error naming the call (its source text), the library's status string and the
// context (shape, bytes, device). The context expression is evaluated only on failure, so checks
// cost nothing on the hot path. Out-of-memory gets its own sentence with the requested bytes.
#include <cuda_runtime.h>
#include <cufft.h>
#include <nvrtc.h>

#include <string>

namespace larmor::cuda {

[[noreturn]] void throw_cuda(const char* call, cudaError_t status, const std::string& context);
[[noreturn]] void throw_cufft(const char* call, cufftResult status, const std::string& context);
[[noreturn]] void throw_nvrtc(const char* call, nvrtcResult status, const std::string& context);
// The out-of-memory message: "<call>: out of GPU memory allocating <bytes> bytes (<human>) for <context>".
[[noreturn]] void throw_out_of_memory(const char* call, size_t bytes, int device, const std::string& context);

const char* cufft_status_string(cufftResult status);

}  // namespace larmor::cuda

#define LARMOR_CUDA_CHECK(call, context)                                                 \
    do {                                                                                 \
        const cudaError_t larmor_status_ = (call);                                       \
        if (larmor_status_ != cudaSuccess) ::larmor::cuda::throw_cuda(#call, larmor_status_, (context)); \
    } while (0)

#define LARMOR_CUFFT_CHECK(call, context)                                                 \
    do {                                                                                  \
        const cufftResult larmor_status_ = (call);                                        \
        if (larmor_status_ != CUFFT_SUCCESS) ::larmor::cuda::throw_cufft(#call, larmor_status_, (context)); \
    } while (0)

#define LARMOR_NVRTC_CHECK(call, context)                                                  \
    do {                                                                                   \
        const nvrtcResult larmor_status_ = (call);                                         \
        if (larmor_status_ != NVRTC_SUCCESS) ::larmor::cuda::throw_nvrtc(#call, larmor_status_, (context)); \
    } while (0)

// After a kernel launch: launch-configuration errors surface here, named after the kernel.
#define LARMOR_CUDA_LAUNCH_CHECK(kernel, context) LARMOR_CUDA_CHECK(cudaGetLastError(), std::string(kernel) + " launch, " + (context))
