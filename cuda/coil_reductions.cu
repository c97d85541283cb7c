// Reductions over the coil (last) axis on CUDA: root-sum-of-squares and the sensitivity-weighted
// combination (core/coils/coil_combination.h). Each thread reads two pixels as 16-byte vectors
// when the arrays allow it, and the coils of each pixel are split over the warps of a block, whose
// partial sums meet in shared memory.
#include <cstdint>
#include <string>

#include "cuda/coil_launchers.h"
#include "cuda/cuda_check.h"
#include "cuda/vec_types.cuh"

namespace larmor::coils::cuda {
namespace {

constexpr int kThreads = 256;

using larmor::cuda::aligned16;
using larmor::cuda::Vec;

// Coil reductions: two pixels per thread with 16-byte loads (V = 2) or one (V = 1). A block covers
// 32 pixel groups with kCoilWarps warps: warp w sums coils w, w + kCoilWarps, ... of the same 32
// groups (each load a contiguous 512 or 256 bytes), and the warps' partial sums meet in shared
// memory. One thread per pixel pair looping over all coils gave 32 768 threads for a 256^2 image,
// 8 warps per SM, too few loads in flight to stream 17 MB: 19 us for the Walsh combination (ncu,
// H200), ~2.4x its bandwidth time.
constexpr int kCoilWarps = 8;
static_assert(kCoilWarps * 32 == kThreads, "one warp per coil group");

__device__ inline float norm2(float2 v) { return v.x * v.x + v.y * v.y; }

unsigned coil_blocks(long long groups) { return static_cast<unsigned>((groups + 31) / 32); }

template <int V>
__global__ void __launch_bounds__(kThreads) rss_kernel(const float2* __restrict__ x, long long pixels, long long coils,
                                                       float2* __restrict__ y) {
    using T = typename Vec<V>::T;
    __shared__ float part[kCoilWarps][V][32];
    const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
    const long long g = blockIdx.x * 32LL + lane;
    const bool live = g < pixels / V;
    float acc[V] = {};
    if (live)
        for (long long c = warp; c < coils; c += kCoilWarps) {
            const T v = reinterpret_cast<const T*>(x + c * pixels)[g];
            const float2* e = reinterpret_cast<const float2*>(&v);
#pragma unroll
            for (int k = 0; k < V; ++k) acc[k] += norm2(e[k]);
        }
#pragma unroll
    for (int k = 0; k < V; ++k) part[warp][k][lane] = acc[k];
    __syncthreads();
    if (warp != 0 || !live) return;
    T out;
    float2* o = reinterpret_cast<float2*>(&out);
#pragma unroll
    for (int k = 0; k < V; ++k) {
        float t = 0.f;
        for (int w = 0; w < kCoilWarps; ++w) t += part[w][k][lane];
        o[k] = make_float2(sqrtf(t), 0.f);
    }
    reinterpret_cast<T*>(y)[g] = out;
}

template <int V>
__global__ void __launch_bounds__(kThreads) combine_kernel(const float2* __restrict__ x, const float2* __restrict__ s,
                                                           long long pixels, long long coils, float2* __restrict__ y) {
    using T = typename Vec<V>::T;
    __shared__ float part[kCoilWarps][3][V][32];
    const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
    const long long g = blockIdx.x * 32LL + lane;
    const bool live = g < pixels / V;
    float re[V] = {}, im[V] = {}, nn[V] = {};
    if (live)
        for (long long c = warp; c < coils; c += kCoilWarps) {
            const T xv = reinterpret_cast<const T*>(x + c * pixels)[g];
            const T sv = reinterpret_cast<const T*>(s + c * pixels)[g];
            const float2* xe = reinterpret_cast<const float2*>(&xv);
            const float2* se = reinterpret_cast<const float2*>(&sv);
#pragma unroll
            for (int k = 0; k < V; ++k) {  // conj(s) * x
                re[k] += se[k].x * xe[k].x + se[k].y * xe[k].y;
                im[k] += se[k].x * xe[k].y - se[k].y * xe[k].x;
                nn[k] += norm2(se[k]);
            }
        }
#pragma unroll
    for (int k = 0; k < V; ++k) {
        part[warp][0][k][lane] = re[k];
        part[warp][1][k][lane] = im[k];
        part[warp][2][k][lane] = nn[k];
    }
    __syncthreads();
    if (warp != 0 || !live) return;
    T out;
    float2* o = reinterpret_cast<float2*>(&out);
#pragma unroll
    for (int k = 0; k < V; ++k) {
        float r = 0.f, i = 0.f, n = 0.f;
        for (int w = 0; w < kCoilWarps; ++w) {
            r += part[w][0][k][lane];
            i += part[w][1][k][lane];
            n += part[w][2][k][lane];
        }
        o[k] = n > 0.f ? make_float2(r / n, i / n) : make_float2(0.f, 0.f);
    }
    reinterpret_cast<T*>(y)[g] = out;
}

}  // namespace

void launch_rss(const float2* x, long long pixels, long long coils, float2* y, cudaStream_t stream) {
    if (pixels == 0) return;
    if (pixels % 2 == 0 && aligned16(x) && aligned16(y))
        rss_kernel<2><<<coil_blocks(pixels / 2), kThreads, 0, stream>>>(x, pixels, coils, y);
    else
        rss_kernel<1><<<coil_blocks(pixels), kThreads, 0, stream>>>(x, pixels, coils, y);
    LARMOR_CUDA_LAUNCH_CHECK("rss_kernel", std::to_string(pixels) + " pixels x " + std::to_string(coils) + " coils");
}

void launch_combine(const float2* x, const float2* maps, long long pixels, long long coils, float2* y,
                    cudaStream_t stream) {
    if (pixels == 0) return;
    if (pixels % 2 == 0 && aligned16(x) && aligned16(maps) && aligned16(y))
        combine_kernel<2><<<coil_blocks(pixels / 2), kThreads, 0, stream>>>(x, maps, pixels, coils, y);
    else
        combine_kernel<1><<<coil_blocks(pixels), kThreads, 0, stream>>>(x, maps, pixels, coils, y);
    LARMOR_CUDA_LAUNCH_CHECK("combine_kernel",
                             std::to_string(pixels) + " pixels x " + std::to_string(coils) + " coils");
}

}  // namespace larmor::coils::cuda
