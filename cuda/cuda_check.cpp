#include "cuda/cuda_check.h"

#include "cuda/cuda_libraries.h"

#include <cstdio>
#include <stdexcept>

namespace larmor::cuda {
namespace {

std::string with_context(const std::string& what, const std::string& context) {
    return context.empty() ? what : what + " (" + context + ")";
}

std::string human_bytes(size_t bytes) {
    char buf[32];
    const double b = static_cast<double>(bytes);
    if (b >= 1024.0 * 1024 * 1024)
        std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else
        std::snprintf(buf, sizeof buf, "%.2f MiB", b / (1024.0 * 1024));
    return buf;
}

}  // namespace

const char* cufft_status_string(cufftResult status) {
    switch (status) {
        case CUFFT_SUCCESS: return "CUFFT_SUCCESS";
        case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
        case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED (out of GPU memory)";
        case CUFFT_INVALID_TYPE: return "CUFFT_INVALID_TYPE";
        case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
        case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
        case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
        case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
        case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
        case CUFFT_UNALIGNED_DATA: return "CUFFT_UNALIGNED_DATA";
        case CUFFT_INVALID_DEVICE: return "CUFFT_INVALID_DEVICE";
        case CUFFT_NO_WORKSPACE: return "CUFFT_NO_WORKSPACE";
        case CUFFT_NOT_IMPLEMENTED: return "CUFFT_NOT_IMPLEMENTED";
        case CUFFT_NOT_SUPPORTED: return "CUFFT_NOT_SUPPORTED";
        case CUFFT_MISSING_DEPENDENCY: return "CUFFT_MISSING_DEPENDENCY (nvJitLink/NVRTC library not found)";
        case CUFFT_NVRTC_FAILURE: return "CUFFT_NVRTC_FAILURE";
        case CUFFT_NVJITLINK_FAILURE: return "CUFFT_NVJITLINK_FAILURE";
        case CUFFT_NVSHMEM_FAILURE: return "CUFFT_NVSHMEM_FAILURE";
    }
    return "unknown cufftResult";
}

void throw_cuda(const char* call, cudaError_t status, const std::string& context) {
    cudaGetLastError();  // clear a sticky launch error so the next call is not blamed for it
    throw std::runtime_error(with_context(std::string(call) + " failed: " + cudaGetErrorName(status) + ": " +
                                              cudaGetErrorString(status),
                                          context));
}

void throw_cufft(const char* call, cufftResult status, const std::string& context) {
    throw std::runtime_error(with_context(std::string(call) + " failed: " + cufft_status_string(status) + " (" +
                                              std::to_string(static_cast<int>(status)) + ")",
                                          context));
}

void throw_nvrtc(const char* call, nvrtcResult status, const std::string& context) {
    throw std::runtime_error(with_context(std::string(call) + " failed: " + nvrtc_library().get_error_string(status), context));
}

void throw_out_of_memory(const char* call, size_t bytes, int device, const std::string& context) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    std::string mem;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
        mem = "; " + human_bytes(free_b) + " free of " + human_bytes(total_b);
    else
        cudaGetLastError();
    throw std::runtime_error(std::string(call) + ": out of GPU memory on device " + std::to_string(device) +
                             " allocating " + std::to_string(bytes) + " bytes (" + human_bytes(bytes) + ")" +
                             (context.empty() ? "" : " for " + context) + mem);
}

}  // namespace larmor::cuda
