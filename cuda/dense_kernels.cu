// Kernels of the dense layer's CUDA twin (cuda/dense_kernels.h).
#include <climits>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/dense_kernels.h"
#include "cuda/launch_size.h"

namespace larmor::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void pointer_array_kernel(float2** ptrs, float2* base, long long count, long long repeat, long long outer,
                                     long long inner) {
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < count;
         i += static_cast<long long>(gridDim.x) * blockDim.x)
        ptrs[i] = base + (i / repeat) * outer + (i % repeat) * inner;
}

__global__ void hermitian_from_lower_kernel(float2* g, long long n, long long total) {
    for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < total;
         e += static_cast<long long>(gridDim.x) * blockDim.x) {
        const long long within = e % (n * n), base = e - within;
        const long long row = within % n, col = within / n;
        if (row == col) {
            g[e].y = 0.f;
        } else if (row < col) {
            const float2 low = g[base + col + row * n];
            g[e] = make_float2(low.x, -low.y);
        }
    }
}

__global__ void first_nonzero_init(int* result) {
    result[0] = INT_MAX;
    result[1] = 0;
}

__global__ void first_nonzero_scan(const int* info, long long count, int* result) {
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < count;
         i += static_cast<long long>(gridDim.x) * blockDim.x)
        if (info[i] != 0) atomicMin(result, static_cast<int>(i));
}

__global__ void first_nonzero_finish(const int* info, int* result) {
    if (result[0] == INT_MAX)
        result[0] = -1;
    else
        result[1] = info[result[0]];
}

}  // namespace

void launch_pointer_array(float2** ptrs, float2* base, long long count, long long repeat, long long outer,
                          long long inner, cudaStream_t stream) {
    if (count <= 0) return;
    pointer_array_kernel<<<grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(ptrs, base, count, repeat, outer,
                                                                                       inner);
    LARMOR_CUDA_LAUNCH_CHECK("dense pointer_array", std::to_string(count) + " pointers");
}

void launch_hermitian_from_lower(float2* g, int n, long long batch, cudaStream_t stream) {
    const long long total = static_cast<long long>(n) * n * batch;
    if (total <= 0) return;
    hermitian_from_lower_kernel<<<grid_stride_blocks(total, kThreads), kThreads, 0, stream>>>(g, n, total);
    LARMOR_CUDA_LAUNCH_CHECK("dense hermitian_from_lower",
                             std::to_string(batch) + " matrices of order " + std::to_string(n));
}

void launch_first_nonzero(const int* info, long long count, int* result, cudaStream_t stream) {
    first_nonzero_init<<<1, 1, 0, stream>>>(result);
    LARMOR_CUDA_LAUNCH_CHECK("dense first_nonzero_init", std::to_string(count) + " info flags");
    if (count > 0) {
        first_nonzero_scan<<<grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(info, count, result);
        LARMOR_CUDA_LAUNCH_CHECK("dense first_nonzero_scan", std::to_string(count) + " info flags");
    }
    first_nonzero_finish<<<1, 1, 0, stream>>>(info, result);
    LARMOR_CUDA_LAUNCH_CHECK("dense first_nonzero_finish", std::to_string(count) + " info flags");
}

}  // namespace larmor::cuda
