// Adaptive coil sensitivities on the GPU (Walsh, Gmitro & Marcellin, "Adaptive reconstruction of
// phased array MR imagery", MRM 43:682, 2000), the same recipe as core/coils/walsh_cpu.cpp so the two
// agree to float rounding: at every point of a grid of spacing `stride` (min(i * stride, n - 1) along
// x and y), R = sum over the kernel x kernel window of v v^H, kWalshIterations power iterations from
// R's column with the largest diagonal, unit norm, the phase of the strongest coil (largest energy
// over the whole array) removed; between grid points, bilinear interpolation and unit norm again.
//
// Where the time goes (256 x 256 x 32 coils, kernel 7, stride 4: 65 x 65 = 4225 grid points). The
// sums over the window are separable, as on the CPU: column sums over the window's 7 rows, then 7 of
// them per point. Counting complex multiply-adds (CMAC, 4 FMA) on 36 4x4 tiles (576 entries) of the
// upper triangle of R:
//   column sums    65 grid rows x ~281 columns (strips overlap by 3) x 7 rows x 576 =  74 M CMAC
//   window sums    4225 x 7 columns x 576 complex adds                                =  17 M CADD
//   power steps    4225 x 20 x 32^2                                                   =  87 M CMAC
// so 0.64 G FMA = 1.3 GFLOP: 19 us at the H200's 67 TFLOP/s FP32 if every issue slot were an FMA.
// With the loads, reductions and barriers around them (and column chunks of 8 for 35 columns per
// strip) it is ~29 M warp instructions, 28 us at one instruction per scheduler and cycle. Per pixel
// (stride 1) the same code does ~12x the work. Memory is small next to it: x is read twice (energy,
// windows; 17 MB each, mostly from L2) and the maps written once (17 MB, ~4 us at 4.1 TB/s). Hence
// one compute-bound kernel that keeps everything on chip (grid_kernel) between a bandwidth-bound
// energy reduction and a bandwidth-bound interpolation.
//
// At a spacing of at least the window side (the chain's default: kernel 7, stride 7, 38 x 38 points
// for 256^2) the windows do not overlap and walsh_point.cu's kernel, each point with its own window,
// replaces the strips. walsh_combine then interpolates the maps inside the combination
// (walsh_combine_kernel) instead of writing them.
//
// The FP32 CUDA cores do the arithmetic: TF32 tensor cores would lose the 1e-5 agreement with the CPU
// reference, and R's Hermitian symmetry halves the formation, which a tensor-core GEMM would not.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/coils/coil_checks.h"
#include "cuda/coil_launchers.h"
#include "cuda/cuda_check.h"
#include "cuda/walsh_device.cuh"

