#include "cuda/dense_check.h"

#include <cuda_runtime.h>

#include <stdexcept>

#include "cuda/cuda_libraries.h"

namespace larmor::cuda {
namespace {

std::string with_context(const std::string& what, const std::string& context) {
    return context.empty() ? what : what + " (" + context + ")";
}

}  // namespace

const char* cusolver_status_name(cusolverStatus_t status) {
    switch (status) {
        case CUSOLVER_STATUS_SUCCESS: return "CUSOLVER_STATUS_SUCCESS";
        case CUSOLVER_STATUS_NOT_INITIALIZED: return "CUSOLVER_STATUS_NOT_INITIALIZED";
        case CUSOLVER_STATUS_ALLOC_FAILED: return "CUSOLVER_STATUS_ALLOC_FAILED (out of GPU memory)";
        case CUSOLVER_STATUS_INVALID_VALUE: return "CUSOLVER_STATUS_INVALID_VALUE";
        case CUSOLVER_STATUS_ARCH_MISMATCH: return "CUSOLVER_STATUS_ARCH_MISMATCH";
        case CUSOLVER_STATUS_MAPPING_ERROR: return "CUSOLVER_STATUS_MAPPING_ERROR";
        case CUSOLVER_STATUS_EXECUTION_FAILED: return "CUSOLVER_STATUS_EXECUTION_FAILED";
        case CUSOLVER_STATUS_INTERNAL_ERROR: return "CUSOLVER_STATUS_INTERNAL_ERROR";
        case CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED: return "CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED";
        case CUSOLVER_STATUS_NOT_SUPPORTED: return "CUSOLVER_STATUS_NOT_SUPPORTED";
        case CUSOLVER_STATUS_ZERO_PIVOT: return "CUSOLVER_STATUS_ZERO_PIVOT";
        case CUSOLVER_STATUS_INVALID_LICENSE: return "CUSOLVER_STATUS_INVALID_LICENSE";
        case CUSOLVER_STATUS_INVALID_WORKSPACE: return "CUSOLVER_STATUS_INVALID_WORKSPACE";
        default: break;  // the IRS (iterative refinement) statuses, which the dense layer never meets
    }
    return "unknown cusolverStatus_t";
}

void throw_cusolver(const char* call, cusolverStatus_t status, const std::string& context) {
    cudaGetLastError();  // a failed launch inside cuSOLVER must not be blamed on the next CUDA call
    throw std::runtime_error(with_context(std::string(call) + " failed: " + cusolver_status_name(status) + " (" +
                                              std::to_string(static_cast<int>(status)) + ")",
                                          context));
}

void throw_cublas(const char* call, cublasStatus_t status, const std::string& context) {
    cudaGetLastError();
    // The library is loaded: a cuBLAS status exists only after a cuBLAS call.
    throw std::runtime_error(with_context(std::string(call) + " failed: " + cublas_library().get_status_name(status) +
                                              " (" + std::to_string(static_cast<int>(status)) + ")",
                                          context));
}

}  // namespace larmor::cuda
