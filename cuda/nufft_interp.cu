// Interpolation (the forward NUFFT's convolution; core/linops/nufft_kernels.h) on CUDA, the two
// type-2 methods of cuFINUFFT (Shih et al., IPDPSW 2021, sec. III-C):
//  - GlobalSorted ("GM-sort"): one thread per point in bin order gathers its width^dims grid values
//    through L1/L2. Inside a bin the points are in no particular order, so a warp's 32 threads read
//    32 unrelated rows: each of a thread's width^dims loads costs the L1 a wavefront of its own. Kernel
//    values and wrapped indices are computed once per point and reused for every transform.
//  - SharedTiles ("SM"): one block per sub-problem (at most kSubproblemPoints points of one bin) and
//    group of transforms copies the bin's tile (bin + width per axis, wrapped) into shared memory with
//    coalesced loads, then each thread reads its points' values from there: the scattered reads hit
//    shared memory instead of L1 lines. Up to kMaxCoilsPerBlock transforms share one tile pass, so a
//    point's kernel values are computed once per group.
// Each result is written to the point's original position (through the permutation). No allocation,
// no host synchronisation.
#include <algorithm>
#include <string>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/device_context.h"
#include "cuda/launch_size.h"
#include "cuda/nufft_device.cuh"
#include "cuda/nufft_points.h"
#include "cuda/nufft_tile.cuh"

namespace larmor::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kTileThreads = 256;
constexpr int kMaxCoilsPerBlock = 4;
// Shared memory a block's tiles may take together (the default limit is 48 KiB; above it the kernel
// opts in, H100: 227 KiB per SM, so several such blocks stay resident).
constexpr long long kMaxGroupBytes = 96 * 1024;

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
    // SharedTiles only
    NufftTiling t;
    const int* bin_start;
    const int* sub_bin;
    const int* sub_first;
    const int* sub_total;
    int coils_per_block;
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

// Transforms per tile pass the kernel is compiled for: 3D tiles and wide kernels take one (their tile
// alone is tens of KB, and the unrolled code grows with width^2 per transform).
template <int D, int W>
__host__ __device__ constexpr int coils_per_pass() {
    return (D == 3 || W > 8) ? 1 : kMaxCoilsPerBlock;
}

template <int D, int W>
__global__ void __launch_bounds__(kTileThreads) interp_tiles_kernel(InterpArgs a) {
    constexpr int C = coils_per_pass<D, W>();
    extern __shared__ float2 tile[];
    const NufftTiling& t = a.t;
    const SubProblem sp = sub_problem<D, W>(t, a.sub_total, a.sub_bin, a.sub_first, a.bin_start);
    if (!sp.valid) return;
    const int first = sp.first, end = sp.end, ox = sp.o[0], oy = sp.o[1], oz = sp.o[2];
    const int b0 = blockIdx.y * a.coils_per_block;
    const int nc = min(a.coils_per_block, a.batch - b0);
    const int tx = t.tile[0], ty = t.tile[1], size = t.tile[0] * t.tile[1] * t.tile[2];
    int* scratch = reinterpret_cast<int*>(tile + a.coils_per_block * size);
    fill_tile_index(scratch, t, ox, oy, oz);
    __syncthreads();
    const TileIndex index(scratch, tx);
    for (int i = threadIdx.x; i < size; i += blockDim.x) {
        const int g = index.grid_offset(i);
        for (int c = 0; c < nc; ++c) tile[c * size + i] = __ldg(a.grid + static_cast<long long>(b0 + c) * a.grid_size + g);
    }
    __syncthreads();

    for (int p = first + threadIdx.x; p < end; p += blockDim.x) {
        float kx[W], ky[D >= 2 ? W : 1], kz[D >= 3 ? W : 1];
        const int lx = es_kernel_values<W>(a.x[p], a.beta, kx) - ox;
        int ly = 0, lz = 0;
        if constexpr (D >= 2) ly = es_kernel_values<W>(a.y[p], a.beta, ky) - oy;
        else ky[0] = 1.f;
        if constexpr (D >= 3) lz = es_kernel_values<W>(a.z[p], a.beta, kz) - oz;
        else kz[0] = 1.f;
        float2 acc[C];
#pragma unroll
        for (int c = 0; c < C; ++c) acc[c] = make_float2(0.f, 0.f);
#pragma unroll 1  // planes: code size W^2, not W^3
        for (int jz = 0; jz < (D >= 3 ? W : 1); ++jz) {
#pragma unroll
            for (int jy = 0; jy < (D >= 2 ? W : 1); ++jy) {
                const float f = kz[jz] * ky[jy];
                const float2* row = tile + ((lz + jz) * ty + ly + jy) * tx + lx;
#pragma unroll
                for (int c = 0; c < C; ++c) {
                    if (c >= nc) break;
                    float2 r = make_float2(0.f, 0.f);
#pragma unroll
                    for (int jx = 0; jx < W; ++jx) {
                        const float2 v = row[c * size + jx];
                        r.x += v.x * kx[jx];
                        r.y += v.y * kx[jx];
                    }
                    acc[c].x += r.x * f;
                    acc[c].y += r.y * f;
                }
            }
        }
        const int m = a.perm[p];
#pragma unroll
        for (int c = 0; c < C; ++c)
            if (c < nc) a.samples[m + static_cast<long long>(b0 + c) * a.points] = acc[c];
    }
}