namespace larmor::coils::cuda {
namespace {

using namespace walsh;

// ---------------------------------------------------------------------------------------------
// Strongest coil. The phase reference must be the same coil on both backends, so the energies are
// summed in double (like the CPU) and in a fixed order (deterministic). One block per coil would
// use 32 of the 132 SMs; instead every block sums one chunk of one coil, and the grid kernel adds
// the chunks in order.

constexpr int kEnergyThreads = 256;
constexpr int kEnergyPerThread = 16;
constexpr long long kEnergyChunk = static_cast<long long>(kEnergyThreads) * kEnergyPerThread;

long long energy_chunks(long long pixels) { return (pixels + kEnergyChunk - 1) / kEnergyChunk; }

__device__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__global__ void __launch_bounds__(kEnergyThreads) coil_energy_kernel(const float2* __restrict__ x, long long pixels,
                                                                      double* __restrict__ partial) {
    const long long chunk = blockIdx.x;
    const float2* xc = x + static_cast<long long>(blockIdx.y) * pixels;
    const long long begin = chunk * kEnergyChunk;
    double acc = 0.0;
#pragma unroll
    for (int k = 0; k < kEnergyPerThread; ++k) {  // all loads issued before the sums need them
        const long long p = begin + static_cast<long long>(k) * kEnergyThreads + threadIdx.x;
        if (p < pixels) {
            const float2 v = xc[p];
            acc += static_cast<double>(v.x) * v.x + static_cast<double>(v.y) * v.y;
        }
    }
    __shared__ double part[kEnergyThreads / 32];
    acc = warp_sum(acc);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0.0;
        for (int w = 0; w < kEnergyThreads / 32; ++w) t += part[w];
        partial[static_cast<long long>(blockIdx.y) * gridDim.x + chunk] = t;
    }
}

// ---------------------------------------------------------------------------------------------
// Grid eigenvectors. One block per strip of P consecutive grid points of one grid row: they share
// the window rows, and neighbouring windows overlap. Coils are padded to CP (8, 16, 32 or 64) with
// zeros, which changes neither R's nonzero entries nor the power iteration.
//
// Phase 1, formation. Each thread owns one 4x4 tile of one point's R in registers (only tiles on
// and above the diagonal: R is Hermitian, the others are conjugate transposes). The strip's columns
// go through in chunks of P: the window rows of a chunk are staged in shared memory pixel-major (all
// coils of a pixel contiguous, so a thread reads 2 coils per 16-byte load), thread (slot q, tile)
// sums its tile of v v^H down column q (4 x 16-byte loads for 16 CMAC = 64 FMA per pixel: FMA-bound,
// not shared-memory-bound), publishes the column sum, and every point's thread of that tile adds
// the column sums inside its window. Neighbouring windows overlap (by kernel - stride columns), so a
// column sum serves up to two points instead of being recomputed: 35 instead of 49 outer products
// per point at kernel 7, stride 4, and R summed in the CPU's order (rows, then columns).
//
// Phase 2, power iteration: R goes through shared memory (in place of the column sums, no longer
// needed) into row layout, one row (or half a row for CP = 64) per thread in registers, so the 20
// matrix-vector products read R from registers and only v from shared memory (one broadcast 16-byte
// load per two CMAC). A point's rows fit one warp for CP <= 32, so its iteration needs no block
// barrier at all.

constexpr int imax(int a, int b) { return a > b ? a : b; }
constexpr size_t zmax(size_t a, size_t b) { return a > b ? a : b; }

template <int CP>
struct GridCfg {
    static constexpr int kPitch = RowLayout<CP>::kPitch;
    static constexpr int kGroup = RowLayout<CP>::kGroup;  // threads per point in the power iteration
    static constexpr int kTiles1d = RowLayout<CP>::kTiles1d;
    static constexpr int kTiles = RowLayout<CP>::kTiles;
    // Points per block: 256-288 threads in both phases.
    static constexpr int kPoints = CP == 8 ? 32 : CP == 16 ? 16 : CP == 32 ? 8 : 2;
    static constexpr int kFormers = kPoints * kTiles;
    static constexpr int kThreads = ((imax(kFormers, kPoints * kGroup) + 31) / 32) * 32;
    static constexpr size_t kRBytes = static_cast<size_t>(kPoints) * CP * kPitch * sizeof(float2);
    // Column sums of P columns (16 entries per tile), then the staged pixels: up to 24 KB of rows of
    // P pixels (11 rows for CP = 32, so a kernel of 7 is staged at once). R takes their place.
    static constexpr size_t kCsumBytes = static_cast<size_t>(kPoints) * 16 * kTiles * sizeof(float2);
    static constexpr size_t kStageBytes = static_cast<size_t>(24) << 10;
    static constexpr size_t kUnionBytes = zmax(kRBytes, kCsumBytes + kStageBytes);
    static constexpr size_t kVBytes = static_cast<size_t>(kPoints) * CP * sizeof(float2);
    static constexpr size_t kRedBytes = static_cast<size_t>(kPoints) * RowLayout<CP>::kRedPerPoint * sizeof(float);
    static constexpr size_t kSharedBytes = kUnionBytes + kVBytes + ((kRedBytes + 15) / 16) * 16;
};

template <int CP>
__global__ void __launch_bounds__(GridCfg<CP>::kThreads, 2) walsh_grid_kernel(const GridArgs a) {
    using Cfg = GridCfg<CP>;
    constexpr int P = Cfg::kPoints, kPitch = Cfg::kPitch, kThreads = Cfg::kThreads;
    extern __shared__ float4 smem4[];
    // [column sums | staging], then R: [P][CP][kPitch]
    float2* vs = reinterpret_cast<float2*>(smem4) + Cfg::kUnionBytes / sizeof(float2);  // [P][CP]
    float* red = reinterpret_cast<float*>(vs + P * CP);     // [P][kRedPerPoint]
    const int tid = threadIdx.x;

    // Image coordinates in 32 bits (the launcher checks they fit; fewer registers), offsets in 64.
    const int nx = static_cast<int>(a.nx), ny = static_cast<int>(a.ny);
    const long long strips = (a.gx + P - 1) / P;
    const long long strip = blockIdx.x % strips, grow = blockIdx.x / strips;  // grow = slice * gy + j
    const long long j = grow % a.gy, slice = grow / a.gy;
    const long long i0 = strip * P;
    const int npts = static_cast<int>(min(static_cast<long long>(P), a.gx - i0));
    const int y = grid_coord(j, a.stride, ny);
    const int y0 = max(0, y - a.lo), y1 = min(ny - 1, y + a.hi);
    const long long slice_off = slice * a.nx * a.ny;
    const int xs = max(0, grid_coord(i0, a.stride, nx) - a.lo);
    const int xe = min(nx - 1, grid_coord(i0 + npts - 1, a.stride, nx) + a.hi);

    // The phase reference and the input scale (strongest_coil) before formation: staging scales x.
    __shared__ int ref_s;
    __shared__ float scale_s;
    if (tid < 32) {
        float sc;
        const int r = strongest_coil(a.energy, a.energy_chunks, a.nc, a.pixels, sc);
        if (tid == 0) ref_s = r, scale_s = sc;
    }

    // ---- phase 1: formation ----
    // Thread roles: tile (ti, tj) of point fp's R, and the same tile of the column sum of column
    // slot fp of the current chunk of P columns.
    const int fp = tid / Cfg::kTiles, fk = tid % Cfg::kTiles;
    const bool former = fp < npts;
    int ti, tj;
    upper_tile(fk, Cfg::kTiles1d, ti, tj);
    const int gxp = grid_coord(i0 + fp, a.stride, nx);
    const int wx0 = max(0, gxp - a.lo), wx1 = min(nx - 1, gxp + a.hi);
    const int kernel = a.lo + a.hi + 1;
    float4* csum = reinterpret_cast<float4*>(smem4);  // [P columns][8 entry pairs][kTiles]
    float2* stage = reinterpret_cast<float2*>(csum + Cfg::kCsumBytes / sizeof(float4));  // [rows][P][kPitch]
    float2 acc[4][4];
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[r][c] = make_float2(0.f, 0.f);

    for (int xa = xs; xa <= xe; xa += P) {
        const int ncols = min(P, xe - xa + 1);
        const int xc = xa + fp;  // column of this thread's column sum
        bool needed = fp < ncols;
        if (needed && a.stride > kernel) {  // gaps between the windows: skip columns no window covers
            needed = false;
            for (int p = 0; p < npts; ++p) {
                const int g = grid_coord(i0 + p, a.stride, nx);
                needed = needed || (xc >= g - a.lo && xc <= g + a.hi);
            }
        }
        float2 cs[4][4];
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int c = 0; c < 4; ++c) cs[r][c] = make_float2(0.f, 0.f);
        for (int ya = y0; ya <= y1; ya += a.band_rows) {
            const int nrows = min(a.band_rows, y1 - ya + 1);
            __syncthreads();  // the previous staging and column sums are consumed (and scale_s is set)
            const float sc = scale_s;
            // One pixel per thread, all its coils: consecutive threads read consecutive x of a coil.
            for (int pix = tid; pix < nrows * ncols; pix += kThreads) {
                const int r = pix / ncols, q = pix - r * ncols;
                const float2* src = a.x + slice_off + static_cast<long long>(ya + r) * a.nx + xa + q;
                float4* dst = reinterpret_cast<float4*>(stage + (r * P + q) * kPitch);
#pragma unroll
                for (int c = 0; c < CP; c += 2) {
                    const float2 u = c < a.nc ? src[c * a.pixels] : make_float2(0.f, 0.f);
                    const float2 w = c + 1 < a.nc ? src[(c + 1) * a.pixels] : make_float2(0.f, 0.f);
                    dst[c / 2] = make_float4(u.x * sc, u.y * sc, w.x * sc, w.y * sc);
                }
            }
            __syncthreads();
            if (needed)
                for (int r = 0; r < nrows; ++r) {
                    const float2* pv = stage + (r * P + fp) * kPitch;
                    const float4 a01 = *reinterpret_cast<const float4*>(pv + 4 * ti);
                    const float4 a23 = *reinterpret_cast<const float4*>(pv + 4 * ti + 2);
                    const float4 b01 = *reinterpret_cast<const float4*>(pv + 4 * tj);
                    const float4 b23 = *reinterpret_cast<const float4*>(pv + 4 * tj + 2);
                    const float2 av[4] = {make_float2(a01.x, a01.y), make_float2(a01.z, a01.w),
                                          make_float2(a23.x, a23.y), make_float2(a23.z, a23.w)};
                    const float2 bv[4] = {make_float2(b01.x, b01.y), make_float2(b01.z, b01.w),
                                          make_float2(b23.x, b23.y), make_float2(b23.z, b23.w)};
#pragma unroll
                    for (int rr = 0; rr < 4; ++rr)
#pragma unroll
                        for (int cc = 0; cc < 4; ++cc) cmac_conj(cs[rr][cc], av[rr], bv[cc]);
                }
        }
        // Publish the column sums (tile index fastest: conflict-free 16-byte accesses) ...
        if (needed)
#pragma unroll
            for (int e = 0; e < 8; ++e)
                csum[(fp * 8 + e) * Cfg::kTiles + fk] = make_float4(cs[e / 2][2 * (e % 2)].x, cs[e / 2][2 * (e % 2)].y,
                                                                    cs[e / 2][2 * (e % 2) + 1].x,
                                                                    cs[e / 2][2 * (e % 2) + 1].y);
        __syncthreads();
        // ... and add those of this chunk's columns inside the point's window, in column order (as the CPU).
        if (former) {
            const int cx0 = max(wx0, xa), cx1 = min(wx1, xa + ncols - 1);
            for (int x = cx0; x <= cx1; ++x) {
                const int q = x - xa;
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    const float4 t = csum[(q * 8 + e) * Cfg::kTiles + fk];
                    float2& u = acc[e / 2][2 * (e % 2)];
                    float2& w = acc[e / 2][2 * (e % 2) + 1];
                    u = make_float2(u.x + t.x, u.y + t.y);
                    w = make_float2(w.x + t.z, w.y + t.w);
                }
            }
        }
    }
    __syncthreads();  // column sums consumed: R takes their place
    float2* R = reinterpret_cast<float2*>(smem4);
    if (former) store_tile<CP>(R + fp * CP * kPitch, acc, ti, tj);
    __syncthreads();

    // ---- phase 2: power iteration, warp-synchronous for CP <= 32; then the output ----
    power_iterations<CP>(R, CP * kPitch, vs, red, npts, tid);
    __syncthreads();
    write_vectors<CP>(vs, npts, a, grow * a.gx + i0, ref_s, tid, kThreads);
}

