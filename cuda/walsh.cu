// Adaptive coil sensitivities on the GPU (Walsh, Gmitro & Marcellin, "Adaptive reconstruction of
// phased array MR imagery", MRM 43:682, 2000), the same recipe as core/cpu/walsh.cpp so the two
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
// for 256^2) the windows do not overlap and a block per point (walsh_point_kernel) replaces the
// strips: 60 us instead of 70 us on the H200 (ncu), still latency-bound (95 registers, 5 blocks per
// SM, one warp busy with the power iteration while three wait). walsh_combine then interpolates the
// maps inside the combination (walsh_combine_kernel) instead of writing them.
//
// The FP32 CUDA cores do the arithmetic: TF32 tensor cores would lose the 1e-5 agreement with the CPU
// reference, and R's Hermitian symmetry halves the formation, which a tensor-core GEMM would not.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/cpu/backend_checks.h"
#include "cuda/cuda_check.h"
#include "cuda/kernels.h"

namespace larmor::cuda {
namespace {

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

// The strongest coil from the partial energies, by one warp: coil c's chunks added in order, then the
// first maximum (largest energy, smallest index on ties, as the CPU). Every block that needs it
// computes it (a few KB from L2) instead of a one-block kernel in between: one launch less.
__device__ int strongest_coil(const double* __restrict__ partial, long long chunks, int coils) {
    const int lane = threadIdx.x & 31;
    double best = -1.0;
    int best_c = 0;
    for (int c = lane; c < kWalshMaxCoils; c += 32) {
        if (c >= coils) break;
        double e = 0.0;
        for (long long k = 0; k < chunks; ++k) e += partial[c * chunks + k];
        if (e > best) {  // c grows: ties keep the smaller index
            best = e;
            best_c = c;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        const double ob = __shfl_xor_sync(0xffffffffu, best, o);
        const int oc = __shfl_xor_sync(0xffffffffu, best_c, o);
        if (ob > best || (ob == best && oc < best_c)) {
            best = ob;
            best_c = oc;
        }
    }
    return best_c;
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
    static constexpr int kPitch = CP + 2;          // float2 per staged pixel / R row: 16-byte aligned, no
                                                   // bank conflicts for row-wise 16-byte loads
    static constexpr int kTiles1d = CP / 4;
    static constexpr int kTiles = kTiles1d * (kTiles1d + 1) / 2;  // 4x4 tiles on/above the diagonal
    static constexpr int kSeg = CP < 32 ? CP : 32;  // row entries per power-iteration thread
    static constexpr int kLanesPerRow = CP / kSeg;
    static constexpr int kGroup = CP * kLanesPerRow;  // threads per point in the power iteration
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
    static constexpr size_t kRedBytes = static_cast<size_t>(kPoints) * (kGroup > 32 ? kGroup / 32 : 1) * sizeof(float);
    static constexpr size_t kSharedBytes = kUnionBytes + kVBytes + ((kRedBytes + 15) / 16) * 16;
};

struct GridArgs {
    const float2* x;
    long long nx, ny, pixels;
    int nc;
    int lo, hi, stride;
    long long gx, gy, gpoints;
    int band_rows;  // staged rows per pass (of P columns)
    const double* energy;  // [coil][chunk] partial energies
    long long energy_chunks;
    float2* out;  // [coil][gpoints]; the maps themselves when stride == 1
};

// acc += a conj(b)
__device__ __forceinline__ void cmac_conj(float2& acc, float2 a, float2 b) {
    acc.x = fmaf(a.x, b.x, acc.x);
    acc.x = fmaf(a.y, b.y, acc.x);
    acc.y = fmaf(a.y, b.x, acc.y);
    acc.y = fmaf(-a.x, b.y, acc.y);
}

// acc += a b
__device__ __forceinline__ void cmac(float2& acc, float2 a, float2 b) {
    acc.x = fmaf(a.x, b.x, acc.x);
    acc.x = fmaf(-a.y, b.y, acc.x);
    acc.y = fmaf(a.x, b.y, acc.y);
    acc.y = fmaf(a.y, b.x, acc.y);
}

// Barrier of the first `count` threads (a multiple of 32) only: for CP = 64 a point's power
// iteration spans 4 warps, and warps of absent points (the last strip of a row) must not be waited for.
__device__ __forceinline__ void named_barrier(int count) {
    asm volatile("bar.sync 1, %0;" ::"r"(count) : "memory");
}

// Grid point i along an axis of n pixels: min(i * stride, n - 1).
__device__ __forceinline__ int grid_coord(long long i, int stride, int n) {
    return static_cast<int>(min(i * stride, static_cast<long long>(n - 1)));
}

// Sum over the kGroup threads of one point (all of them must call it).
template <int CP>
__device__ float group_sum(float v, float* red, int barrier_count) {
    using Cfg = GridCfg<CP>;
    if constexpr (Cfg::kGroup <= 32) {
        for (int o = Cfg::kGroup / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        return v;
    } else {
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        const int lane_in_group = threadIdx.x % Cfg::kGroup;
        if ((lane_in_group & 31) == 0) red[lane_in_group >> 5] = v;
        named_barrier(barrier_count);
        float t = 0.f;
        for (int w = 0; w < Cfg::kGroup / 32; ++w) t += red[w];
        return t;
    }
}

template <int CP>
__device__ __forceinline__ void group_sync(int barrier_count) {
    if constexpr (GridCfg<CP>::kGroup <= 32) {
        __syncwarp();
    } else {
        named_barrier(barrier_count);
    }
}

// Phase 2 of both grid kernels: kWalshIterations power iterations for each of the npts points whose
// R (CP x CP, row pitch kPitch) lies at R + p * CP * kPitch in shared memory; the unit vectors go to
// vs + p * CP. A point's rows fit one warp for CP <= 32 (no block barrier); for CP = 64 its 128
// threads meet at named barriers. Threads from npts * kGroup on (rounded up to a warp) idle.
template <int CP>
__device__ void power_iterations(const float2* R, float2* vs, float* red, int npts, int tid) {
    using Cfg = GridCfg<CP>;
    constexpr int kPitch = Cfg::kPitch;
    constexpr int G = Cfg::kGroup, kSeg = Cfg::kSeg, H = Cfg::kLanesPerRow;
    const int power_threads = ((npts * G + 31) / 32) * 32;  // whole warps; lanes of absent points idle along
    if (tid >= power_threads) return;
    // Lanes of absent points (a group smaller than a warp) shadow the last point: they read its R and
    // v, keeping the warp's shuffles and barriers whole, but never write.
    const bool present = tid / G < npts;
    const int pp = min(tid / G, npts - 1), lane = tid % G, prow = lane / H, half = lane % H;
    const float2* Rp = R + pp * CP * kPitch;
    float2* v = vs + pp * CP;
    float* redp = red + pp * (G > 32 ? G / 32 : 1);
    // Start from the column with the largest diagonal (first maximum, as the CPU).
    int j0 = 0;
    for (int i = 1; i < CP; ++i)
        if (Rp[i * kPitch + i].x > Rp[j0 * kPitch + j0].x) j0 = i;
    const bool nonzero = Rp[j0 * kPitch + j0].x > 0.f;
    float2 row[kSeg];
#pragma unroll
    for (int k = 0; k < kSeg; k += 2) {
        const float4 t = *reinterpret_cast<const float4*>(Rp + prow * kPitch + half * kSeg + k);
        row[k] = make_float2(t.x, t.y);
        row[k + 1] = make_float2(t.z, t.w);
    }
    const float2 v0 = half == 0 && nonzero ? Rp[prow * kPitch + j0] : make_float2(0.f, 0.f);
    float n2 = group_sum<CP>(v0.x * v0.x + v0.y * v0.y, redp, npts * G);
    const float inv0 = n2 > 0.f ? 1.f / sqrtf(n2) : 0.f;
    if (half == 0 && present) v[prow] = make_float2(v0.x * inv0, v0.y * inv0);
    group_sync<CP>(npts * G);
    for (int it = 0; it < detail::kWalshIterations; ++it) {
        // Four partial sums: independent FMA chains hide the FMA latency.
        float2 s[4] = {make_float2(0.f, 0.f), make_float2(0.f, 0.f), make_float2(0.f, 0.f), make_float2(0.f, 0.f)};
#pragma unroll
        for (int k = 0; k < kSeg; k += 2) {
            const float4 vv = *reinterpret_cast<const float4*>(v + half * kSeg + k);  // broadcast
            cmac(s[(k / 2) % 4], row[k], make_float2(vv.x, vv.y));
            cmac(s[(k / 2 + 2) % 4], row[k + 1], make_float2(vv.z, vv.w));
        }
        float2 w = make_float2((s[0].x + s[1].x) + (s[2].x + s[3].x), (s[0].y + s[1].y) + (s[2].y + s[3].y));
        if constexpr (H == 2) {
            w.x += __shfl_xor_sync(0xffffffffu, w.x, 1);
            w.y += __shfl_xor_sync(0xffffffffu, w.y, 1);
        }
        n2 = group_sum<CP>(half == 0 ? w.x * w.x + w.y * w.y : 0.f, redp, npts * G);
        group_sync<CP>(npts * G);  // every thread has read v
        // R v == 0: the CPU stops, keeping v; keeping v here gives the same result. rsqrtf is
        // within 2 ulp of the CPU's 1 / sqrt: a scale of v, forgotten by the next step (and a
        // unit norm to 2 ulp after the last).
        if (n2 > 0.f && half == 0 && present) {
            const float inv = rsqrtf(n2);
            v[prow] = make_float2(w.x * inv, w.y * inv);
        }
        group_sync<CP>(npts * G);
    }
}

// The output of both grid kernels: the npts vectors in vs (after a block barrier), phase of the
// reference coil removed, to a.out[coil][gbase + p], coalesced along consecutive points.
template <int CP>
__device__ void write_vectors(const float2* vs, int npts, const GridArgs& a, long long gbase, int tid, int threads) {
    __shared__ int ref_s;
    if (tid < 32) {
        const int r = strongest_coil(a.energy, a.energy_chunks, a.nc);
        if (tid == 0) ref_s = r;
    }
    __syncthreads();
    const int ref = ref_s;
    for (int e = tid; e < a.nc * npts; e += threads) {
        const int c = e / npts, p = e - c * npts;
        const float2* v = vs + p * CP;
        const float2 vr = v[ref];
        const float mag = sqrtf(vr.x * vr.x + vr.y * vr.y);
        float2 o = v[c];
        if (mag > 0.f) {  // v * conj(vr) / |vr|
            const float cr = vr.x / mag, ci = -vr.y / mag;
            o = make_float2(o.x * cr - o.y * ci, o.x * ci + o.y * cr);
        }
        a.out[c * a.gpoints + gbase + p] = o;
    }
}

template <int CP>
__global__ void __launch_bounds__(GridCfg<CP>::kThreads, 2) walsh_grid_kernel(const GridArgs a) {
    using Cfg = GridCfg<CP>;
    constexpr int P = Cfg::kPoints, kPitch = Cfg::kPitch, kThreads = Cfg::kThreads;
    extern __shared__ float4 smem4[];
    // [column sums | staging], then R: [P][CP][kPitch]
    float2* vs = reinterpret_cast<float2*>(smem4) + Cfg::kUnionBytes / sizeof(float2);  // [P][CP]
    float* red = reinterpret_cast<float*>(vs + P * CP);     // [P][kGroup / 32]
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

    // ---- phase 1: formation ----
    // Thread roles: tile (ti, tj) of point fp's R, and the same tile of the column sum of column
    // slot fp of the current chunk of P columns.
    const int fp = tid / Cfg::kTiles, fk = tid % Cfg::kTiles;
    const bool former = fp < npts;
    int ti = 0, tj = 0;
    {
        int k = fk;
        while (k >= Cfg::kTiles1d - ti) {
            k -= Cfg::kTiles1d - ti;
            ++ti;
        }
        tj = ti + k;
    }
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
            __syncthreads();  // the previous staging and column sums are consumed
            // One pixel per thread, all its coils: consecutive threads read consecutive x of a coil.
            for (int pix = tid; pix < nrows * ncols; pix += kThreads) {
                const int r = pix / ncols, q = pix - r * ncols;
                const float2* src = a.x + slice_off + static_cast<long long>(ya + r) * a.nx + xa + q;
                float4* dst = reinterpret_cast<float4*>(stage + (r * P + q) * kPitch);
#pragma unroll
                for (int c = 0; c < CP; c += 2) {
                    const float2 u = c < a.nc ? src[c * a.pixels] : make_float2(0.f, 0.f);
                    const float2 w = c + 1 < a.nc ? src[(c + 1) * a.pixels] : make_float2(0.f, 0.f);
                    dst[c / 2] = make_float4(u.x, u.y, w.x, w.y);
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
    if (former) {
        float2* Rp = R + fp * CP * kPitch;
#pragma unroll
        for (int rr = 0; rr < 4; ++rr)
#pragma unroll
            for (int cc = 0; cc < 4; ++cc) {
                const float2 v = acc[rr][cc];  // R_{4ti+rr, 4tj+cc}
                Rp[(4 * ti + rr) * kPitch + 4 * tj + cc] = v;
                if (ti != tj) Rp[(4 * tj + cc) * kPitch + 4 * ti + rr] = make_float2(v.x, -v.y);
            }
    }
    __syncthreads();

    // ---- phase 2: power iteration, warp-synchronous for CP <= 32; then the output ----
    power_iterations<CP>(R, vs, red, npts, tid);
    __syncthreads();
    write_vectors<CP>(vs, npts, a, grow * a.gx + i0, tid, kThreads);
}

// ---------------------------------------------------------------------------------------------
// Grid eigenvectors, one block per grid point: for a spacing at least the window side (the default,
// stride = kernel) neighbouring windows do not overlap, so the strip kernel's sharing of column sums
// buys nothing, and its strips of 8 points left a 256^2 image with 190 blocks of 288 threads (one
// per SM, most of them waiting at barriers: 70 us for 38 x 38 points, ncu). Here each point has a
// block of kPointThreads: the window's pixels are staged in shared memory, column by column, all
// loads issued at once, and each thread owns a TR x TC tile of the full R (no triangle bookkeeping:
// twice the products of the Hermitian half, still cheap next to staging at this size), summed in
// the CPU's order: down each column of the window, then the column sums left to right. Then the
// power iteration and the output of the strip kernel, for one point.
constexpr int kPointThreads = 128;
constexpr int kPointChunk = 64;  // staged pixels per pass

template <int CP>
struct PointCfg {
    static constexpr int kPitch = GridCfg<CP>::kPitch;
    // R tile per thread: CP^2 / 128 entries (CP = 8: one entry for the first 64 threads).
    static constexpr int kTR = CP == 64 ? 4 : CP == 32 ? 2 : 1;
    static constexpr int kTC = CP == 64 ? 8 : CP == 32 ? 4 : CP == 16 ? 2 : 1;
    static constexpr int kColTiles = CP / kTC;
    static constexpr int kTiles = (CP / kTR) * kColTiles;
    static constexpr size_t kStageBytes = static_cast<size_t>(kPointChunk) * kPitch * sizeof(float2);
    static constexpr size_t kRBytes = static_cast<size_t>(CP) * kPitch * sizeof(float2);
    static constexpr size_t kUnionBytes = zmax(kStageBytes, kRBytes);
    static constexpr size_t kVBytes = static_cast<size_t>(CP) * sizeof(float2);
    static constexpr size_t kSharedBytes = kUnionBytes + kVBytes + 16;
    static_assert(kTiles <= kPointThreads, "R tiles exceed the block");
    static_assert(GridCfg<CP>::kGroup <= kPointThreads, "power iteration group exceeds the block");
};

template <int CP>
__global__ void __launch_bounds__(kPointThreads, 6) walsh_point_kernel(const GridArgs a) {
    using Cfg = PointCfg<CP>;
    constexpr int kPitch = Cfg::kPitch, TR = Cfg::kTR, TC = Cfg::kTC;
    extern __shared__ float4 smem4[];
    float2* stage = reinterpret_cast<float2*>(smem4);  // [kPointChunk][kPitch], then R [CP][kPitch]
    float2* vs = stage + Cfg::kUnionBytes / sizeof(float2);
    float* red = reinterpret_cast<float*>(vs + CP);
    const int tid = threadIdx.x;

    const int nx = static_cast<int>(a.nx), ny = static_cast<int>(a.ny);
    const long long point = blockIdx.x;  // (slice * gy + j) * gx + i
    const long long i = point % a.gx, grow = point / a.gx, j = grow % a.gy, slice = grow / a.gy;
    const int gxp = grid_coord(i, a.stride, nx), gyp = grid_coord(j, a.stride, ny);
    const int x0 = max(0, gxp - a.lo), x1 = min(nx - 1, gxp + a.hi);
    const int y0 = max(0, gyp - a.lo), y1 = min(ny - 1, gyp + a.hi);
    const int h = y1 - y0 + 1, npix = (x1 - x0 + 1) * h;
    const float2* xs = a.x + slice * a.nx * a.ny;

    const bool former = tid < Cfg::kTiles;
    const int r0 = (tid / Cfg::kColTiles) * TR, c0 = (tid % Cfg::kColTiles) * TC;
    float2 acc[TR][TC], col[TR][TC];
#pragma unroll
    for (int r = 0; r < TR; ++r)
#pragma unroll
        for (int c = 0; c < TC; ++c) acc[r][c] = col[r][c] = make_float2(0.f, 0.f);

    for (int k0 = 0; k0 < npix; k0 += kPointChunk) {
        const int n = min(kPointChunk, npix - k0);
        __syncthreads();  // the previous chunk is consumed
        // Pixel k of the window: column x0 + k / h, row y0 + k % h; all coils of a pixel contiguous.
        // A window that fits one chunk (the usual case) is read along its rows, so consecutive
        // threads read neighbouring pixels of one coil; a larger one goes column by column.
        // Thread t stages pixel t % kPointChunk for every second coil: its position is worked out
        // once per chunk, not per element (integer division is ~20 instructions).
        static_assert(kPointThreads == 2 * kPointChunk, "two threads per staged pixel");
        {
            const int q = tid % kPointChunk;
            if (q < n) {
                const int w = x1 - x0 + 1;
                const int k = n == npix ? (q % w) * h + q / w : k0 + q;
                const float2* src = xs + static_cast<long long>(y0 + k % h) * a.nx + x0 + k / h;
                float2* dst = stage + (k - k0) * kPitch;
#pragma unroll 8
                for (int c = tid / kPointChunk; c < CP; c += 2)
                    dst[c] = c < a.nc ? src[c * a.pixels] : make_float2(0.f, 0.f);
            }
        }
        __syncthreads();
        if (former)
            for (int q = 0; q < n; ++q) {
                const float2* pv = stage + q * kPitch;
                float2 av[TR], bv[TC];
#pragma unroll
                for (int r = 0; r < TR; ++r) av[r] = pv[r0 + r];
#pragma unroll
                for (int c = 0; c < TC; ++c) bv[c] = pv[c0 + c];
#pragma unroll
                for (int r = 0; r < TR; ++r)
#pragma unroll
                    for (int c = 0; c < TC; ++c) cmac_conj(col[r][c], av[r], bv[c]);
                if ((k0 + q) % h == h - 1) {  // end of a window column: add its sum, in column order
#pragma unroll
                    for (int r = 0; r < TR; ++r)
#pragma unroll
                        for (int c = 0; c < TC; ++c) {
                            acc[r][c] = make_float2(acc[r][c].x + col[r][c].x, acc[r][c].y + col[r][c].y);
                            col[r][c] = make_float2(0.f, 0.f);
                        }
                }
            }
    }
    __syncthreads();  // staging consumed: R takes its place
    float2* R = stage;
    if (former)
#pragma unroll
        for (int r = 0; r < TR; ++r)
#pragma unroll
            for (int c = 0; c < TC; ++c) R[(r0 + r) * kPitch + c0 + c] = acc[r][c];
    __syncthreads();
    power_iterations<CP>(R, vs, red, 1, tid);
    __syncthreads();
    write_vectors<CP>(vs, 1, a, point, tid, kPointThreads);
}

// ---------------------------------------------------------------------------------------------
// Interpolation: one thread per pixel, consecutive threads along x, so every map store of a coil is
// coalesced; the four grid vectors come from L1/L2 (16 pixels share them at stride 4). The vector is
// kept in registers between the norm and the stores.

constexpr int kInterpThreads = 256;

__device__ __forceinline__ void grid_cell(long long p, long long n, long long g, int stride, long long& i0,
                                          long long& i1, float& t) {
    i0 = min(p / stride, g - 1);
    i1 = min(i0 + 1, g - 1);
    const long long p0 = min(i0 * stride, n - 1), p1 = min(i1 * stride, n - 1);
    t = p1 > p0 ? static_cast<float>(p - p0) / static_cast<float>(p1 - p0) : 0.f;
}

// The four grid points around pixel q (x fastest, then y, then slice) and their bilinear weights.
struct Bilinear {
    long long a, b, d, e;  // grid offsets of (i0, j0), (i1, j0), (i0, j1), (i1, j1)
    float wa, wb, wd, we;

    __device__ Bilinear(long long q, long long nx, long long ny, long long gx, long long gy, int stride) {
        const long long x = q % nx, y = (q / nx) % ny, slice = q / (nx * ny);
        long long i0, i1, j0, j1;
        float tx, ty;
        grid_cell(x, nx, gx, stride, i0, i1, tx);
        grid_cell(y, ny, gy, stride, j0, j1, ty);
        const long long r0 = (slice * gy + j0) * gx, r1 = (slice * gy + j1) * gx;
        a = r0 + i0;
        b = r0 + i1;
        d = r1 + i0;
        e = r1 + i1;
        wa = (1.f - tx) * (1.f - ty);
        wb = tx * (1.f - ty);
        wd = (1.f - tx) * ty;
        we = tx * ty;
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
    const Bilinear at(live ? p : 0, nx, ny, gx, gy, stride);
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
// there, is 1). The maps (17 MB for 256^2 x 32) are never written nor read back: x is streamed once
// and the small grid comes from L2. A block covers 32 consecutive pixels with kCombineWarps warps,
// warp w taking coils w, w + kCombineWarps, ... (each load of x 256 contiguous bytes); the partial
// sums meet in shared memory.
constexpr int kCombineWarps = 8;

__global__ void __launch_bounds__(kCombineWarps * 32) walsh_combine_kernel(const float2* __restrict__ grid,
                                                                            const float2* __restrict__ x, long long nx,
                                                                            long long ny, long long pixels, int nc,
                                                                            int stride, long long gx, long long gy,
                                                                            long long gpoints, float2* __restrict__ y) {
    __shared__ float part[kCombineWarps][3][32];
    const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
    const long long p = blockIdx.x * 32LL + lane;
    const bool live = p < pixels;
    float re = 0.f, im = 0.f, n2 = 0.f;
    if (live) {
        const Bilinear at(p, nx, ny, gx, gy, stride);
        for (int c = warp; c < nc; c += kCombineWarps) {
            const float2 sv = at(grid + c * gpoints);
            const float2 xv = x[c * pixels + p];
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
    y[p] = make_float2(r * inv, i * inv);
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
    const size_t gpoints = detail::walsh_grid_size(static_cast<size_t>(d.nx), d.stride) *
                           detail::walsh_grid_size(static_cast<size_t>(d.ny), d.stride) * static_cast<size_t>(d.slices);
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
    a.lo = std::min(detail::walsh_lo(d.kernel), reach);
    a.hi = std::min(detail::walsh_hi(d.kernel), reach);
    a.stride = d.stride;
    a.gx = static_cast<long long>(detail::walsh_grid_size(static_cast<size_t>(d.nx), d.stride));
    a.gy = static_cast<long long>(detail::walsh_grid_size(static_cast<size_t>(d.ny), d.stride));
    a.gpoints = a.gx * a.gy * d.slices;
    const size_t row_bytes = static_cast<size_t>(Cfg::kPoints) * Cfg::kPitch * sizeof(float2);
    static_assert(Cfg::kUnionBytes - Cfg::kCsumBytes >= static_cast<size_t>(Cfg::kPoints) * Cfg::kPitch * sizeof(float2),
                  "no room to stage one row");
    a.band_rows = static_cast<int>(std::min<size_t>(static_cast<size_t>(d.kernel), (Cfg::kUnionBytes - Cfg::kCsumBytes) / row_bytes));
    a.energy = energy;
    a.energy_chunks = energy_chunks;
    a.out = grid;

    if (d.stride >= d.kernel) {
        // Windows do not overlap: one block per point (walsh_point_kernel).
        using PCfg = PointCfg<CP>;
        if (a.gpoints > 0x7fffffffLL)
            throw std::invalid_argument("walsh: " + ctx + " has " + std::to_string(a.gpoints) +
                                        " grid points, more than one CUDA launch holds (use a larger stride)");
        walsh_point_kernel<CP><<<static_cast<unsigned>(a.gpoints), kPointThreads, PCfg::kSharedBytes, stream>>>(a);
        LARMOR_CUDA_LAUNCH_CHECK("walsh_point_kernel", ctx);
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
    walsh_combine_kernel<<<static_cast<unsigned>((pixels + 31) / 32), kCombineWarps * 32, 0, stream>>>(
        grid, x, d.nx, d.ny, pixels, d.coils, d.stride, g.gx, g.gy, g.gpoints, y);
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

}  // namespace larmor::cuda
