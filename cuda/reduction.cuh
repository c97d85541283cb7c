#pragma once
// Device pieces of the backend's BLAS-1 kernels (cuda/blas1.cu) that evaluate device coefficients
// or end in a reduction, kept apart from the kernels so that a fused kernel ending in the same
// reduction can share them. A reduction runs in one launch: each block leaves a partial sum in
// double, and the last block to arrive adds the partials in block order, so the result does not
// depend on scheduling and is the same bits on every run.
#include <cuda_runtime.h>

#include "cuda/blas1.h"

namespace larmor::cuda {

// value * num[0] / den[0] in double (ratios of squared norms can be far below float's normal range);
// a zero denominator gives 0.
__device__ __forceinline__ float2 coefficient(const DevCoef& c) {
    double vr = c.value.x, vi = c.value.y;
    if (c.num) {
        const float2 n = *c.num;
        const double r = vr * n.x - vi * n.y, i = vr * n.y + vi * n.x;
        vr = r;
        vi = i;
    }
    if (c.den) {
        const float2 d = *c.den;
        const double m = double(d.x) * d.x + double(d.y) * d.y;
        if (m == 0.0) return make_float2(0.f, 0.f);
        const double r = (vr * d.x + vi * d.y) / m, i = (vi * d.x - vr * d.y) / m;
        vr = r;
        vi = i;
    }
    return make_float2(float(vr), float(vi));
}

// conj(x) y in double.
__device__ __forceinline__ double2 dot_term(float2 x, float2 y) {
    return make_double2(double(x.x) * y.x + double(x.y) * y.y, double(x.x) * y.y - double(x.y) * y.x);
}
__device__ __forceinline__ double2 dot_term(float x, float y) { return make_double2(double(x) * y, 0.0); }

__device__ __forceinline__ double2 warp_sum(double2 v) {
    for (int o = 16; o > 0; o >>= 1) {
        v.x += __shfl_down_sync(0xffffffffu, v.x, o);
        v.y += __shfl_down_sync(0xffffffffu, v.y, o);
    }
    return v;
}

// Sum of v over the block (blockDim.x a multiple of 32, at most 1024), valid in thread 0; the same
// tree every time.
__device__ __forceinline__ double2 block_sum(double2 v) {
    __shared__ double2 warps[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();  // warps[] may still be read by a previous call
    if (lane == 0) warps[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < static_cast<int>(blockDim.x >> 5) ? warps[lane] : make_double2(0.0, 0.0);
        v = warp_sum(v);
    }
    return v;
}

// Block `block` of `blocks` (at most kReductionBlocks) hands in its partial (valid in thread 0);
// true in every thread of the block that arrives last, which may then read all partials. Called by
// every thread of the block. The counter wraps to 0 for the next launch.
__device__ __forceinline__ bool arrive_last(double2 partial, unsigned block, unsigned blocks, double2* partials,
                                            unsigned* counter) {
    __shared__ bool last;
    if (threadIdx.x == 0) {
        partials[block] = partial;
        __threadfence();  // the partial is visible to every block before the arrival is counted
        last = atomicInc(counter, blocks - 1) == blocks - 1;
    }
    __syncthreads();
    return last;
}

// In the last block: the partials of all `blocks` added in block order, valid in thread 0.
__device__ __forceinline__ double2 sum_of_partials(const double2* partials, unsigned blocks) {
    double2 s = make_double2(0.0, 0.0);
    for (unsigned b = threadIdx.x; b < blocks; b += blockDim.x) {
        const double2 p = __ldcg(partials + b);  // from L2: other blocks wrote it
        s.x += p.x;
        s.y += p.y;
    }
    return block_sum(s);
}

}  // namespace larmor::cuda