// ---------------------------------------------------------------------------------------------
// Interpolation: one thread per pixel, consecutive threads along x, so every map store of a coil is
// coalesced; the four grid vectors come from L1/L2 (16 pixels share them at stride 4). The vector is
// kept in registers between the norm and the stores.

constexpr int kInterpThreads = 256;

__device__ __forceinline__ void grid_cell(int p, int n, int g, int stride, int& i0, int& i1, float& t) {
    i0 = min(p / stride, g - 1);
    i1 = min(i0 + 1, g - 1);
    const int p0 = grid_coord(i0, stride, n), p1 = grid_coord(i1, stride, n);
    t = p1 > p0 ? static_cast<float>(p - p0) / static_cast<float>(p1 - p0) : 0.f;
}

// The four grid points around pixel (x, y) of a slice and their bilinear weights. In-plane
// coordinates are 32-bit (the launchers check the sides): a 64-bit division costs ~100 instructions.
struct Bilinear {
    long long a, b, d, e;  // grid offsets of (i0, j0), (i1, j0), (i0, j1), (i1, j1)
    float wa, wb, wd, we;

    __device__ static Bilinear at_pixel(int x, int y, long long slice, int nx, int ny, int gx, int gy, int stride) {
        int i0, i1, j0, j1;
        float tx, ty;
        grid_cell(x, nx, gx, stride, i0, i1, tx);
        grid_cell(y, ny, gy, stride, j0, j1, ty);
        const long long r0 = (slice * gy + j0) * gx, r1 = (slice * gy + j1) * gx;
        return {r0 + i0,
                r0 + i1,
                r1 + i0,
                r1 + i1,
                (1.f - tx) * (1.f - ty),
                tx * (1.f - ty),
                (1.f - tx) * ty,
                tx * ty};
    }
    // The interpolated vector entry of one coil's grid (g = grid + coil * gpoints).
    __device__ float2 operator()(const float2* g) const {
        const float2 va = g[a], vb = g[b], vd = g[d], ve = g[e];
        return make_float2(wa * va.x + wb * vb.x + wd * vd.x + we * ve.x, wa * va.y + wb * vb.y + wd * vd.y + we * ve.y);
    }
};

