// Interpolation (the forward NUFFT's convolution; core/linops/nufft_kernels.h) on CUDA: a gather, one
// thread per point in bin order (cuFINUFFT's type-2 "GM-sort", Shih et al., IPDPSW 2021, sec. III-C).
// Threads of a warp hold neighbouring points, so their width^dims reads fall on the same few cache
// lines and the L1/L2 serve them; no atomics. A point's kernel values and wrapped grid indices are
// computed once and reused for every transform of the batch, each result written to the point's
// original position (through the permutation). No allocation, no host synchronisation.
#include <string>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/device_context.h"
#include "cuda/launch_size.h"
#include "cuda/nufft_device.cuh"
#include "cuda/nufft_points.h"

namespace larmor::cuda {
namespace {

constexpr int kThreads = 128;

struct InterpArgs {
    int n0, n1, n2;
    int points;
    float beta;
    const float* x;
    const float* y;
    const float* z;
    const int* perm;
    int batch;
    long long grid_size;
    const float2* grid;  // [grid_size, batch]
    float2* samples;     // [M, batch]
};

template <int D, int W>
__global__ void __launch_bounds__(kThreads) interp_kernel(InterpArgs a) {
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < a.points; p += gridDim.x * blockDim.x) {
        float kx[W], ky[D >= 2 ? W : 1], kz[D >= 3 ? W : 1];
        int gx[W], gy[D >= 2 ? W : 1], gz[D >= 3 ? W : 1];
        const int x0 = es_kernel_values<W>(a.x[p], a.beta, kx);
#pragma unroll
        for (int j = 0; j < W; ++j) gx[j] = wrap_index(x0 + j, a.n0);
        if constexpr (D >= 2) {
            const int y0 = es_kernel_values<W>(a.y[p], a.beta, ky);
#pragma unroll
            for (int j = 0; j < W; ++j) gy[j] = wrap_index(y0 + j, a.n1) * a.n0;
        } else {
            ky[0] = 1.f;
            gy[0] = 0;
        }
        if constexpr (D >= 3) {
            const int z0 = es_kernel_values<W>(a.z[p], a.beta, kz);
#pragma unroll
            for (int j = 0; j < W; ++j) gz[j] = wrap_index(z0 + j, a.n2) * a.n0 * a.n1;
        } else {
            kz[0] = 1.f;
            gz[0] = 0;
        }
        const int m = a.perm[p];
        for (int b = 0; b < a.batch; ++b) {
            const float2* in = a.grid + static_cast<long long>(b) * a.grid_size;
            float2 acc = make_float2(0.f, 0.f);
#pragma unroll 1  // planes: code size W^2, not W^3
            for (int jz = 0; jz < (D >= 3 ? W : 1); ++jz) {
#pragma unroll
                for (int jy = 0; jy < (D >= 2 ? W : 1); ++jy) {
                    const float2* row = in + gz[jz] + gy[jy];
                    float2 r = make_float2(0.f, 0.f);
#pragma unroll
                    for (int jx = 0; jx < W; ++jx) {
                        const float2 v = __ldg(row + gx[jx]);
                        r.x += v.x * kx[jx];
                        r.y += v.y * kx[jx];
                    }
                    const float f = kz[jz] * ky[jy];
                    acc.x += r.x * f;
                    acc.y += r.y * f;
                }
            }
            a.samples[m + static_cast<long long>(b) * a.points] = acc;
        }
    }
}

}  // namespace

void nufft_interp(Backend& be, const NufftGrid& g, const NufftPointSet& p, const CArray& grid, CArray& samples) {
    const CudaNufftPointSet& s = cuda_point_set(g, p, "cuda::nufft_interp");
    if (samples.size() != static_cast<size_t>(g.points * g.batch))
        throw std::invalid_argument("cuda::nufft_interp: samples " + samples.shape().str() + " hold " +
                                    std::to_string(samples.size()) + " values, expected M x batch = " +
                                    std::to_string(g.points) + " x " + std::to_string(g.batch));
    if (grid.size() != static_cast<size_t>(g.grid_size() * g.batch))
        throw std::invalid_argument("cuda::nufft_interp: grid " + grid.shape().str() + " holds " +
                                    std::to_string(grid.size()) + " values, expected " +
                                    std::to_string(g.grid_size()) + " x batch " + std::to_string(g.batch));
    if (g.points == 0) return;
    if (samples.device() != Device::Cuda || grid.device() != Device::Cuda)
        throw std::invalid_argument("cuda::nufft_interp: samples and grid must be on the CUDA device");
    if (overlaps(samples, grid)) throw std::invalid_argument("cuda::nufft_interp: samples and grid overlap");
    DeviceGuard guard(backend_device(be));
    const InterpArgs a{static_cast<int>(g.n[0]),
                       static_cast<int>(g.n[1]),
                       static_cast<int>(g.n[2]),
                       static_cast<int>(g.points),
                       g.beta,
                       s.coord(0),
                       g.dims >= 2 ? s.coord(1) : nullptr,
                       g.dims >= 3 ? s.coord(2) : nullptr,
                       s.perm,
                       static_cast<int>(g.batch),
                       g.grid_size(),
                       reinterpret_cast<const float2*>(grid.data()),
                       reinterpret_cast<float2*>(samples.data())};
    const cudaStream_t stream = backend_stream(be);
    dispatch_dims_width(g.dims, g.width, [&](auto d, auto w) {
        interp_kernel<decltype(d)::value, decltype(w)::value>
            <<<grid_stride_blocks(g.points, kThreads), kThreads, 0, stream>>>(a);
    });
    LARMOR_CUDA_LAUNCH_CHECK("nufft interp_kernel",
                             "NUFFT interp, " + std::to_string(g.points) + " points, batch " + std::to_string(g.batch));
}

}  // namespace larmor::cuda
