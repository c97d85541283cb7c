#pragma once
// Small CUDA kernels around the dense layer's cuSOLVER and cuBLAS calls (cuda/dense_kernels.cu):
// pointer arrays for the batched routines, the exact Hermitian completion of a Gram matrix, and the
// first failing info flag of a batch. All are queued on `stream` and check their launch; arguments
// are validated by the caller.
#include <cuda_runtime.h>

namespace larmor::cuda {

// ptrs[i] = base + (i / repeat) * outer + (i % repeat) * inner for i < count: the device pointer
// arrays of cuSOLVER's *Batched routines (repeat > 1 pairs each matrix with each of its right-hand
// sides, for potrsBatched, which takes one right-hand side per entry).
void launch_pointer_array(float2** ptrs, float2* base, long long count, long long repeat, long long outer,
                          long long inner, cudaStream_t stream);

// g [n, n, batch] column-major: the strict upper triangle := the conjugate of the lower, the
// diagonal's imaginary part := 0 (each thread writes an upper or diagonal element and reads only the
// lower triangle, which nothing writes).
void launch_hermitian_from_lower(float2* g, int n, long long batch, cudaStream_t stream);

// result[0] = the first i < count with info[i] != 0, or -1; result[1] = info[result[0]] (0 when none).
// count <= INT_MAX.
void launch_first_nonzero(const int* info, long long count, int* result, cudaStream_t stream);

}  // namespace larmor::cuda