// kInterpLanes lanes per pixel, each interpolating every kInterpLanes-th coil: with one thread per
// pixel holding all CP coils (94 registers) the kernel filled a quarter of the SMs' warp slots and
// waited on its loads (23 us for 256^2 x 32 coils, ncu); split over lanes it has 8x the threads and
// few registers each, and the norm is a 3-step shuffle within the lane group.
constexpr int kInterpLanes = 8;

template <int CP>
__global__ void __launch_bounds__(kInterpThreads) walsh_interp_kernel(const float2* __restrict__ grid, long long nx,
                                                                       long long ny, long long pixels, int nc,
                                                                       int stride, long long gx, long long gy,
                                                                       long long gpoints, float2* __restrict__ maps) {
    constexpr int kPerLane = CP / kInterpLanes;
    const long long t = static_cast<long long>(blockIdx.x) * kInterpThreads + threadIdx.x;
    const int lane = static_cast<int>(threadIdx.x % kInterpLanes);
    // Lane groups are aligned to kInterpLanes within the warp, so the whole group agrees on `live`.
    const long long p = t / kInterpLanes;
    const bool live = p < pixels;
    const long long q = live ? p : 0, row = q / nx;
    const Bilinear at = Bilinear::at_pixel(static_cast<int>(q - row * nx), static_cast<int>(row % ny), row / ny,
                                           static_cast<int>(nx), static_cast<int>(ny), static_cast<int>(gx),
                                           static_cast<int>(gy), stride);
    // Every grid vector has its reference-coil component real and >= 0 and the weights are >= 0, so
    // the interpolated vector has too: it is the weighted sum of theirs, so the four never cancel
    // through a phase flip, and it vanishes only where all weighted grid vectors do.
    float2 s[kPerLane];
    float n2 = 0.f;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
        const int c = lane + k * kInterpLanes;
        s[k] = live && c < nc ? at(grid + c * gpoints) : make_float2(0.f, 0.f);
    }
    // Same summation order as the CPU twin is not needed here: the norm only scales, and its rounding
    // is far below the 1e-5 agreement.
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) n2 += s[k].x * s[k].x + s[k].y * s[k].y;
#pragma unroll
    for (int o = kInterpLanes / 2; o > 0; o >>= 1) n2 += __shfl_xor_sync(0xffffffffu, n2, o, kInterpLanes);
    if (!live) return;
    const float inv = n2 > 0.f ? 1.f / sqrtf(n2) : 0.f;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
        const int c = lane + k * kInterpLanes;
        if (c < nc) maps[c * pixels + p] = make_float2(s[k].x * inv, s[k].y * inv);
    }
}

