// CUDA kernels of the exact non-uniform DFT (core/linops/nudft_kernels.h).
//
// Adjoint (F^H d, Stone et al. 2008): the work is N voxels x M samples of one complex multiply-add.
// Stone et al. gave each thread one voxel and paid a sine and cosine per pair, so the special-function
// units bound them (two SFU operations per pair: 0.285 s for 128^3 x 284,592 on an H100). Here the
// phase is separable, exp(i 2 pi k.x) = e_x e_y e_z, and a block's 128 threads take 128 different
// voxel rows (y, z) over the same V voxels in x. For each sample in the shared-memory tile a thread
// then computes one sine/cosine (its row's e_y e_z, times the datum) and V complex multiply-adds with
// the tile's e_x table, which every thread of the warp reads at the same address (a broadcast): four
// FP32 multiply-adds per pair plus 1/V of a sincos, so the FP32 pipe, not the SFU, sets the pace.
// Partial sums are float over a tile of 128 samples and double across tiles. When voxels alone give too
// few blocks (2D images), the samples are split over blocks too and a second kernel sums the parts in a
// fixed order (the result does not depend on scheduling).
//
// Phases are in turns, k (n - N/2) / N, with k / N held as a double-float pair (hi + lo) so every
// phase is reduced to [-1/2, 1/2) exactly before the sine: the error does not grow with the distance
// from the centre (nudft_kernels.h).
//
// Forward (F x): one thread per sample and batch; voxel rows pass through shared memory, and e_x is
// advanced by a complex rotation, reseeded every 32 voxels.
#include <algorithm>
#include <string>

#include "core/linops/nudft_kernels.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/device_context.h"
#include "cuda/launch_size.h"

