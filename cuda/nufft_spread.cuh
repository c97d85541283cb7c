#pragma once
// Internal to the CUDA NUFFT's spreading (nufft_spread.cu: the shared-memory tiles and the dispatch;
// nufft_spread_global.cu: GM-sort, a file of its own so the two sets of kernels compile in parallel).
#include <cuda_runtime.h>

#include "cuda/nufft_points.h"

namespace larmor::cuda {

struct SpreadArgs {
    NufftTiling t;
    int points;
    float beta;
    const float* x;  // sorted coordinates per axis (y, z unused beyond dims)
    const float* y;
    const float* z;
    const int* perm;
    const int* bin_start;
    const int* sub_bin;
    const int* sub_first;
    const int* sub_total;
    int batch;
    long long grid_size;
    const float2* samples;  // [M, batch]
    float2* grid;           // [grid_size, batch]
};

__device__ __forceinline__ void global_add(float2* p, float2 v) {
#if __CUDA_ARCH__ >= 900
    atomicAdd(p, v);  // one vector reduction (sm_90 and later)
#else
    atomicAdd(&p->x, v.x);
    atomicAdd(&p->y, v.y);
#endif
}

// Whether the owned-planes spreader (nufft_spread_planes.cu) takes this grid: 3D, width 2..8.
bool spread_planes_applies(int dims, int width);
// Queues it on `stream` (grid already cleared), one block per (sub-problem, transform); throws
// std::invalid_argument where it does not apply.
void launch_spread_planes(const SpreadArgs& a, int width, long long max_subproblems, cudaStream_t stream);

// Queues GM-sort (spread_global_kernel<dims, width>) on `stream`; the grid is already cleared.
void launch_spread_global(const SpreadArgs& a, int dims, int width, cudaStream_t stream);

}  // namespace larmor::cuda
