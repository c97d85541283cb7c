// Puts a batch of processed readout lines into the k-space buffer. One thread per sample of a
// (placement, channel) row: rows are contiguous in both arrays, so reads and writes coalesce.
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/launch_size.h"
#include "cuda/line_kernels.h"

namespace larmor::cuda {
namespace {

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

}  // namespace

void launch_place_lines(const float2* src, long long l, long long k, float2* dst, long long e, long long c,
                        const Placements& p, cudaStream_t stream) {
    const long long work = static_cast<long long>(p.count) * c * l;
    if (work == 0) return;
    const unsigned grid = grid_stride_blocks(work, kThreads);
    place_lines_kernel<<<grid, kThreads, 0, stream>>>(src, l, k, dst, e, c, p);
    LARMOR_CUDA_LAUNCH_CHECK("place_lines_kernel", std::to_string(p.count) + " lines of " + std::to_string(l) + " x " +
                                                       std::to_string(c) + " channels");
}

}  // namespace larmor::cuda