// TileRows: the shared tile of interp_tiles_kernel, read by 16 lanes per point instead of one thread.
// With one thread per point a warp's 32 loads go to 32 unrelated tile cells, so on average several
// land in one bank and each load instruction costs the shared memory several wavefronts (random
// addresses: about 7 per warp-wide 8-byte load, against 2 when conflict-free). Here lane (r, h) of a
// point's half-warp reads window row r (y offset) of the planes of parity h (z offset h, h + 2, ...):
// in one instruction the 16 lanes read cells r tx + h tx ty apart, and for an odd tile width tx the
// products r tx (r < 8) fall in distinct 8-byte banks, tx ty (1 or 9 mod 16) moving the h = 1 lanes
// onto the others (widths 5 and 7: the bins' 16 + W is odd). Each lane computes one kernel value per
// axis (its index r) and takes the rest from the other lanes by shuffles; the partial sums of the 16
// lanes are added by a butterfly. 3D, widths up to 8, one transform per tile pass.
constexpr int kRowLanes = 16;

template <int W>
__global__ void __launch_bounds__(kTileThreads) interp_rows_kernel(InterpArgs a) {
    static_assert(W <= 8, "one lane per window row");
    constexpr int kPlanes = (W + 1) / 2;  // planes per lane (parity h: h, h + 2, ...)
    extern __shared__ float2 tile[];
    const NufftTiling& t = a.t;
    const SubProblem sp = sub_problem<3, W>(t, a.sub_total, a.sub_bin, a.sub_first, a.bin_start);
    if (!sp.valid) return;  // the whole block: the shuffles below see every lane of a warp
    const int b = blockIdx.y;  // one transform per pass
    const int tx = t.tile[0], ty = t.tile[1], size = t.tile[0] * t.tile[1] * t.tile[2];
    int* scratch = reinterpret_cast<int*>(tile + size);
    fill_tile_index(scratch, t, sp.o[0], sp.o[1], sp.o[2]);
    __syncthreads();
    const TileIndex index(scratch, tx);
    const float2* in = a.grid + static_cast<long long>(b) * a.grid_size;
    for (int i = threadIdx.x; i < size; i += blockDim.x) tile[i] = __ldg(in + index.grid_offset(i));
    __syncthreads();

    constexpr unsigned kAll = 0xffffffffu;
    const int lane = threadIdx.x & 31, r = lane & 7, h = (lane >> 3) & 1, group = lane & ~15;
    const int plane = tx * ty;
    constexpr int kPointsPerPass = kTileThreads / kRowLanes;
    // Every lane runs the same passes (the bound is the block's), so the shuffles never diverge.
    for (int first = sp.first; first < sp.end; first += kPointsPerPass) {
        const int p = first + static_cast<int>(threadIdx.x) / kRowLanes;
        const bool live = p < sp.end;
        const int q = live ? p : sp.first;  // a surplus lane reads a valid point and discards the sum
        float kxr, kyr, kzr;
        const int lx = es_kernel_value<W>(a.x[q], a.beta, r, kxr) - sp.o[0];
        const int ly = es_kernel_value<W>(a.y[q], a.beta, r, kyr) - sp.o[1];
        const int lz = es_kernel_value<W>(a.z[q], a.beta, r, kzr) - sp.o[2];
        float kx[W], kz[kPlanes];
#pragma unroll
        for (int j = 0; j < W; ++j) kx[j] = __shfl_sync(kAll, kxr, group + j);
#pragma unroll
        for (int i = 0; i < kPlanes; ++i) kz[i] = __shfl_sync(kAll, kzr, group + min(h + 2 * i, 7));
        float2 acc = make_float2(0.f, 0.f);
        if (r < W) {
            const float2* row = tile + ((lz + h) * ty + ly + r) * tx + lx;
#pragma unroll
            for (int i = 0; i < kPlanes; ++i) {
                if (h + 2 * i >= W) break;
                const float2* cells = row + 2 * i * plane;
                float2 s = make_float2(0.f, 0.f);
#pragma unroll
                for (int jx = 0; jx < W; ++jx) {
                    const float2 v = cells[jx];
                    s.x += v.x * kx[jx];
                    s.y += v.y * kx[jx];
                }
                acc.x += s.x * kz[i];
                acc.y += s.y * kz[i];
            }
            acc.x *= kyr;
            acc.y *= kyr;
        }
#pragma unroll
        for (int off = kRowLanes / 2; off > 0; off /= 2) {
            acc.x += __shfl_xor_sync(kAll, acc.x, off);
            acc.y += __shfl_xor_sync(kAll, acc.y, off);
        }
        if (live && (lane & (kRowLanes - 1)) == 0) a.samples[a.perm[p] + static_cast<long long>(b) * a.points] = acc;
    }
}

}  // namespace

