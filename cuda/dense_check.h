#pragma once
// Status checks for cuSOLVER and cuBLAS (the dense layer, cuda/dense_cusolver.cpp and
// cuda/dense_cublas.cpp), in the manner of cuda/cuda_check.h: every failure becomes a
// std::runtime_error naming the call (its source text), the library's status name and number and the
// context (operation, shapes, device), evaluated only on failure.
#include <cublas_v2.h>
#include <cusolverDn.h>

#include <string>

namespace larmor::cuda {

const char* cusolver_status_name(cusolverStatus_t status);
[[noreturn]] void throw_cusolver(const char* call, cusolverStatus_t status, const std::string& context);
[[noreturn]] void throw_cublas(const char* call, cublasStatus_t status, const std::string& context);

}  // namespace larmor::cuda

#define LARMOR_CUSOLVER_CHECK(call, context)                                                          \
    do {                                                                                              \
        const cusolverStatus_t larmor_status_ = (call);                                               \
        if (larmor_status_ != CUSOLVER_STATUS_SUCCESS)                                                \
            ::larmor::cuda::throw_cusolver(#call, larmor_status_, (context));                          \
    } while (0)

#define LARMOR_CUBLAS_CHECK(call, context)                                                            \
    do {                                                                                              \
        const cublasStatus_t larmor_status_ = (call);                                                 \
        if (larmor_status_ != CUBLAS_STATUS_SUCCESS) ::larmor::cuda::throw_cublas(#call, larmor_status_, (context)); \
    } while (0)