// Interpolation fused with the combination (Backend::walsh_combine): instead of storing the maps,
// each coil's interpolated (not yet renormalised) vector s_c is multiplied into the image,
//   y = sum_c conj(s_c) x_c / |s|,
// which is combine_last_axis with the unit-norm maps s / |s| (their sum of squares, the denominator
// there, is 1). The maps (17 MB for 256^2 x 32) are never written nor read back: x is streamed once,
// the bound (16.8 MB, ~4 us).
//
// A block covers 32 consecutive pixels of one image row with kCombineWarps warps, warp w taking coils
// w, w + kCombineWarps, ... (each load of x 256 contiguous bytes); the partial sums meet in shared
// memory. The row is the same for the whole block, so the interpolation along y is done once per
// block for the few grid columns the 32 pixels need (all coils, into shared memory), and each pixel
// and coil is left with a lerp along x of two shared values.
//
// ncu, 256^2 x 32 coils, H200: 16.3 us when every warp worked out the four grid points and weights
// itself with 64-bit divisions; 13.5-14.6 us with 32-bit ones, computed per warp, once per block, or
// (this version) replaced by the lerp along y; 23 us with one thread per pixel looping over all coils
// (15 warps per SM kept too few loads in flight). So the instructions were not what bounds it: it reads
// x at ~1.2 TB/s, a third of what the energy kernel reaches on the same array. Not yet understood.
constexpr int kCombineWarps = 8;
constexpr int kCombineCols = 34;  // grid columns 32 pixels can need: 31 / stride + 2, stride >= 1