InterpMethod nufft_interp_choice(const NufftGrid& g, const NufftPointSet& p) {
    const CudaNufftPointSet& s = cuda_point_set(g, p, "cuda::nufft_interp_choice");
    // TileRows is not picked until it is timed against SharedTiles on a GPU (session 27 ran its tests,
    // not its benchmark: `nufft_kernels_bench --benchmark_filter='NufftInterp/2/(5|7)/(1|3)/'`).
    return shared_tiles_pay_off(g, s.tiling) ? InterpMethod::SharedTiles : InterpMethod::GlobalSorted;
}

void nufft_interp(Backend& be, const NufftGrid& g, const NufftPointSet& p, const CArray& grid, CArray& samples) {
    nufft_interp_with(be, g, p, grid, samples, InterpMethod::Auto);
}

void nufft_interp_with(Backend& be, const NufftGrid& g, const NufftPointSet& p, const CArray& grid, CArray& samples,
                       InterpMethod method) {
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
                       reinterpret_cast<float2*>(samples.data()),
                       s.tiling,
                       s.bin_start,
                       s.sub_bin,
                       s.sub_first,
                       s.sub_total,
                       1};
    const cudaStream_t stream = backend_stream(be);
    const std::string context = "NUFFT interp, " + std::to_string(g.points) + " points, batch " + std::to_string(g.batch);
    if (method == InterpMethod::Auto) method = nufft_interp_choice(g, p);
    if (method == InterpMethod::GlobalSorted) {
        dispatch_dims_width(g.dims, g.width, [&](auto d, auto w) {
            interp_kernel<decltype(d)::value, decltype(w)::value>
                <<<grid_stride_blocks(g.points, kThreads), kThreads, 0, stream>>>(a);
        });
        LARMOR_CUDA_LAUNCH_CHECK("nufft interp_kernel", context);
        return;
    }
    const long long tile_bytes = s.tiling.tile_size() * static_cast<long long>(sizeof(float2));
    if (tile_bytes > kMaxTileBytes)
        throw std::invalid_argument("cuda::nufft_interp: a shared tile of " + std::to_string(tile_bytes) +
                                    " bytes exceeds " + std::to_string(kMaxTileBytes) + " (use GlobalSorted)");
    if (method == InterpMethod::TileRows) {
        if (g.dims != 3 || g.width > 8)
            throw std::invalid_argument("cuda::nufft_interp: the row-lane tile method is for 3D kernels of width up to 8, "
                                        "not " + std::to_string(g.dims) + "D width " + std::to_string(g.width));
        if (g.batch > 65535)
            throw std::invalid_argument("cuda::nufft_interp: batch " + std::to_string(g.batch) + " exceeds 65535 tile passes");
        const long long bytes = tile_bytes + tile_index_ints(s.tiling) * static_cast<long long>(sizeof(int));
        dispatch_width<3>(g.width, [&](auto, auto w) {
            constexpr int W = decltype(w)::value;
            if constexpr (W <= 8) {
                auto kernel = interp_rows_kernel<W>;
                if (bytes > 48 * 1024)
                    LARMOR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                           static_cast<int>(bytes)),
                                      context);
                const dim3 blocks(static_cast<unsigned>(s.max_subproblems), static_cast<unsigned>(g.batch));
                kernel<<<blocks, kTileThreads, static_cast<size_t>(bytes), stream>>>(a);
            }
        });
        LARMOR_CUDA_LAUNCH_CHECK("nufft interp_rows_kernel", context);
        return;
    }
    dispatch_dims_width(g.dims, g.width, [&](auto d, auto w) {
        constexpr int D = decltype(d)::value, W = decltype(w)::value;
        InterpArgs args = a;
        args.coils_per_block = static_cast<int>(
            std::max<long long>(1, std::min<long long>({coils_per_pass<D, W>(), g.batch, kMaxGroupBytes / tile_bytes})));
        const long long groups = (g.batch + args.coils_per_block - 1) / args.coils_per_block;
        if (groups > 65535)
            throw std::invalid_argument("cuda::nufft_interp: batch " + std::to_string(g.batch) + " needs " +
                                        std::to_string(groups) + " tile passes (at most 65535)");
        const long long bytes = tile_bytes * args.coils_per_block + tile_index_ints(s.tiling) * static_cast<long long>(sizeof(int));
        auto kernel = interp_tiles_kernel<D, W>;
        if (bytes > 48 * 1024)
            LARMOR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
                              context);
        const dim3 blocks(static_cast<unsigned>(s.max_subproblems), static_cast<unsigned>(groups));
        kernel<<<blocks, kTileThreads, static_cast<size_t>(bytes), stream>>>(args);
    });
    LARMOR_CUDA_LAUNCH_CHECK("nufft interp_tiles_kernel", context);
}

}  // namespace larmor::cuda