namespace larmor::cuda {
namespace {

// The adjoint's launch shapes (NudftAdjointLaunch): threads per block x voxels per thread. The tuning
// run times every one with fast sines; accurate sines are compiled for the default only.
constexpr int kTunedRows[] = {64, 128, 256};
constexpr int kTunedV[] = {4, 8, 16};
constexpr int kFwdThreads = 128;
constexpr int kFwdTile = 256; // voxels of a row per forward tile
constexpr int kReseed = 32;

struct Geo {
    int dims;
    long long extent[3];
    float offset[3];  // extent / 2
    long long points, batch;
};

Geo geo_of(const NudftGeometry& g) {
    Geo o{};
    o.dims = g.dims;
    for (int a = 0; a < 3; ++a) {
        o.extent[a] = static_cast<long long>(g.extent[a]);
        o.offset[a] = static_cast<float>(g.extent[a] / 2);
    }
    o.points = static_cast<long long>(g.points);
    o.batch = static_cast<long long>(g.batch);
    return o;
}

// u[a * m_total + i] = k_a of point i / N_a as hi + lo (float each; coords are [dims, M], axis 0
// fastest); axes beyond dims get 0.
__global__ void split_kernel(const float* __restrict__ k, float2* __restrict__ u, long long m, int dims, double inv0,
                             double inv1, double inv2) {
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < m;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        const double inv[3] = {inv0, inv1, inv2};
        for (int a = 0; a < 3; ++a) {
            const double v = a < dims ? static_cast<double>(k[i * dims + a]) * inv[a] : 0.0;
            const float hi = static_cast<float>(v);
            u[a * m + i] = make_float2(hi, static_cast<float>(v - static_cast<double>(hi)));
        }
    }
}

// (hi + lo) c in turns, reduced to about [-1/2, 1/2]: hi c is split into its rounded value p and
// exact error (fma), and p's whole turns are dropped exactly.
__device__ __forceinline__ float turns(float2 u, float c) {
    const float p = u.x * c;
    const float e = fmaf(u.x, c, -p);
    return (p - rintf(p)) + fmaf(u.y, c, e);
}

template <bool Accurate>
__device__ __forceinline__ float2 unit(float t, float sign) {
    t -= rintf(t);
    float s, c;
    if (Accurate)
        sincospif(2.f * t, &s, &c);
    else
        __sincosf(6.2831853071795865f * t, &s, &c);
    return make_float2(c, sign * s);
}

template <bool Accurate, int kRows, int kV>
__global__ void __launch_bounds__(kRows) adjoint_kernel(const float2* __restrict__ u, const float2* __restrict__ d,
                                                        float2* __restrict__ out, Geo g, long long per_split,
                                                        int splits, long long out_stride) {
    __shared__ float4 s_uyz[kRows];  // (hi_y, lo_y, hi_z, lo_z)
    __shared__ float2 s_d[kRows];
    __shared__ float2 s_ex[kRows][kV];

    const long long nx = g.extent[0], ny = g.extent[1], rows = ny * g.extent[2];
    const long long x0 = static_cast<long long>(blockIdx.x) * kV;
    const long long row = static_cast<long long>(blockIdx.y) * kRows + threadIdx.x;
    const int split = static_cast<int>(blockIdx.z % splits);
    const long long b = blockIdx.z / splits;
    const long long m_begin = split * per_split, m_end = min(g.points, m_begin + per_split);
    const float cy = static_cast<float>(row % ny) - g.offset[1];
    const float cz = static_cast<float>(row / ny) - g.offset[2];

    double tot_re[kV], tot_im[kV];
#pragma unroll
    for (int j = 0; j < kV; ++j) tot_re[j] = tot_im[j] = 0.0;

    const float2* db = d + b * g.points;
    for (long long m0 = m_begin; m0 < m_end; m0 += kRows) {
        const long long m = m0 + threadIdx.x;
        if (m < m_end) {
            const float2 ux = u[m], uy = u[g.points + m], uz = u[2 * g.points + m];
            s_uyz[threadIdx.x] = make_float4(uy.x, uy.y, uz.x, uz.y);
            s_d[threadIdx.x] = db[m];
            // e_x over the block's V voxels: seeded accurately at x0, then rotated (at most V - 1 steps).
            const float2 r = unit<true>(turns(ux, 1.f), 1.f);
            float2 e = unit<true>(turns(ux, static_cast<float>(x0) - g.offset[0]), 1.f);
#pragma unroll
            for (int j = 0; j < kV; ++j) {
                s_ex[threadIdx.x][j] = e;
                e = make_float2(e.x * r.x - e.y * r.y, e.x * r.y + e.y * r.x);
            }
        } else {
            s_uyz[threadIdx.x] = make_float4(0.f, 0.f, 0.f, 0.f);
            s_d[threadIdx.x] = make_float2(0.f, 0.f);
#pragma unroll
            for (int j = 0; j < kV; ++j) s_ex[threadIdx.x][j] = make_float2(0.f, 0.f);
        }
        __syncthreads();
        float acc_re[kV], acc_im[kV];
#pragma unroll
        for (int j = 0; j < kV; ++j) acc_re[j] = acc_im[j] = 0.f;
        const int count = static_cast<int>(min(static_cast<long long>(kRows), m_end - m0));
        for (int i = 0; i < count; ++i) {
            const float4 q = s_uyz[i];
            const float2 e = unit<Accurate>(turns(make_float2(q.x, q.y), cy) + turns(make_float2(q.z, q.w), cz), 1.f);
            const float2 dv = s_d[i];
            const float wr = dv.x * e.x - dv.y * e.y, wi = dv.x * e.y + dv.y * e.x;
#pragma unroll
            for (int j = 0; j < kV; ++j) {
                const float2 ex = s_ex[i][j];
                acc_re[j] = fmaf(wr, ex.x, fmaf(-wi, ex.y, acc_re[j]));
                acc_im[j] = fmaf(wr, ex.y, fmaf(wi, ex.x, acc_im[j]));
            }
        }
#pragma unroll
        for (int j = 0; j < kV; ++j) {
            tot_re[j] += acc_re[j];
            tot_im[j] += acc_im[j];
        }
        __syncthreads();
    }
    if (row >= rows) return;
    float2* o = out + static_cast<long long>(split) * out_stride + b * nx * rows + row * nx;
#pragma unroll
    for (int j = 0; j < kV; ++j)
        if (x0 + j < nx) o[x0 + j] = make_float2(static_cast<float>(tot_re[j]), static_cast<float>(tot_im[j]));
}

// out[i] = sum_s parts[s][i], in a fixed order.
__global__ void sum_splits_kernel(const float2* __restrict__ parts, float2* __restrict__ out, long long n, int splits) {
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        double re = 0.0, im = 0.0;
        for (int s = 0; s < splits; ++s) {
            const float2 v = parts[s * n + i];
            re += v.x;
            im += v.y;
        }
        out[i] = make_float2(static_cast<float>(re), static_cast<float>(im));
    }
}