__global__ void __launch_bounds__(kCombineWarps * 32) walsh_combine_kernel(const float2* __restrict__ grid,
                                                                            const float2* __restrict__ x, int nx, int ny,
                                                                            unsigned xblocks, long long pixels, int nc,
                                                                            int stride, int gx, int gy,
                                                                            long long gpoints, float2* __restrict__ y) {
    __shared__ float2 along_y[kWalshMaxCoils][kCombineCols];  // the grid interpolated to this row
    __shared__ float part[kCombineWarps][3][32];
    const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
    const unsigned row = blockIdx.x / xblocks;  // slice * ny + y
    const int px0 = static_cast<int>(blockIdx.x - row * xblocks) * 32;
    const unsigned slice = row / static_cast<unsigned>(ny);
    int j0, j1;
    float ty;
    grid_cell(static_cast<int>(row - slice * ny), ny, gy, stride, j0, j1, ty);
    const int i_lo = min(px0 / stride, gx - 1);
    const int i_hi = min(min(px0 + 31, nx - 1) / stride + 1, gx - 1);
    const int ncols = i_hi - i_lo + 1;
    const float2* g0 = grid + (static_cast<long long>(slice) * gy + j0) * gx + i_lo;
    const float2* g1 = grid + (static_cast<long long>(slice) * gy + j1) * gx + i_lo;
    for (int e = tid; e < nc * ncols; e += kCombineWarps * 32) {
        const int c = e / ncols, i = e - c * ncols;
        const float2 u = g0[c * gpoints + i], v = g1[c * gpoints + i];
        along_y[c][i] = make_float2((1.f - ty) * u.x + ty * v.x, (1.f - ty) * u.y + ty * v.y);
    }
    __syncthreads();
    const int px = px0 + lane;
    const bool live = px < nx;
    float re = 0.f, im = 0.f, n2 = 0.f;
    if (live) {
        int i0, i1;
        float tx;
        grid_cell(px, nx, gx, stride, i0, i1, tx);
        i0 -= i_lo;
        i1 -= i_lo;
        const float2* xc = x + static_cast<long long>(row) * nx + px;
#pragma unroll 4
        for (int c = warp; c < nc; c += kCombineWarps) {
            const float2 u = along_y[c][i0], v = along_y[c][i1];
            const float2 sv = make_float2((1.f - tx) * u.x + tx * v.x, (1.f - tx) * u.y + tx * v.y);
            const float2 xv = xc[c * pixels];
            re += sv.x * xv.x + sv.y * xv.y;  // conj(s) x
            im += sv.x * xv.y - sv.y * xv.x;
            n2 += sv.x * sv.x + sv.y * sv.y;
        }
    }
    part[warp][0][lane] = re;
    part[warp][1][lane] = im;
    part[warp][2][lane] = n2;
    __syncthreads();
    if (warp != 0 || !live) return;
    float r = 0.f, i = 0.f, n = 0.f;
    for (int w = 0; w < kCombineWarps; ++w) {
        r += part[w][0][lane];
        i += part[w][1][lane];
        n += part[w][2][lane];
    }
    const float inv = n > 0.f ? 1.f / sqrtf(n) : 0.f;  // all-zero maps combine to 0, as on the CPU
    y[static_cast<long long>(row) * nx + px] = make_float2(r * inv, i * inv);
}

// ---------------------------------------------------------------------------------------------

struct ScratchLayout {
    long long chunks = 0;
    size_t partial = 0, grid = 0, bytes = 0;
};

// The grid vectors get their own scratch unless they are the maps themselves (stride 1, maps wanted).
ScratchLayout scratch_layout(const WalshDims& d, bool grid_in_scratch) {
    ScratchLayout s;
    const long long pixels = d.nx * d.ny * d.slices;
    s.chunks = energy_chunks(pixels);
    s.partial = 0;
    s.grid = (s.partial + static_cast<size_t>(s.chunks) * d.coils * sizeof(double) + 255) / 256 * 256;
    const size_t gpoints = checks::walsh_grid_size(static_cast<size_t>(d.nx), d.stride) *
                           checks::walsh_grid_size(static_cast<size_t>(d.ny), d.stride) * static_cast<size_t>(d.slices);
    s.bytes = s.grid + (grid_in_scratch ? gpoints * d.coils * sizeof(float2) : 0);
    return s;
}

