#pragma once
// Device pieces shared by the Walsh grid kernels (walsh.cu: the strip kernel for overlapping
// windows; walsh_point.cu: one group of threads per grid point): the arguments, the strongest coil,
// the power iteration over rows of R held in registers, and the phase-referenced output. The recipe
// is core/coils/walsh_cpu.cpp's, so both backends agree to float rounding.
#include <cuda_runtime.h>

#include <string>

#include "core/coils/coil_checks.h"
#include "cuda/coil_launchers.h"

namespace larmor::coils::cuda::walsh {

// How the power iteration lays R out over threads: one row per thread (half a row for CP = 64), so a
// matrix-vector product reads R from registers and only v from shared memory (one broadcast 16-byte
// load per two CMAC). Coils are padded to CP (8, 16, 32 or 64) with zeros, which changes neither R's
// nonzero entries nor the iteration.
template <int CP>
struct RowLayout {
    static constexpr int kPitch = CP + 2;          // float2 per staged pixel / R row: 16-byte aligned, no
                                                   // bank conflicts for row-wise 16-byte loads
    static constexpr int kSeg = CP < 32 ? CP : 32;  // row entries per thread
    static constexpr int kLanesPerRow = CP / kSeg;
    static constexpr int kGroup = CP * kLanesPerRow;  // threads per point
    static constexpr int kRedPerPoint = kGroup > 32 ? kGroup / 32 : 1;  // floats of group_sum's scratch
    // R's formation by 4x4 tiles on and above the diagonal (upper_tile): 3, 10, 36, 136 tiles.
    static constexpr int kTiles1d = CP / 4;
    static constexpr int kTiles = kTiles1d * (kTiles1d + 1) / 2;
};

struct GridArgs {
    const float2* x;
    long long nx, ny, pixels;
    int nc;
    int lo, hi, stride;
    long long gx, gy, gpoints;
    int band_rows;  // staged rows per pass of the strip kernel (P columns)
    const double* energy;  // [coil][chunk] partial energies
    long long energy_chunks;
    float2* out;  // [coil][gpoints]; the maps themselves when stride == 1
};

// Queues the per-point grid kernel (walsh_point.cu) for coils padded to cp; stride >= kernel.
void launch_point_grid(const GridArgs& a, int cp, cudaStream_t stream, const std::string& ctx);

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
// iteration spans 4 warps, and warps of absent points must not be waited for.
__device__ __forceinline__ void named_barrier(int count) {
    asm volatile("bar.sync 1, %0;" ::"r"(count) : "memory");
}

// Grid point i along an axis of n pixels: min(i * stride, n - 1).
__device__ __forceinline__ int grid_coord(long long i, int stride, int n) {
    return static_cast<int>(min(i * stride, static_cast<long long>(n - 1)));
}

// Sum over the kGroup threads of one point (all of them must call it; groups are aligned to kGroup).
template <int CP>
__device__ float group_sum(float v, float* red, int barrier_count) {
    constexpr int G = RowLayout<CP>::kGroup;
    if constexpr (G <= 32) {
        for (int o = G / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        return v;
    } else {
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        const int lane_in_group = threadIdx.x % G;
        if ((lane_in_group & 31) == 0) red[lane_in_group >> 5] = v;
        named_barrier(barrier_count);
        float t = 0.f;
        for (int w = 0; w < G / 32; ++w) t += red[w];
        return t;
    }
}

template <int CP>
__device__ __forceinline__ void group_sync(int barrier_count) {
    if constexpr (RowLayout<CP>::kGroup <= 32) {
        __syncwarp();
    } else {
        named_barrier(barrier_count);
    }
}

// The strongest coil from the partial energies ([coil][chunk], from the energy kernel), by one warp:
// coil c's chunks added in order, then the first maximum (largest energy, smallest index on ties, as
// the CPU). Every block that needs it computes it (a few KB from L2) instead of a one-block kernel in
// between: one launch less.
//
// It also returns (in every lane) checks::walsh_input_scale of the total energy, the factor the
// coil images are multiplied by before R is formed, so that R and the power iteration stay inside
// float's range whatever the data's scale.
__device__ inline int strongest_coil(const double* __restrict__ partial, long long chunks, int coils,
                                     long long pixels, float& input_scale) {
    const int lane = threadIdx.x & 31;
    double best = -1.0, total = 0.0;
    int best_c = 0;
    for (int c = lane; c < kWalshMaxCoils; c += 32) {
        if (c >= coils) break;
        double e = 0.0;
#pragma unroll 8  // the loads go out together; the sum stays in chunk order
        for (long long k = 0; k < chunks; ++k) e += partial[c * chunks + k];
        total += e;
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
    for (int o = 16; o > 0; o >>= 1) total += __shfl_xor_sync(0xffffffffu, total, o);
    const double values = static_cast<double>(pixels) * static_cast<double>(coils);
    input_scale = 1.f;
    if (total > 0.0 && isfinite(total)) {
        const int e = static_cast<int>(llround(0.5 * log2(total / values)));
        input_scale = static_cast<float>(ldexp(1.0, -e));
    }
    return best_c;
}

// kWalshIterations power iterations (core/coils/walsh_cpu.cpp, dominant_eigenvector) for one point, by its
// kGroup threads: `row` is this thread's segment (entries half * kSeg ...) of row prow of R, v0 (in
// the half-0 thread of each row) is R[prow][j0] for the start column j0, zero when R vanishes. The
// unit vector ends in v (CP entries, shared memory). Threads with present == false shadow a point
// (keeping shuffles and barriers whole) but never write.
template <int CP>
__device__ void power_iterate(const float2 (&row)[RowLayout<CP>::kSeg], float2 v0, float2* v, float* red,
                              bool present, int barrier_count) {
    using L = RowLayout<CP>;
    constexpr int kSeg = L::kSeg, H = L::kLanesPerRow;
    const int lane = static_cast<int>(threadIdx.x) % L::kGroup, prow = lane / H, half = lane % H;
    float n2 = group_sum<CP>(half == 0 ? v0.x * v0.x + v0.y * v0.y : 0.f, red, barrier_count);
    const float inv0 = n2 > 0.f ? 1.f / sqrtf(n2) : 0.f;
    if (half == 0 && present) v[prow] = make_float2(v0.x * inv0, v0.y * inv0);
    group_sync<CP>(barrier_count);
    for (int it = 0; it < checks::kWalshIterations; ++it) {
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
        n2 = group_sum<CP>(half == 0 ? w.x * w.x + w.y * w.y : 0.f, red, barrier_count);
        group_sync<CP>(barrier_count);  // every thread has read v
        // R v == 0: the CPU stops, keeping v; keeping v here gives the same result. rsqrtf is
        // within 2 ulp of the CPU's 1 / sqrt: a scale of v, forgotten by the next step (and a
        // unit norm to 2 ulp after the last).
        if (n2 > 0.f && half == 0 && present) {
            const float inv = rsqrtf(n2);
            v[prow] = make_float2(w.x * inv, w.y * inv);
        }
        group_sync<CP>(barrier_count);
    }
}

// The power iteration for each of the npts points whose R (CP x CP, row pitch kPitch) lies at
// R + p * r_stride in shared memory, from kGroup threads per point (a row, or half a row, per thread
// in registers); the unit vectors go to vs + p * CP. Threads from npts * kGroup on (rounded up to a
// warp) idle.
template <int CP>
__device__ void power_iterations(const float2* R, int r_stride, float2* vs, float* red, int npts, int tid) {
    using L = RowLayout<CP>;
    constexpr int kPitch = L::kPitch, G = L::kGroup, kSeg = L::kSeg, H = L::kLanesPerRow;
    const int power_threads = ((npts * G + 31) / 32) * 32;  // whole warps; lanes of absent points idle along
    if (tid >= power_threads) return;
    // Lanes of absent points (a group smaller than a warp) shadow the last point: they read its R and
    // v, keeping the warp's shuffles and barriers whole, but never write.
    const int pp = min(tid / G, npts - 1), lane = tid % G, prow = lane / H, half = lane % H;
    const float2* Rp = R + pp * r_stride;
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
    power_iterate<CP>(row, v0, vs + pp * CP, red + pp * L::kRedPerPoint, tid / G < npts, npts * G);
}

// Tile k (0 .. t1 (t1 + 1) / 2 - 1) of the 4x4 tiles on and above the diagonal of a matrix of t1 x t1
// tiles, row by row: (ti, tj) with tj >= ti.
__device__ __forceinline__ void upper_tile(int k, int t1, int& ti, int& tj) {
    ti = 0;
    while (k >= t1 - ti) {
        k -= t1 - ti;
        ++ti;
    }
    tj = ti + k;
}

// A thread's 4x4 tile (ti, tj) of R's upper triangle into R (row pitch kPitch, shared memory), and
// its conjugate transpose into the lower triangle.
template <int CP>
__device__ __forceinline__ void store_tile(float2* R, const float2 (&acc)[4][4], int ti, int tj) {
    constexpr int kPitch = RowLayout<CP>::kPitch;
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const float2 v = acc[r][c];  // R_{4ti+r, 4tj+c}
            R[(4 * ti + r) * kPitch + 4 * tj + c] = v;
            if (ti != tj) R[(4 * tj + c) * kPitch + 4 * ti + r] = make_float2(v.x, -v.y);
        }
}

// The output of the grid kernels: the npts vectors in vs (CP apart; after a block barrier), phase of
// coil `ref` removed, to a.out[coil][gbase + p], coalesced along consecutive points.
template <int CP>
__device__ void write_vectors(const float2* vs, int npts, const GridArgs& a, long long gbase, int ref, int tid,
                              int threads) {
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

}  // namespace larmor::coils::cuda::walsh
