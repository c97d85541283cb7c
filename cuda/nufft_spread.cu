// Spreading ("gridding", the adjoint NUFFT's convolution; core/linops/nufft_kernels.h) on CUDA, the two
// methods of cuFINUFFT (Shih et al., IPDPSW 2021, sec. III):
//  - SharedTiles ("SM"): one thread block per sub-problem (at most kSubproblemPoints points of one
//    bin) accumulates into a shared-memory tile covering its bin plus the kernel's reach (bin + width
//    per axis) with shared atomics, then adds the tile to the grid with global atomics, wrapping
//    periodically. Global atomic traffic is one tile per sub-problem instead of width^dims per point.
//  - GlobalSorted ("GM-sort", nufft_spread_global.cu): one thread per point in bin order adds its
//    width^dims values straight into the grid; neighbouring threads hit neighbouring cache lines.
//    Cheaper where bins hold few points (the tile's zeroing and write-back would outweigh the
//    points' own additions).
// Batch (coils): SM runs one block per (sub-problem, transform) (grid dimension y). The kernel values
// cost dims * width exp/sqrt per point against width^dims shared atomics per point and transform, so
// recomputing them per transform costs a few percent, while a tile per transform keeps shared memory
// (and so the blocks resident per SM) small and gives batch-fold more blocks. GM-sort computes a
// point's kernel values once and loops over the transforms (a register-only reuse, nothing to lose).
// No allocation, no host synchronisation: the grid is cleared with cudaMemsetAsync and the kernels
// queued on the backend's stream; SM launches the upper bound of sub-problems and surplus blocks
// return at once (the actual count stays on the device).
#include <string>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/device_context.h"
#include "cuda/launch_size.h"
#include "cuda/nufft_device.cuh"
#include "cuda/nufft_points.h"
#include "cuda/nufft_spread.cuh"
#include "cuda/nufft_tile.cuh"

