// Adaptive coil sensitivities on the GPU (Walsh, Gmitro & Marcellin, MRM 43:682, 2000), same recipe
// as core/cpu/walsh.cpp so the two agree to float rounding: per pixel, R = sum over the window of
// v v^H, kWalshIterations power iterations from R's column with the largest diagonal, unit norm, and
// the phase of the strongest coil (largest energy over the whole image) removed.
//
// One 128-thread block per pixel: R (C x C, C <= 64, rows padded to C + 1 so the row-wise
// matrix-vector product is free of bank conflicts) lives in shared memory; the window's coil vectors
// are staged through shared memory in chunks so each value is read from global memory once.
#include <algorithm>

#include "core/cpu/backend_checks.h"
#include "cuda/cuda_check.h"
#include "cuda/kernels.h"

namespace larmor::cuda {
namespace {

constexpr int kWalshThreads = 128;

int chunk_points(int coils) { return std::max(1, 1024 / coils); }

size_t walsh_shared_bytes(int coils) {
    return (static_cast<size_t>(coils) * (coils + 1) + 2 * static_cast<size_t>(coils) +
            static_cast<size_t>(chunk_points(coils)) * coils) *
               sizeof(float2) +
           32 * sizeof(float);
}

__global__ void coil_energy_kernel(const float2* __restrict__ x, long long pixels, double* energy) {
    __shared__ double part[256];
    const float2* xc = x + blockIdx.x * pixels;
    double acc = 0.0;
    for (long long p = threadIdx.x; p < pixels; p += blockDim.x)
        acc += static_cast<double>(xc[p].x) * xc[p].x + static_cast<double>(xc[p].y) * xc[p].y;
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) energy[blockIdx.x] = part[0];
}

__global__ void strongest_coil_kernel(const double* energy, int coils, int* ref) {
    int best = 0;
    for (int c = 1; c < coils; ++c)
        if (energy[c] > energy[best]) best = c;
    *ref = best;
}

__device__ float block_sum(float v, float* red) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();  // red may still be read from the previous sum
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = 0.f;
    for (int k = 0; k < kWalshThreads / 32; ++k) t += red[k];
    return t;
}