// Grid geometry shared by the grid kernel and its consumers.
struct GridGeometry {
    long long gx = 0, gy = 0, gpoints = 0;
};

// Energies and the grid eigenvectors into `grid` ([coil][gpoints]).
template <int CP>
GridGeometry launch_grid(const float2* x, const WalshDims& d, double* energy, long long energy_chunks, float2* grid,
                         cudaStream_t stream, const std::string& ctx) {
    using Cfg = GridCfg<CP>;
    const long long pixels = d.nx * d.ny * d.slices;
    coil_energy_kernel<<<dim3(static_cast<unsigned>(energy_chunks), static_cast<unsigned>(d.coils)), kEnergyThreads, 0,
                         stream>>>(x, pixels, energy);
    LARMOR_CUDA_LAUNCH_CHECK("coil_energy_kernel", ctx);

    GridArgs a{};
    a.x = x;
    a.nx = d.nx;
    a.ny = d.ny;
    a.pixels = pixels;
    a.nc = d.coils;
    // Windows are clamped to the image: offsets beyond its size change nothing (and stay in 32 bits).
    const int reach = static_cast<int>(std::max(d.nx, d.ny));
    a.lo = std::min(checks::walsh_lo(d.kernel), reach);
    a.hi = std::min(checks::walsh_hi(d.kernel), reach);
    a.stride = d.stride;
    a.gx = static_cast<long long>(checks::walsh_grid_size(static_cast<size_t>(d.nx), d.stride));
    a.gy = static_cast<long long>(checks::walsh_grid_size(static_cast<size_t>(d.ny), d.stride));
    a.gpoints = a.gx * a.gy * d.slices;
    const size_t row_bytes = static_cast<size_t>(Cfg::kPoints) * Cfg::kPitch * sizeof(float2);
    static_assert(Cfg::kUnionBytes - Cfg::kCsumBytes >= static_cast<size_t>(Cfg::kPoints) * Cfg::kPitch * sizeof(float2),
                  "no room to stage one row");
    a.band_rows = static_cast<int>(std::min<size_t>(static_cast<size_t>(d.kernel), (Cfg::kUnionBytes - Cfg::kCsumBytes) / row_bytes));
    a.energy = energy;
    a.energy_chunks = energy_chunks;
    a.out = grid;

    if (d.stride >= d.kernel) {  // windows do not overlap: walsh_point.cu
        launch_point_grid(a, CP, stream, ctx);
        return {a.gx, a.gy, a.gpoints};
    }
    const long long blocks = (a.gx + Cfg::kPoints - 1) / Cfg::kPoints * a.gy * d.slices;
    if (blocks > 0x7fffffffLL)
        throw std::invalid_argument("walsh: " + ctx + " needs " + std::to_string(blocks) +
                                    " blocks, more than one CUDA launch holds (use a larger stride)");
    // Once per process and device would do; the call is cheap next to the kernel.
    LARMOR_CUDA_CHECK(cudaFuncSetAttribute(walsh_grid_kernel<CP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(Cfg::kSharedBytes)),
                      "walsh_grid_kernel shared memory, " + ctx);
    walsh_grid_kernel<CP><<<static_cast<unsigned>(blocks), Cfg::kThreads, Cfg::kSharedBytes, stream>>>(a);
    LARMOR_CUDA_LAUNCH_CHECK("walsh_grid_kernel", ctx);
    return {a.gx, a.gy, a.gpoints};
}

// One launch per pixel for kInterpLanes lanes.
unsigned interp_blocks(long long pixels) {
    return static_cast<unsigned>((pixels * kInterpLanes + kInterpThreads - 1) / kInterpThreads);
}

template <int CP>
void launch_maps(const float2* x, const WalshDims& d, const ScratchLayout& s, char* base, float2* maps,
                 cudaStream_t stream, const std::string& ctx) {
    auto* energy = reinterpret_cast<double*>(base + s.partial);
    // Stride 1: the grid is every pixel, written straight into the maps.
    float2* grid = d.stride == 1 ? maps : reinterpret_cast<float2*>(base + s.grid);
    const GridGeometry g = launch_grid<CP>(x, d, energy, s.chunks, grid, stream, ctx);
    if (d.stride == 1) return;
    const long long pixels = d.nx * d.ny * d.slices;
    walsh_interp_kernel<CP><<<interp_blocks(pixels), kInterpThreads, 0, stream>>>(
        grid, d.nx, d.ny, pixels, d.coils, d.stride, g.gx, g.gy, g.gpoints, maps);
    LARMOR_CUDA_LAUNCH_CHECK("walsh_interp_kernel", ctx);
}

