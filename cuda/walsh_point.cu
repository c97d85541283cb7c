// Walsh grid eigenvectors when the windows do not overlap (stride >= kernel, the chain's default:
// kernel 7, stride 7, 38 x 38 points for 256^2): kPoints points per block, each with its own window
// (the strip kernel in walsh.cu shares column sums between overlapping windows, which buys nothing
// here).
//
// Work for 256^2, 32 coils, 1444 points. Per point: 49 outer products over R's upper triangle (36
// 4x4 tiles, 576 entries: 28 K CMAC) and 20 matrix-vector products (20 K CMAC): 0.28 G FMA in all,
// 8.4 us at the H200's 33 T FMA/s. Versions measured under ncu on the H200:
//   - one 128-thread block per point, R formed in full by 128 tiles, one warp iterating while three
//     waited at barriers: 60 us;
//   - one warp per point holding its full rows of R from the formation through the iteration (no
//     barriers, broadcast loads of v): 36 us, issue-bound at ~13.5 K instructions per point, most of
//     them the formation's FMAs for the lower triangle;
//   - this one: the formation by 4x4 tiles of the upper triangle (4 16-byte loads per 64 FMA), R
//     through shared memory into the row layout of the power iteration (walsh_device.cuh): 32.7 us,
//     one wave (361 blocks of 160 threads, 3 per SM), issuing 0.54 instructions per scheduler and
//     cycle. The 1444 points are 11 per SM, so more blocks per SM cannot help; fewer instructions
//     per point (the 20 matrix-vector products are now ~40 % of them) or more threads per point can.
//
// The windows are staged pixel-major (all coils of a pixel contiguous) by cp.async, all threads of
// the block walking the windows' rows so that consecutive threads read neighbouring pixels of one
// coil, stored in column order. R is summed in the CPU's order: down each column of the window, then
// the column sums left to right.
#include <cuda_pipeline.h>

#include <atomic>
#include <stdexcept>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/walsh_device.cuh"