__global__ void __launch_bounds__(kWalshThreads) walsh_kernel(const float2* __restrict__ x, long long nx, long long ny,
                                                               long long pixels, int nc, int lo, int hi, int chunk,
                                                               const int* __restrict__ ref_coil,
                                                               float2* __restrict__ maps) {
    extern __shared__ float2 sm[];
    const int ld = nc + 1;
    float2* r = sm;
    float2* v = r + nc * ld;
    float2* w = v + nc;
    float2* buf = w + nc;
    float* red = reinterpret_cast<float*>(buf + chunk * nc);
    __shared__ int j0s;
    const int tid = threadIdx.x;
    const int ref = *ref_coil;

    for (long long p = blockIdx.x; p < pixels; p += gridDim.x) {
        const long long xx = p % nx, y = (p / nx) % ny, base = p - xx - y * nx;
        const long long x0 = max(0LL, xx - lo), x1 = min(nx - 1, xx + hi);
        const long long y0 = max(0LL, y - lo), y1 = min(ny - 1, y + hi);
        const int wx = static_cast<int>(x1 - x0 + 1), npts = wx * static_cast<int>(y1 - y0 + 1);

        for (int t = tid; t < nc * nc; t += kWalshThreads) r[(t / nc) * ld + t % nc] = make_float2(0.f, 0.f);
        for (int q0 = 0; q0 < npts; q0 += chunk) {
            const int nq = min(chunk, npts - q0);
            __syncthreads();  // previous chunk consumed
            for (int e = tid; e < nq * nc; e += kWalshThreads) {
                const int c = e / nq, q = q0 + e % nq;  // consecutive threads: consecutive x of one coil
                const long long pix = base + (y0 + q / wx) * nx + x0 + q % wx;
                buf[(e % nq) * nc + c] = x[c * pixels + pix];
            }
            __syncthreads();
            for (int t = tid; t < nc * nc; t += kWalshThreads) {
                const int i = t / nc, j = t % nc;
                float2 acc = r[i * ld + j];
                for (int q = 0; q < nq; ++q) {
                    const float2 a = buf[q * nc + i], b = buf[q * nc + j];  // a conj(b)
                    acc.x += a.x * b.x + a.y * b.y;
                    acc.y += a.y * b.x - a.x * b.y;
                }
                r[i * ld + j] = acc;
            }
        }
        __syncthreads();
        if (tid == 0) {
            int j0 = 0;
            for (int i = 1; i < nc; ++i)
                if (r[i * ld + i].x > r[j0 * ld + j0].x) j0 = i;
            j0s = j0;
        }
        __syncthreads();
        const int j0 = j0s;
        if (!(r[j0 * ld + j0].x > 0.f)) {
            if (tid < nc) maps[tid * pixels + p] = make_float2(0.f, 0.f);
            __syncthreads();
            continue;
        }
        if (tid < nc) v[tid] = r[tid * ld + j0];
        float n2 = block_sum(tid < nc ? v[tid].x * v[tid].x + v[tid].y * v[tid].y : 0.f, red);
        if (tid < nc) {
            const float inv = 1.f / sqrtf(n2);
            v[tid] = make_float2(v[tid].x * inv, v[tid].y * inv);
        }
        __syncthreads();
        for (int it = 0; it < detail::kWalshIterations; ++it) {
            float2 s = make_float2(0.f, 0.f);
            if (tid < nc) {
                const float2* row = r + tid * ld;
                for (int j = 0; j < nc; ++j) {
                    const float2 a = row[j], b = v[j];
                    s.x += a.x * b.x - a.y * b.y;
                    s.y += a.x * b.y + a.y * b.x;
                }
                w[tid] = s;
            }
            n2 = block_sum(s.x * s.x + s.y * s.y, red);
            if (!(n2 > 0.f)) break;
            if (tid < nc) {
                const float inv = 1.f / sqrtf(n2);
                v[tid] = make_float2(s.x * inv, s.y * inv);
            }
            __syncthreads();
        }
        __syncthreads();
        if (tid < nc) {
            const float2 vr = v[ref];
            const float mag = sqrtf(vr.x * vr.x + vr.y * vr.y);
            float2 out = v[tid];
            if (mag > 0.f) {  // v * conj(vr) / |vr|
                const float cr = vr.x / mag, ci = -vr.y / mag;
                out = make_float2(out.x * cr - out.y * ci, out.x * ci + out.y * cr);
            }
            maps[tid * pixels + p] = out;
        }
        __syncthreads();
    }
}

}  // namespace

size_t walsh_scratch_bytes(int coils) { return static_cast<size_t>(coils) * sizeof(double) + 16; }

void launch_walsh(const float2* x, long long nx, long long ny, long long slices, int coils, int kernel, void* scratch,
                  float2* maps, cudaStream_t stream) {
    const long long pixels = nx * ny * slices;
    if (pixels == 0 || coils == 0) return;
    const std::string ctx = "[" + std::to_string(nx) + "x" + std::to_string(ny) + "x" + std::to_string(slices) + "x" +
                            std::to_string(coils) + "] kernel " + std::to_string(kernel);
    auto* energy = static_cast<double*>(scratch);
    auto* ref = reinterpret_cast<int*>(energy + coils);
    coil_energy_kernel<<<coils, 256, 0, stream>>>(x, pixels, energy);
    LARMOR_CUDA_LAUNCH_CHECK("coil_energy_kernel", ctx);
    strongest_coil_kernel<<<1, 1, 0, stream>>>(energy, coils, ref);
    LARMOR_CUDA_LAUNCH_CHECK("strongest_coil_kernel", ctx);
    const unsigned grid = static_cast<unsigned>(std::min(pixels, 1LL << 20));
    walsh_kernel<<<grid, kWalshThreads, walsh_shared_bytes(coils), stream>>>(
        x, nx, ny, pixels, coils, detail::walsh_lo(kernel), detail::walsh_hi(kernel), chunk_points(coils), ref, maps);
    LARMOR_CUDA_LAUNCH_CHECK("walsh_kernel", ctx);
}

}  // namespace larmor::cuda
