// GM-sort spreading (cuFINUFFT's method 1, Shih et al., IPDPSW 2021, sec. III-A): one thread per
// point in bin order adds its width^dims kernel-weighted values straight into the grid with global
// float2 reductions; neighbouring threads hold neighbouring points, so their reductions fall on the
// same cache lines of L2. The point's kernel values and wrapped indices are computed once and reused
// for every transform of the batch. nufft_spread.cu says when it is chosen over the shared tiles.
#include "cuda/launch_size.h"
#include "cuda/nufft_device.cuh"
#include "cuda/nufft_spread.cuh"

namespace larmor::cuda {
namespace {

constexpr int kPointThreads = 128;

template <int D, int W>
__global__ void __launch_bounds__(kPointThreads) spread_global_kernel(SpreadArgs a) {
    const NufftTiling& t = a.t;
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < a.points; p += gridDim.x * blockDim.x) {
        float kx[W], ky[D >= 2 ? W : 1], kz[D >= 3 ? W : 1];
        int gx[W], gy[D >= 2 ? W : 1], gz[D >= 3 ? W : 1];
        const int x0 = es_kernel_values<W>(a.x[p], a.beta, kx);
#pragma unroll
        for (int j = 0; j < W; ++j) gx[j] = wrap_index(x0 + j, t.n[0]);
        if constexpr (D >= 2) {
            const int y0 = es_kernel_values<W>(a.y[p], a.beta, ky);
#pragma unroll
            for (int j = 0; j < W; ++j) gy[j] = wrap_index(y0 + j, t.n[1]) * t.n[0];
        } else {
            ky[0] = 1.f;
            gy[0] = 0;
        }
        if constexpr (D >= 3) {
            const int z0 = es_kernel_values<W>(a.z[p], a.beta, kz);
#pragma unroll
            for (int j = 0; j < W; ++j) gz[j] = wrap_index(z0 + j, t.n[2]) * t.n[0] * t.n[1];
        } else {
            kz[0] = 1.f;
            gz[0] = 0;
        }
        const int m = a.perm[p];
        for (int b = 0; b < a.batch; ++b) {
            const float2 v = a.samples[m + static_cast<long long>(b) * a.points];
            float2* out = a.grid + static_cast<long long>(b) * a.grid_size;
#pragma unroll 1
            for (int jz = 0; jz < (D >= 3 ? W : 1); ++jz) {
#pragma unroll
                for (int jy = 0; jy < (D >= 2 ? W : 1); ++jy) {
                    const float f = kz[jz] * ky[jy];
                    const float2 vf = make_float2(v.x * f, v.y * f);
                    float2* row = out + gz[jz] + gy[jy];
#pragma unroll
                    for (int jx = 0; jx < W; ++jx) global_add(row + gx[jx], make_float2(vf.x * kx[jx], vf.y * kx[jx]));
                }
            }
        }
    }
}

}  // namespace

void launch_spread_global(const SpreadArgs& a, int dims, int width, cudaStream_t stream) {
    dispatch_dims_width(dims, width, [&](auto d, auto w) {
        spread_global_kernel<decltype(d)::value, decltype(w)::value>
            <<<grid_stride_blocks(a.points, kPointThreads), kPointThreads, 0, stream>>>(a);
    });
}

}  // namespace larmor::cuda