namespace larmor::coils::cuda::walsh {
namespace {

constexpr int kPointChunk = 56;  // staged pixels per point and pass: a 7 x 7 window at once

template <int CP>
struct PointCfg {
    using L = RowLayout<CP>;
    static constexpr int kTiles1d = L::kTiles1d;
    static constexpr int kTiles = L::kTiles;
    static constexpr int kPoints = CP == 8 ? 16 : CP == 16 ? 8 : CP == 32 ? 4 : 1;
    static constexpr int kFormers = kPoints * kTiles;
    static constexpr int kPowerThreads = kPoints * L::kGroup;
    static constexpr int kThreads = ((kFormers > kPowerThreads ? kFormers : kPowerThreads) + 31) / 32 * 32;
    // Per point: the staged pixels, then R (CP rows) in their place. +8 float2 puts consecutive
    // points' areas 16 banks apart.
    static constexpr int kAreaRows = kPointChunk > CP ? kPointChunk : CP;
    static constexpr int kArea = kAreaRows * L::kPitch + 8;
    static constexpr int kSlots = (kPoints * kPointChunk + kThreads - 1) / kThreads;  // staged pixels per thread
    static constexpr size_t kAreasFloat2 = static_cast<size_t>(kPoints) * kArea;
    static constexpr size_t kSharedBytes = (kAreasFloat2 + static_cast<size_t>(kPoints) * CP) * sizeof(float2) +
                                           static_cast<size_t>(kPoints) * L::kRedPerPoint * sizeof(float);
};

// A point's window: columns x0 .. x0 + w - 1, rows y0 .. y0 + h - 1 of its slice.
struct Window {
    long long corner;  // offset of (x0, y0) in x
    int w, h;
};

template <int CP>
__global__ void __launch_bounds__(PointCfg<CP>::kThreads, 3) walsh_point_kernel(const GridArgs a) {
    using L = RowLayout<CP>;
    using Cfg = PointCfg<CP>;
    constexpr int P = Cfg::kPoints, kPitch = L::kPitch;
    extern __shared__ float4 smem4[];
    __shared__ Window win[P];
    __shared__ int ref_s, max_pix_s;
    __shared__ float scale_s;
    float2* const areas = reinterpret_cast<float2*>(smem4);  // [P][kArea]
    float2* const vs = areas + Cfg::kAreasFloat2;             // [P][CP]
    float* const red = reinterpret_cast<float*>(vs + P * CP);  // [P][L::kRedPerPoint]
    const int tid = static_cast<int>(threadIdx.x);

    // Grid points fit 31 bits (checked by the launcher): 32-bit index arithmetic.
    const unsigned first = blockIdx.x * static_cast<unsigned>(P);
    const int npts = static_cast<int>(min(static_cast<long long>(P), a.gpoints - first));
    if (tid == 0) max_pix_s = 0;
    __syncthreads();
    if (tid < npts) {
        const unsigned point = first + static_cast<unsigned>(tid);
        const unsigned gx = static_cast<unsigned>(a.gx), gy = static_cast<unsigned>(a.gy);
        const unsigned grow = point / gx, i = point - grow * gx, slice = grow / gy, j = grow - slice * gy;
        const int nx = static_cast<int>(a.nx), ny = static_cast<int>(a.ny);
        const int gxp = grid_coord(i, a.stride, nx), gyp = grid_coord(j, a.stride, ny);
        const int x0 = max(0, gxp - a.lo), x1 = min(nx - 1, gxp + a.hi);
        const int y0 = max(0, gyp - a.lo), y1 = min(ny - 1, gyp + a.hi);
        win[tid] = {slice * a.nx * a.ny + static_cast<long long>(y0) * a.nx + x0, x1 - x0 + 1, y1 - y0 + 1};
        atomicMax(&max_pix_s, (x1 - x0 + 1) * (y1 - y0 + 1));
    }
    __syncthreads();
    const int max_pix = max_pix_s;

    // Pixels k0 .. k0 + kPointChunk - 1 (column order) of every window into its area. A window that
    // fits one pass is read along its rows (m: row m / w, column m % w), so consecutive threads read
    // neighbouring pixels of one coil; a larger one goes in column order. Coils from nc on are zeros.
    auto stage_pixels = [&](int k0) {
        int soff[Cfg::kSlots];
        long long goff[Cfg::kSlots];
#pragma unroll
        for (int s = 0; s < Cfg::kSlots; ++s) {
            const int e = tid + s * Cfg::kThreads, p = e / kPointChunk, m = e - p * kPointChunk;
            soff[s] = -1;
            if (p >= npts) continue;
            const Window wd = win[p];
            const int npix = wd.w * wd.h, n = min(kPointChunk, npix - k0);
            if (m >= n) continue;
            int r, c, k;
            if (n == npix) {
                r = m / wd.w;
                c = m - r * wd.w;
                k = c * wd.h + r;
            } else {
                k = k0 + m;
                c = k / wd.h;
                r = k - c * wd.h;
            }
            soff[s] = p * Cfg::kArea + (k - k0) * kPitch;
            goff[s] = wd.corner + static_cast<long long>(r) * a.nx + c;
        }
#pragma unroll 4
        for (int c = 0; c < CP; ++c)
#pragma unroll
            for (int s = 0; s < Cfg::kSlots; ++s) {
                if (soff[s] < 0) continue;
                float2* dst = areas + soff[s] + c;
                if (c < a.nc) __pipeline_memcpy_async(dst, a.x + goff[s] + c * a.pixels, sizeof(float2));
                else *dst = make_float2(0.f, 0.f);
            }
        __pipeline_commit();
    };

    stage_pixels(0);
    if (tid < 32) {  // while the copies are in flight
        float sc;
        const int r = strongest_coil(a.energy, a.energy_chunks, a.nc, a.pixels, sc);
        if (tid == 0) ref_s = r, scale_s = sc;
    }

    // Formation: thread (fp, tile (ti, tj)) sums its 4x4 tile of point fp's R.
    const int fp = tid / Cfg::kTiles;
    const bool former = fp < npts;
    int ti = 0, tj = 0;
    upper_tile(tid - fp * Cfg::kTiles, Cfg::kTiles1d, ti, tj);
    const Window wd = win[former ? fp : 0];
    const int npix = wd.w * wd.h;
    const float2* const stage = areas + (former ? fp : 0) * Cfg::kArea;
    float2 acc[4][4], col[4][4];
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[r][c] = col[r][c] = make_float2(0.f, 0.f);
    int rowpos = 0;
    for (int k0 = 0; k0 < max_pix; k0 += kPointChunk) {
        __pipeline_wait_prior(0);
        __syncthreads();  // every thread's copies have landed (and scale_s is set)
        // The copies go straight to shared memory, so x is scaled here, as it is read.
        const float sc = scale_s;
        const int n = former ? min(kPointChunk, npix - k0) : 0;
        for (int q = 0; q < n; ++q) {
            const float2* pv = stage + q * kPitch;
            const float4 a01 = *reinterpret_cast<const float4*>(pv + 4 * ti);
            const float4 a23 = *reinterpret_cast<const float4*>(pv + 4 * ti + 2);
            const float4 b01 = *reinterpret_cast<const float4*>(pv + 4 * tj);
            const float4 b23 = *reinterpret_cast<const float4*>(pv + 4 * tj + 2);
            const float2 av[4] = {make_float2(a01.x * sc, a01.y * sc), make_float2(a01.z * sc, a01.w * sc),
                                  make_float2(a23.x * sc, a23.y * sc), make_float2(a23.z * sc, a23.w * sc)};
            const float2 bv[4] = {make_float2(b01.x * sc, b01.y * sc), make_float2(b01.z * sc, b01.w * sc),
                                  make_float2(b23.x * sc, b23.y * sc), make_float2(b23.z * sc, b23.w * sc)};
#pragma unroll
            for (int r = 0; r < 4; ++r)
#pragma unroll
                for (int c = 0; c < 4; ++c) cmac_conj(col[r][c], av[r], bv[c]);
            if (++rowpos == wd.h) {  // end of a window column: add its sum, in column order
                rowpos = 0;
#pragma unroll
                for (int r = 0; r < 4; ++r)
#pragma unroll
                    for (int c = 0; c < 4; ++c) {
                        acc[r][c] = make_float2(acc[r][c].x + col[r][c].x, acc[r][c].y + col[r][c].y);
                        col[r][c] = make_float2(0.f, 0.f);
                    }
            }
        }
        if (k0 + kPointChunk < max_pix) {
            __syncthreads();  // the pass is consumed
            stage_pixels(k0 + kPointChunk);
        }
    }
    __syncthreads();  // staging consumed: R takes its place, both triangles
    if (former) store_tile<CP>(areas + fp * Cfg::kArea, acc, ti, tj);
    __syncthreads();
    power_iterations<CP>(areas, Cfg::kArea, vs, red, npts, tid);
    __syncthreads();
    write_vectors<CP>(vs, npts, a, first, ref_s, tid, Cfg::kThreads);
}

// Above 48 KB of dynamic shared memory a kernel must opt in, once per device.
template <int CP>
void allow_shared_memory(const std::string& ctx) {
    static std::atomic<unsigned long long> done{0};
    int device = 0;
    LARMOR_CUDA_CHECK(cudaGetDevice(&device), "walsh_point_kernel device, " + ctx);
    const unsigned long long bit = device < 64 ? 1ULL << device : 0;
    if (bit && (done.load() & bit)) return;
    LARMOR_CUDA_CHECK(cudaFuncSetAttribute(walsh_point_kernel<CP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(PointCfg<CP>::kSharedBytes)),
                      "walsh_point_kernel shared memory, " + ctx);
    done.fetch_or(bit);
}

template <int CP>
void launch(const GridArgs& a, cudaStream_t stream, const std::string& ctx) {
    using Cfg = PointCfg<CP>;
    if (a.gpoints > 0x7fffffffLL)
        throw std::invalid_argument("walsh: " + ctx + " has " + std::to_string(a.gpoints) +
                                    " grid points, more than one CUDA launch holds (use a larger stride)");
    allow_shared_memory<CP>(ctx);
    const long long blocks = (a.gpoints + Cfg::kPoints - 1) / Cfg::kPoints;
    walsh_point_kernel<CP><<<static_cast<unsigned>(blocks), Cfg::kThreads, Cfg::kSharedBytes, stream>>>(a);
    LARMOR_CUDA_LAUNCH_CHECK("walsh_point_kernel", ctx);
}

}  // namespace

void launch_point_grid(const GridArgs& a, int cp, cudaStream_t stream, const std::string& ctx) {
    switch (cp) {
    case 8: launch<8>(a, stream, ctx); break;
    case 16: launch<16>(a, stream, ctx); break;
    case 32: launch<32>(a, stream, ctx); break;
    case 64: launch<64>(a, stream, ctx); break;
    default: throw std::logic_error("walsh: no point kernel for " + std::to_string(cp) + " padded coils");
    }
}

}  // namespace larmor::coils::cuda::walsh
