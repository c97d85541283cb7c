// Puts a batch of processed readout lines into the k-space buffer. place_lines: one thread per
// sample of a (placement, channel) row: rows are contiguous in both arrays, so reads and writes
// coalesce. mix_place_lines: see below.
#include <stdexcept>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/launch_size.h"
#include "gadgets/kernels/cuda/line_kernels.h"

namespace larmor::kernels::cuda {
namespace {

using larmor::cuda::grid_stride_blocks;

constexpr int kThreads = 256;

__global__ void place_lines_kernel(const float2* __restrict__ src, long long l, long long k, float2* __restrict__ dst,
                                   long long e, long long c, Placements p) {
    const long long per_row = l, rows = static_cast<long long>(p.count) * c;
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < rows * per_row;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        const long long s = i % per_row, row = i / per_row;
        const int q = static_cast<int>(row % p.count);
        const long long ch = row / p.count;
        const float2 in = src[(ch * k + p.first + q) * l + s];
        float2* out = dst + (ch * e + p.line[q]) * l + s;
        const float a = p.keep[q], b = p.scale[q];
        if (a == 0.f) {
            *out = make_float2(b * in.x, b * in.y);  // not read: the buffer line may hold anything
        } else {
            const float2 o = *out;
            *out = make_float2(a * o.x + b * in.x, a * o.y + b * in.y);
        }
    }
}

// mix_place_lines: one block per tile of kMixTile samples of one placement. The tile's inputs (all
// D channels, in chunks of kMixChunk) are staged in shared memory with every load issued at once;
// thread (sample i, lane j) then forms output channel j of the block's group of kMixLanes
// (blockIdx.z), with the matrix entries broadcast from L1. A thread looping over the input
// channels from global memory itself waited one L2 round trip per channel: 29 us per batch of
// 16 x 256 samples x 32 channels (ncu, H200), longer than cuBLAS's GEMM it replaced.
constexpr int kMixTile = 32;       // samples per block (one warp's worth: coalesced staging rows)
constexpr int kMixLanes = 8;       // threads per sample
constexpr int kMixThreads = kMixTile * kMixLanes;
constexpr int kMixPerThread = 1;   // output channels per thread (blockIdx.z picks kMixLanes of them)
constexpr int kMixChunk = 64;      // input channels staged at a time (16 KB)

__global__ void __launch_bounds__(kMixThreads) mix_place_lines_kernel(const float2* __restrict__ src, long long l,
                                                                       long long k, long long d,
                                                                       const float2* __restrict__ m,
                                                                       float2* __restrict__ dst, long long e,
                                                                       long long c, Placements p) {
    __shared__ float2 stage[kMixChunk][kMixTile];
    const int i = static_cast<int>(threadIdx.x % kMixTile), lane = static_cast<int>(threadIdx.x / kMixTile);
    const long long s0 = static_cast<long long>(blockIdx.x) * kMixTile, s = s0 + i;
    const int q = static_cast<int>(blockIdx.y);
    const int tile = static_cast<int>(min(static_cast<long long>(kMixTile), l - s0));
    const float a = p.keep[q], b = p.scale[q];
    const float2* in = src + (p.first + q) * l + s0;
    constexpr int kPass = kMixLanes * kMixPerThread;
    {
        const long long c0 = static_cast<long long>(blockIdx.z) * kPass;
        float2 acc[kMixPerThread];
#pragma unroll
        for (int j = 0; j < kMixPerThread; ++j) acc[j] = make_float2(0.f, 0.f);
        for (long long d0 = 0; d0 < d; d0 += kMixChunk) {
            const int nd = static_cast<int>(min(static_cast<long long>(kMixChunk), d - d0));
            __syncthreads();  // the previous chunk is consumed
            for (int t = static_cast<int>(threadIdx.x); t < nd * kMixTile; t += kMixThreads) {
                const int dd = t / kMixTile, ii = t % kMixTile;
                stage[dd][ii] = ii < tile ? in[(d0 + dd) * k * l + ii] : make_float2(0.f, 0.f);
            }
            __syncthreads();
            // Input channels in order, as the CPU backend sums them.
            for (int dd = 0; dd < nd; ++dd) {
                const float2 x = stage[dd][i];
#pragma unroll
                for (int j = 0; j < kMixPerThread; ++j) {
                    const long long ch = c0 + lane + j * kMixLanes;
                    if (ch < c) {
                        const float2 w = m[ch * d + d0 + dd];
                        acc[j].x = fmaf(w.x, x.x, fmaf(-w.y, x.y, acc[j].x));
                        acc[j].y = fmaf(w.x, x.y, fmaf(w.y, x.x, acc[j].y));
                    }
                }
            }
        }
        if (i >= tile) return;
#pragma unroll
        for (int j = 0; j < kMixPerThread; ++j) {
            const long long ch = c0 + lane + j * kMixLanes;
            if (ch >= c) break;
            float2* out = dst + (ch * e + p.line[q]) * l + s;
            if (a == 0.f) {
                *out = make_float2(b * acc[j].x, b * acc[j].y);  // not read: the buffer line may hold anything
            } else {
                const float2 o = *out;
                *out = make_float2(a * o.x + b * acc[j].x, a * o.y + b * acc[j].y);
            }
        }
    }
}

}  // namespace

void launch_mix_place_lines(const float2* src, long long l, long long k, long long d, const float2* m, float2* dst,
                            long long e, long long c, const Placements& p, cudaStream_t stream) {
    if (p.count == 0 || l == 0 || c == 0) return;
    const long long tiles = (l + kMixTile - 1) / kMixTile;
    if (tiles > 0x7fffffffLL)
        throw std::invalid_argument("mix_place_lines: lines of " + std::to_string(l) + " samples exceed one CUDA launch");
    const long long passes = (c + kMixLanes * kMixPerThread - 1) / (kMixLanes * kMixPerThread);
    if (passes > 65535)
        throw std::invalid_argument("mix_place_lines: " + std::to_string(c) + " output channels exceed one CUDA launch");
    const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(p.count), static_cast<unsigned>(passes));
    mix_place_lines_kernel<<<grid, kMixThreads, 0, stream>>>(src, l, k, d, m, dst, e, c, p);
    LARMOR_CUDA_LAUNCH_CHECK("mix_place_lines_kernel", std::to_string(p.count) + " lines of " + std::to_string(l) +
                                                           " x " + std::to_string(d) + " -> " + std::to_string(c) +
                                                           " channels");
}

void launch_place_lines(const float2* src, long long l, long long k, float2* dst, long long e, long long c,
                        const Placements& p, cudaStream_t stream) {
    const long long work = static_cast<long long>(p.count) * c * l;
    if (work == 0) return;
    const unsigned grid = grid_stride_blocks(work, kThreads);
    place_lines_kernel<<<grid, kThreads, 0, stream>>>(src, l, k, dst, e, c, p);
    LARMOR_CUDA_LAUNCH_CHECK("place_lines_kernel", std::to_string(p.count) + " lines of " + std::to_string(l) + " x " +
                                                       std::to_string(c) + " channels");
}

}  // namespace larmor::kernels::cuda