template <bool Accurate>
__global__ void __launch_bounds__(kFwdThreads) forward_kernel(const float2* __restrict__ u, const float2* __restrict__ x,
                                                              float2* __restrict__ y, Geo g) {
    __shared__ float2 s_x[kFwdTile];
    const long long m = static_cast<long long>(blockIdx.x) * kFwdThreads + threadIdx.x;
    const long long b = blockIdx.y;
    const long long nx = g.extent[0], ny = g.extent[1], rows = ny * g.extent[2];
    const bool live = m < g.points;
    const long long mm = live ? m : 0;
    const float2 ux = u[mm], uy = u[g.points + mm], uz = u[2 * g.points + mm];
    const float2 r = unit<true>(turns(ux, 1.f), -1.f);
    const float2* xb = x + b * nx * rows;
    double tot_re = 0.0, tot_im = 0.0;
    for (long long row = 0; row < rows; ++row) {
        const float cy = static_cast<float>(row % ny) - g.offset[1], cz = static_cast<float>(row / ny) - g.offset[2];
        float sr = 0.f, si = 0.f;
        for (long long t0 = 0; t0 < nx; t0 += kFwdTile) {
            const int count = static_cast<int>(min(static_cast<long long>(kFwdTile), nx - t0));
            __syncthreads();
            for (int i = threadIdx.x; i < count; i += kFwdThreads) s_x[i] = xb[row * nx + t0 + i];
            __syncthreads();
            float2 e = make_float2(1.f, 0.f);
            for (int i = 0; i < count; ++i) {
                if (i % kReseed == 0) e = unit<Accurate>(turns(ux, static_cast<float>(t0 + i) - g.offset[0]), -1.f);
                const float2 v = s_x[i];
                sr = fmaf(v.x, e.x, fmaf(-v.y, e.y, sr));
                si = fmaf(v.x, e.y, fmaf(v.y, e.x, si));
                e = make_float2(e.x * r.x - e.y * r.y, e.x * r.y + e.y * r.x);
            }
        }
        const float2 eyz = unit<Accurate>(turns(uy, cy) + turns(uz, cz), -1.f);
        tot_re += sr * eyz.x - si * eyz.y;
        tot_im += sr * eyz.y + si * eyz.x;
    }
    if (live) y[b * g.points + m] = make_float2(static_cast<float>(tot_re), static_cast<float>(tot_im));
}

void check(const NudftGeometry& g, const RArray& coords, const CArray& samples, const CArray& image, const char* what) {
    if (g.dims < 1 || g.dims > 3 || coords.size() != size_t(g.dims) * g.points || samples.size() != g.points * g.batch ||
        image.size() != g.voxels() * g.batch)
        throw std::invalid_argument(std::string(what) + ": arrays coords " + coords.shape().str() + ", samples " +
                                    samples.shape().str() + ", image " + image.shape().str() +
                                    " do not match the geometry");
    if (coords.device() != Device::Cuda || samples.device() != Device::Cuda || image.device() != Device::Cuda)
        throw std::invalid_argument(std::string(what) + ": every array must be on the device");
}

// k / N as double-float pairs, planar per axis, in a scratch array of the backend.
CArray split_coords(Backend& be, const RArray& coords, const NudftGeometry& g) {
    CArray u = be.empty({g.points, 3});  // planar: axis a's points at a * M
    const long long m = static_cast<long long>(g.points);
    split_kernel<<<grid_stride_blocks(m, 256), 256, 0, backend_stream(be)>>>(
        coords.data(), reinterpret_cast<float2*>(u.data()), m, g.dims, 1.0 / static_cast<double>(g.image[0]),
        1.0 / static_cast<double>(g.image[1]), 1.0 / static_cast<double>(g.image[2]));
    LARMOR_CUDA_LAUNCH_CHECK("nudft split_kernel", std::to_string(g.points) + " points");
    return u;
}

std::string describe(const NudftGeometry& g) {
    return std::to_string(g.extent[0]) + "x" + std::to_string(g.extent[1]) + "x" + std::to_string(g.extent[2]) +
           " voxels, " + std::to_string(g.points) + " points, batch " + std::to_string(g.batch);
}

}  // namespace

namespace {

using AdjointKernel = void (*)(const float2*, const float2*, float2*, Geo, long long, int, long long);

template <int R, int V>
AdjointKernel fast_kernel_if(int rows, int v, AdjointKernel found) {
    return found ? found : (rows == R && v == V ? adjoint_kernel<false, R, V> : nullptr);
}

template <int R>
AdjointKernel fast_kernel_rows(int rows, int v, AdjointKernel found) {
    found = fast_kernel_if<R, kTunedV[0]>(rows, v, found);
    found = fast_kernel_if<R, kTunedV[1]>(rows, v, found);
    return fast_kernel_if<R, kTunedV[2]>(rows, v, found);
}

AdjointKernel adjoint_kernel_for(bool accurate, NudftAdjointLaunch l) {
    constexpr NudftAdjointLaunch kDefault{};
    if (accurate) {
        if (l.rows != kDefault.rows || l.voxels != kDefault.voxels)
            throw std::invalid_argument("nudft_adjoint: accurate sines are compiled for the default launch " +
                                        std::to_string(kDefault.rows) + " x " + std::to_string(kDefault.voxels) + " only");
        return adjoint_kernel<true, kDefault.rows, kDefault.voxels>;
    }
    AdjointKernel k = fast_kernel_rows<kTunedRows[0]>(l.rows, l.voxels, nullptr);
    k = fast_kernel_rows<kTunedRows[1]>(l.rows, l.voxels, k);
    k = fast_kernel_rows<kTunedRows[2]>(l.rows, l.voxels, k);
    if (!k)
        throw std::invalid_argument("nudft_adjoint: no kernel compiled for " + std::to_string(l.rows) + " threads x " +
                                    std::to_string(l.voxels) + " voxels");
    return k;
}

}  // namespace