template <int CP>
void launch_combined(const float2* x, const WalshDims& d, const ScratchLayout& s, char* base, float2* y,
                     cudaStream_t stream, const std::string& ctx) {
    auto* energy = reinterpret_cast<double*>(base + s.partial);
    auto* grid = reinterpret_cast<float2*>(base + s.grid);
    const GridGeometry g = launch_grid<CP>(x, d, energy, s.chunks, grid, stream, ctx);
    const long long pixels = d.nx * d.ny * d.slices;
    const long long xblocks = (d.nx + 31) / 32, blocks = xblocks * d.ny * d.slices;
    if (blocks > 0x7fffffffLL)
        throw std::invalid_argument("walsh_combine: " + ctx + " needs " + std::to_string(blocks) +
                                    " blocks, more than one CUDA launch holds");
    walsh_combine_kernel<<<static_cast<unsigned>(blocks), kCombineWarps * 32, 0, stream>>>(
        grid, x, static_cast<int>(d.nx), static_cast<int>(d.ny), static_cast<unsigned>(xblocks), pixels, d.coils,
        d.stride, static_cast<int>(g.gx), static_cast<int>(g.gy), g.gpoints, y);
    LARMOR_CUDA_LAUNCH_CHECK("walsh_combine_kernel", ctx);
}

std::string describe(const WalshDims& d) {
    return "[" + std::to_string(d.nx) + "x" + std::to_string(d.ny) + "x" + std::to_string(d.slices) + "x" +
           std::to_string(d.coils) + "] kernel " + std::to_string(d.kernel) + " stride " + std::to_string(d.stride);
}

void check_dims(const WalshDims& d) {
    constexpr long long kMaxSide = 1LL << 28;  // image coordinates are 32-bit inside the kernels
    if (d.nx > kMaxSide || d.ny > kMaxSide)
        throw std::invalid_argument("walsh: image " + describe(d) + " has a side above " + std::to_string(kMaxSide) +
                                    " pixels, more than the CUDA kernels index");
}

}  // namespace

size_t walsh_scratch_bytes(const WalshDims& d) { return scratch_layout(d, d.stride != 1).bytes; }
size_t walsh_combine_scratch_bytes(const WalshDims& d) { return scratch_layout(d, true).bytes; }

void launch_walsh(const float2* x, const WalshDims& d, void* scratch, float2* maps, cudaStream_t stream) {
    if (d.nx * d.ny * d.slices == 0 || d.coils == 0) return;
    check_dims(d);
    // The context string is built per call: a few hundred ns next to a kernel of tens of us.
    const std::string ctx = describe(d);
    const ScratchLayout s = scratch_layout(d, d.stride != 1);
    auto* base = static_cast<char*>(scratch);
    if (d.coils <= 8) launch_maps<8>(x, d, s, base, maps, stream, ctx);
    else if (d.coils <= 16) launch_maps<16>(x, d, s, base, maps, stream, ctx);
    else if (d.coils <= 32) launch_maps<32>(x, d, s, base, maps, stream, ctx);
    else launch_maps<64>(x, d, s, base, maps, stream, ctx);
}

void launch_walsh_combine(const float2* x, const WalshDims& d, void* scratch, float2* y, cudaStream_t stream) {
    if (d.nx * d.ny * d.slices == 0 || d.coils == 0) return;
    check_dims(d);
    const std::string ctx = describe(d);
    const ScratchLayout s = scratch_layout(d, true);
    auto* base = static_cast<char*>(scratch);
    if (d.coils <= 8) launch_combined<8>(x, d, s, base, y, stream, ctx);
    else if (d.coils <= 16) launch_combined<16>(x, d, s, base, y, stream, ctx);
    else if (d.coils <= 32) launch_combined<32>(x, d, s, base, y, stream, ctx);
    else launch_combined<64>(x, d, s, base, y, stream, ctx);
}

}  // namespace larmor::coils::cuda