namespace larmor::cuda {
namespace {

constexpr int kTileThreads = 256;

template <int D, int W>
__global__ void __launch_bounds__(kTileThreads) spread_tiles_kernel(SpreadArgs a) {
    extern __shared__ float2 tile[];
    const NufftTiling& t = a.t;
    const SubProblem sp = sub_problem<D, W>(t, a.sub_total, a.sub_bin, a.sub_first, a.bin_start);
    if (!sp.valid) return;
    const int first = sp.first, end = sp.end, ox = sp.o[0], oy = sp.o[1], oz = sp.o[2];
    const int b = blockIdx.y;
    const int tx = t.tile[0], ty = t.tile[1], size = t.tile[0] * t.tile[1] * t.tile[2];
    for (int i = threadIdx.x; i < size; i += blockDim.x) tile[i] = make_float2(0.f, 0.f);
    fill_tile_index(reinterpret_cast<int*>(tile + size), t, ox, oy, oz);
    __syncthreads();

    const float2* in = a.samples + static_cast<long long>(b) * a.points;
    for (int p = first + threadIdx.x; p < end; p += blockDim.x) {
        const float2 v = in[a.perm[p]];
        float kx[W], ky[D >= 2 ? W : 1], kz[D >= 3 ? W : 1];
        const int lx = es_kernel_values<W>(a.x[p], a.beta, kx) - ox;
        int ly = 0, lz = 0;
        if constexpr (D >= 2) ly = es_kernel_values<W>(a.y[p], a.beta, ky) - oy;
        else ky[0] = 1.f;
        if constexpr (D >= 3) lz = es_kernel_values<W>(a.z[p], a.beta, kz) - oz;
        else kz[0] = 1.f;
#pragma unroll 1  // planes: code size W^2, not W^3 (kz[jz] is one local load per plane)
        for (int jz = 0; jz < (D >= 3 ? W : 1); ++jz) {
#pragma unroll
            for (int jy = 0; jy < (D >= 2 ? W : 1); ++jy) {
                const float f = kz[jz] * ky[jy];
                const float2 vf = make_float2(v.x * f, v.y * f);
                float2* row = tile + ((lz + jz) * ty + ly + jy) * tx + lx;
#pragma unroll
                for (int jx = 0; jx < W; ++jx) {
                    atomicAdd(&row[jx].x, vf.x * kx[jx]);
                    atomicAdd(&row[jx].y, vf.y * kx[jx]);
                }
            }
        }
    }
    __syncthreads();

    float2* out = a.grid + static_cast<long long>(b) * a.grid_size;
    const TileIndex index(reinterpret_cast<const int*>(tile + size), tx);
    for (int i = threadIdx.x; i < size; i += blockDim.x) {
        const float2 v = tile[i];
        if (v.x == 0.f && v.y == 0.f) continue;  // parts of the tile no point reached
        global_add(out + index.grid_offset(i), v);
    }
}

void check_arrays(const NufftGrid& g, const CArray& samples, const CArray& grid, const char* what) {
    const std::string w(what);
    if (samples.size() != static_cast<size_t>(g.points * g.batch))
        throw std::invalid_argument(w + ": samples " + samples.shape().str() + " hold " + std::to_string(samples.size()) +
                                    " values, expected M x batch = " + std::to_string(g.points) + " x " +
                                    std::to_string(g.batch));
    if (grid.size() != static_cast<size_t>(g.grid_size() * g.batch))
        throw std::invalid_argument(w + ": grid " + grid.shape().str() + " holds " + std::to_string(grid.size()) +
                                    " values, expected " + std::to_string(g.grid_size()) + " x batch " +
                                    std::to_string(g.batch));
    if ((samples.size() > 0 && samples.device() != Device::Cuda) || grid.device() != Device::Cuda)
        throw std::invalid_argument(w + ": samples and grid must be on the CUDA device");
    if (overlaps(samples, grid)) throw std::invalid_argument(w + ": samples and grid overlap");
}

SpreadArgs spread_args(const NufftGrid& g, const CudaNufftPointSet& s, const CArray& samples, CArray& grid) {
    return SpreadArgs{s.tiling,
                      static_cast<int>(s.points),
                      g.beta,
                      s.coord(0),
                      g.dims >= 2 ? s.coord(1) : nullptr,
                      g.dims >= 3 ? s.coord(2) : nullptr,
                      s.perm,
                      s.bin_start,
                      s.sub_bin,
                      s.sub_first,
                      s.sub_total,
                      static_cast<int>(g.batch),
                      g.grid_size(),
                      reinterpret_cast<const float2*>(samples.data()),
                      reinterpret_cast<float2*>(grid.data())};
}

}  // namespace

SpreadMethod nufft_spread_choice(const NufftGrid& g, const NufftPointSet& p) {
    const CudaNufftPointSet& s = cuda_point_set(g, p, "cuda::nufft_spread_choice");
    if (!shared_tiles_pay_off(g, s.tiling)) return SpreadMethod::GlobalSorted;
    return spread_planes_applies(g.dims, g.width) ? SpreadMethod::OwnedPlanes : SpreadMethod::SharedTiles;
}

void nufft_spread_with(Backend& be, const NufftGrid& g, const NufftPointSet& p, const CArray& samples, CArray& grid,
                       SpreadMethod method) {
    const CudaNufftPointSet& s = cuda_point_set(g, p, "cuda::nufft_spread");
    check_arrays(g, samples, grid, "cuda::nufft_spread");
    DeviceGuard guard(backend_device(be));
    const cudaStream_t stream = backend_stream(be);
    const std::string context = "NUFFT spread, " + std::to_string(g.points) + " points, batch " + std::to_string(g.batch);
    LARMOR_CUDA_CHECK(cudaMemsetAsync(grid.data(), 0, grid.bytes(), stream), context);
    if (g.points == 0) return;
    if (method == SpreadMethod::Auto) method = nufft_spread_choice(g, p);
    const SpreadArgs a = spread_args(g, s, samples, grid);
    if (method == SpreadMethod::OwnedPlanes) {
        if (g.batch > 65535)
            throw std::invalid_argument("cuda::nufft_spread: batch " + std::to_string(g.batch) + " exceeds 65535");
        launch_spread_planes(a, g.width, s.max_subproblems, stream);
        LARMOR_CUDA_LAUNCH_CHECK("nufft spread_planes_kernel", context);
    } else if (method == SpreadMethod::SharedTiles) {
        const long long bytes = s.tiling.tile_size() * static_cast<long long>(sizeof(float2));
        if (bytes > kMaxTileBytes)
            throw std::invalid_argument("cuda::nufft_spread: a shared tile of " + std::to_string(bytes) +
                                        " bytes exceeds " + std::to_string(kMaxTileBytes) + " (use GlobalSorted)");
        if (g.batch > 65535)
            throw std::invalid_argument("cuda::nufft_spread: batch " + std::to_string(g.batch) + " exceeds 65535");
        const dim3 blocks(static_cast<unsigned>(s.max_subproblems), static_cast<unsigned>(g.batch));
        const long long shared = bytes + tile_index_ints(s.tiling) * static_cast<long long>(sizeof(int));
        dispatch_dims_width(g.dims, g.width, [&](auto d, auto w) {
            auto kernel = spread_tiles_kernel<decltype(d)::value, decltype(w)::value>;
            // Tiles above the default 48 KiB need the opt-in (H100: up to 227 KiB per block).
            if (shared > 48 * 1024)
                LARMOR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       static_cast<int>(shared)),
                                  context);
            kernel<<<blocks, kTileThreads, static_cast<size_t>(shared), stream>>>(a);
        });
        LARMOR_CUDA_LAUNCH_CHECK("nufft spread_tiles_kernel", context);
    } else {
        launch_spread_global(a, g.dims, g.width, stream);
        LARMOR_CUDA_LAUNCH_CHECK("nufft spread_global_kernel", context);
    }
}

void nufft_spread(Backend& be, const NufftGrid& g, const NufftPointSet& p, const CArray& samples, CArray& grid) {
    nufft_spread_with(be, g, p, samples, grid, SpreadMethod::Auto);
}

}  // namespace larmor::cuda