std::vector<NudftAdjointLaunch> nudft_adjoint_launches() {
    std::vector<NudftAdjointLaunch> out;
    for (int r : kTunedRows)
        for (int v : kTunedV) out.push_back({r, v});
    return out;
}

void nudft_adjoint(Backend& be, const RArray& coords, const CArray& samples, CArray& image, const NudftGeometry& g,
                   NudftAdjointLaunch launch) {
    check(g, coords, samples, image, "nudft_adjoint");
    const AdjointKernel kernel = adjoint_kernel_for(g.accurate, launch);
    const long long kRows = launch.rows, kV = launch.voxels;
    DeviceGuard guard(backend_device(be));
    const CArray u = split_coords(be, coords, g);
    const long long nx = static_cast<long long>(g.extent[0]), rows = static_cast<long long>(g.extent[1] * g.extent[2]);
    const long long xblocks = (nx + kV - 1) / kV, rblocks = (rows + kRows - 1) / kRows;
    const long long base = xblocks * rblocks * static_cast<long long>(g.batch);
    // Split the samples until there are about 1024 blocks (8 per SM on an H100), keeping at least
    // 8 tiles per block so the tiles' set-up stays small beside their sums.
    const long long kTargetBlocks = 1024, kMinPerSplit = 8 * kRows;
    const long long m = static_cast<long long>(g.points);
    long long splits = std::max(1LL, std::min((kTargetBlocks + base - 1) / base, (m + kMinPerSplit - 1) / kMinPerSplit));
    splits = std::min(splits, 65535LL / static_cast<long long>(g.batch));
    splits = std::max(1LL, splits);
    const long long per_split = (m + splits - 1) / splits;
    const long long n = static_cast<long long>(g.voxels() * g.batch);
    CArray parts;
    float2* target = reinterpret_cast<float2*>(image.data());
    if (splits > 1) {
        parts = be.empty({static_cast<size_t>(n), static_cast<size_t>(splits)});
        target = reinterpret_cast<float2*>(parts.data());
    }
    const dim3 grid(static_cast<unsigned>(xblocks), static_cast<unsigned>(rblocks),
                    static_cast<unsigned>(splits * static_cast<long long>(g.batch)));
    if (rblocks > 65535) throw std::invalid_argument("nudft_adjoint: too many voxel rows for one launch: " + describe(g));
    kernel<<<grid, static_cast<unsigned>(kRows), 0, backend_stream(be)>>>(reinterpret_cast<const float2*>(u.data()),
                                                   reinterpret_cast<const float2*>(samples.data()), target, geo_of(g),
                                                   per_split, static_cast<int>(splits), n);
    LARMOR_CUDA_LAUNCH_CHECK("nudft adjoint_kernel", describe(g));
    if (splits > 1) {
        sum_splits_kernel<<<grid_stride_blocks(n, 256), 256, 0, backend_stream(be)>>>(
            reinterpret_cast<const float2*>(parts.data()), reinterpret_cast<float2*>(image.data()), n,
            static_cast<int>(splits));
        LARMOR_CUDA_LAUNCH_CHECK("nudft sum_splits_kernel", describe(g));
    }
}

void nudft_forward(Backend& be, const RArray& coords, const CArray& image, CArray& samples, const NudftGeometry& g) {
    check(g, coords, samples, image, "nudft_forward");
    DeviceGuard guard(backend_device(be));
    const CArray u = split_coords(be, coords, g);
    const long long m = static_cast<long long>(g.points);
    if (g.batch > 65535) throw std::invalid_argument("nudft_forward: batch too large: " + describe(g));
    const dim3 grid(static_cast<unsigned>((m + kFwdThreads - 1) / kFwdThreads), static_cast<unsigned>(g.batch));
    auto kernel = g.accurate ? forward_kernel<true> : forward_kernel<false>;
    kernel<<<grid, kFwdThreads, 0, backend_stream(be)>>>(reinterpret_cast<const float2*>(u.data()),
                                                         reinterpret_cast<const float2*>(image.data()),
                                                         reinterpret_cast<float2*>(samples.data()), geo_of(g));
    LARMOR_CUDA_LAUNCH_CHECK("nudft forward_kernel", describe(g));
}

}  // namespace larmor::cuda
