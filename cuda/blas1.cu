// BLAS-1 and pointwise kernels of the CUDA backend. All are memory-bound: one pass over their
// operands with coalesced accesses. Coefficients may come from device scalars (results of dot and
// norm2), evaluated by every thread in double, so a solver never waits for a scalar on the host.
// Reductions run in one launch, deterministic (cuda/reduction.cuh).
#include <algorithm>
#include <string>

#include "core/cg_step_sizes.h"
#include "cuda/blas1.h"
#include "cuda/cuda_check.h"
#include "cuda/launch_size.h"
#include "cuda/reduction.cuh"

namespace larmor::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float2 cmul(float2 a, float2 b) {
    return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
__device__ __forceinline__ float2 cmul(float2 a, float b) { return make_float2(a.x * b, a.y * b); }

template <class T>
__device__ __forceinline__ T scaled(float2 a, T x);
template <>
__device__ __forceinline__ float2 scaled<float2>(float2 a, float2 x) { return cmul(a, x); }
template <>
__device__ __forceinline__ float scaled<float>(float2 a, float x) { return a.x * x; }

__device__ __forceinline__ float2 add(float2 a, float2 b) { return make_float2(a.x + b.x, a.y + b.y); }
__device__ __forceinline__ float add(float a, float b) { return a + b; }

// x and y may be the same array (in place), so no __restrict__.
template <Blas1 Op, class T>
__global__ void blas1_kernel(DevCoef c, const T* x, T* y, long long n) {
    const float2 a = coefficient(c);
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        if constexpr (Op == Blas1::Scale)
            y[i] = scaled(a, x[i]);
        else if constexpr (Op == Blas1::Axpy)
            y[i] = add(y[i], scaled(a, x[i]));
        else
            y[i] = add(x[i], scaled(a, y[i]));
    }
}

template <class T>
__global__ void fill_kernel(T* x, long long n, T v) {
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long long>(gridDim.x) * blockDim.x)
        x[i] = v;
}

template <class T>
__global__ void dot_kernel(const T* __restrict__ x, const T* __restrict__ y, long long n, float2* out,
                           double2* partials, unsigned* counter) {
    double2 acc = make_double2(0.0, 0.0);
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        const double2 t = dot_term(x[i], y[i]);
        acc.x += t.x;
        acc.y += t.y;
    }
    if (!arrive_last(block_sum(acc), blockIdx.x, gridDim.x, partials, counter)) return;
    const double2 s = sum_of_partials(partials, gridDim.x);
    if (threadIdx.x == 0) *out = make_float2(float(s.x), float(s.y));
}

// dot_kernel's scheme with two sums and a store: the change of an iteration and its size in one pass.
__global__ void change_norms_kernel(const float2* __restrict__ x, float2* __restrict__ previous, long long n,
                                    float2* out, double2* partials, unsigned* counter) {
    double2 acc = make_double2(0.0, 0.0);
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        const float2 v = x[i], p = previous[i];
        const float dr = v.x - p.x, di = v.y - p.y;
        acc.x += double(dr) * dr + double(di) * di;
        acc.y += double(v.x) * v.x + double(v.y) * v.y;
        previous[i] = v;
    }
    if (!arrive_last(block_sum(acc), blockIdx.x, gridDim.x, partials, counter)) return;
    const double2 s = sum_of_partials(partials, gridDim.x);
    if (threadIdx.x == 0) {
        out[0] = make_float2(float(s.x), 0.f);
        out[1] = make_float2(float(s.y), 0.f);
    }
}

// dot_kernel's scheme with CG's two inner products; only the last block reads and writes scalars, so
// no block can see them half updated.
__global__ void cg_coefficients_kernel(const float2* __restrict__ r, const float2* __restrict__ w, long long n,
                                       float2* scalars, double2* partials, unsigned* counter) {
    double2 acc = make_double2(0.0, 0.0);
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        const float2 v = r[i], u = w[i];
        acc.x += double(v.x) * v.x + double(v.y) * v.y;
        acc.y += double(v.x) * u.x + double(v.y) * u.y;
    }
    if (!arrive_last(block_sum(acc), blockIdx.x, gridDim.x, partials, counter)) return;
    const double2 s = sum_of_partials(partials, gridDim.x);
    if (threadIdx.x == 0) {
        const CgCoefficients c = cg_step_sizes(s.x, s.y, __ldcg(&scalars[0].x), __ldcg(&scalars[1].x));
        scalars[0] = make_float2(float(s.x), 0.f);
        scalars[1] = make_float2(float(c.alpha), 0.f);
        scalars[2] = make_float2(float(c.beta), 0.f);
        scalars[3] = make_float2(float(s.y), 0.f);
    }
}

// The CPU loop's arithmetic (core/cpu/blas1.cpp) term for term.
__global__ void cg_update_kernel(const float2* __restrict__ w, const float2* __restrict__ scalars, float2* __restrict__ p,
                                 float2* __restrict__ s, float2* __restrict__ x, float2* __restrict__ r, long long n) {
    const float alpha = scalars[1].x, beta = scalars[2].x;
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        const float2 pi = add(r[i], cmul(p[i], beta)), si = add(w[i], cmul(s[i], beta)), ri = r[i], xi = x[i];
        p[i] = pi;
        s[i] = si;
        x[i] = add(xi, cmul(pi, alpha));
        r[i] = make_float2(ri.x - si.x * alpha, ri.y - si.y * alpha);
    }
}

__global__ void copy_to_host_kernel(const float2* __restrict__ x, float2* __restrict__ host, long long n) {
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long long>(gridDim.x) * blockDim.x)
        host[i] = x[i];
}

template <Pointwise Op, class A, class B>
__device__ __forceinline__ A pointwise(A a, B b);
template <>
__device__ __forceinline__ float2 pointwise<Pointwise::Mul, float2, float2>(float2 a, float2 b) { return cmul(a, b); }
template <>
__device__ __forceinline__ float2 pointwise<Pointwise::MulConj, float2, float2>(float2 a, float2 b) {
    return cmul(a, make_float2(b.x, -b.y));
}
template <>
__device__ __forceinline__ float2 pointwise<Pointwise::Mul, float2, float>(float2 a, float b) { return cmul(a, b); }
template <>
__device__ __forceinline__ float pointwise<Pointwise::Mul, float, float>(float a, float b) { return a * b; }
template <>
__device__ __forceinline__ float2 pointwise<Pointwise::Div, float2, float>(float2 a, float b) {
    return b != 0.f ? cmul(a, 1.f / b) : make_float2(0.f, 0.f);
}
template <>
__device__ __forceinline__ float pointwise<Pointwise::Div, float, float>(float a, float b) {
    return b != 0.f ? a / b : 0.f;
}

// out[g nb + j] = a[g nb + j] op b[j]: x of the grid over j, y over g, so each thread reads b[j] once.
template <Pointwise Op, class A, class B>
__global__ void pointwise_kernel(const A* a, const B* b, long long nb, A* out, long long groups) {
    for (long long j = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; j < nb;
         j += static_cast<long long>(gridDim.x) * blockDim.x) {
        const B bj = b[j];
        for (long long g = blockIdx.y; g < groups; g += gridDim.y) {
            const long long k = g * nb + j;
            out[k] = pointwise<Op, A, B>(a[k], bj);
        }
    }
}

// Threads (x, y) of a 32 x 8 block: x picks the element (coalesced), y a subset of the groups; the
// eight partial sums are added in y order through shared memory.
constexpr int kReduceX = 32, kReduceY = 8;
__global__ void reduce_conj_mul_kernel(const float2* __restrict__ a, const float2* __restrict__ b, long long n,
                                       long long groups, float2* __restrict__ out) {
    __shared__ float2 part[kReduceY][kReduceX];
    const long long i = blockIdx.x * static_cast<long long>(kReduceX) + threadIdx.x;
    float re = 0.f, im = 0.f;
    if (i < n) {
#pragma unroll 4
        for (long long g = threadIdx.y; g < groups; g += kReduceY) {
            const float2 p = a[g * n + i], q = b[g * n + i];
            re += p.x * q.x + p.y * q.y;
            im += p.x * q.y - p.y * q.x;
        }
    }
    part[threadIdx.y][threadIdx.x] = make_float2(re, im);
    __syncthreads();
    if (threadIdx.y == 0 && i < n) {
        float2 s = part[0][threadIdx.x];
        for (int y = 1; y < kReduceY; ++y) s = add(s, part[y][threadIdx.x]);
        out[i] = s;
    }
}

__global__ void soft_threshold_kernel(float lambda, const float2* x, float2* out, long long rows, long long joint) {
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < rows;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        float e = 0.f;
        for (long long g = 0; g < joint; ++g) {
            const float2 v = x[g * rows + i];
            e += v.x * v.x + v.y * v.y;
        }
        const float mag = sqrtf(e);
        const float keep = mag > lambda ? 1.f - lambda / mag : 0.f;
        for (long long g = 0; g < joint; ++g) out[g * rows + i] = cmul(x[g * rows + i], keep);
    }
}

// One thread per mask entry, looping over the groups (coils): a warp of unsampled entries reads its 32
// mask values and nothing else, and a sampled k-space line (the mask is constant along the readout)
// is read and written in whole sectors.
__global__ void blend_kernel(const float* __restrict__ m, long long nm, const float2* __restrict__ y,
                             float2* __restrict__ x, long long groups) {
    for (long long j = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; j < nm;
         j += static_cast<long long>(gridDim.x) * blockDim.x) {
        const float w = m[j];
        if (w == 0.f) continue;
        for (long long g = 0; g < groups; ++g) {
            const long long k = g * nm + j;
            const float2 a = x[k], b = y[k];
            x[k] = make_float2((1.f - w) * a.x + w * b.x, (1.f - w) * a.y + w * b.y);
        }
    }
}

std::string elements(long long n) { return std::to_string(n) + " elements"; }

template <class T>
void blas1(Blas1 op, DevCoef a, const T* x, T* y, long long n, cudaStream_t stream) {
    if (n == 0) return;
    const unsigned grid = grid_stride_blocks(n, kThreads);
    switch (op) {
        case Blas1::Scale: blas1_kernel<Blas1::Scale, T><<<grid, kThreads, 0, stream>>>(a, x, y, n); break;
        case Blas1::Axpy: blas1_kernel<Blas1::Axpy, T><<<grid, kThreads, 0, stream>>>(a, x, y, n); break;
        case Blas1::Xpay: blas1_kernel<Blas1::Xpay, T><<<grid, kThreads, 0, stream>>>(a, x, y, n); break;
    }
    LARMOR_CUDA_LAUNCH_CHECK("blas1_kernel", elements(n));
}

template <class T>
void dot(const T* x, const T* y, long long n, float2* out, ReductionScratch s, cudaStream_t stream) {
    const unsigned grid = grid_stride_blocks(n, kThreads, kReductionBlocks);
    dot_kernel<T><<<grid, kThreads, 0, stream>>>(x, y, n, out, s.partials, s.counter);
    LARMOR_CUDA_LAUNCH_CHECK("dot_kernel", elements(n));
}

template <Pointwise Op, class A, class B>
void pointwise_launch(const A* a, const B* b, long long nb, A* out, long long n, cudaStream_t stream) {
    if (n == 0) return;
    const long long groups = n / nb;
    const dim3 grid(grid_stride_blocks(nb, kThreads, 1LL << 20), static_cast<unsigned>(std::min(groups, 65535LL)));
    pointwise_kernel<Op, A, B><<<grid, kThreads, 0, stream>>>(a, b, nb, out, groups);
    LARMOR_CUDA_LAUNCH_CHECK("pointwise_kernel", elements(n) + ", b of " + std::to_string(nb));
}

}  // namespace

size_t reduction_scratch_bytes() { return kReductionBlocks * sizeof(double2) + 256; }

ReductionScratch reduction_scratch_at(void* base) {
    ReductionScratch s;
    s.partials = static_cast<double2*>(base);
    s.counter = reinterpret_cast<unsigned*>(static_cast<char*>(base) + kReductionBlocks * sizeof(double2));
    return s;
}

void launch_blas1(Blas1 op, DevCoef a, const float2* x, float2* y, long long n, cudaStream_t stream) {
    blas1(op, a, x, y, n, stream);
}
void launch_blas1(Blas1 op, DevCoef a, const float* x, float* y, long long n, cudaStream_t stream) {
    blas1(op, a, x, y, n, stream);
}

void launch_fill(float2* x, long long n, float2 v, cudaStream_t stream) {
    if (n == 0) return;
    fill_kernel<float2><<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(x, n, v);
    LARMOR_CUDA_LAUNCH_CHECK("fill_kernel", elements(n));
}
void launch_fill(float* x, long long n, float v, cudaStream_t stream) {
    if (n == 0) return;
    fill_kernel<float><<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(x, n, v);
    LARMOR_CUDA_LAUNCH_CHECK("fill_kernel", elements(n));
}

void launch_dot(const float2* x, const float2* y, long long n, float2* out, ReductionScratch s, cudaStream_t stream) {
    dot(x, y, n, out, s, stream);
}
void launch_dot(const float* x, const float* y, long long n, float2* out, ReductionScratch s, cudaStream_t stream) {
    dot(x, y, n, out, s, stream);
}

void launch_pointwise(Pointwise op, const float2* a, const float2* b, long long nb, float2* out, long long n,
                      cudaStream_t stream) {
    if (op == Pointwise::MulConj)
        pointwise_launch<Pointwise::MulConj>(a, b, nb, out, n, stream);
    else
        pointwise_launch<Pointwise::Mul>(a, b, nb, out, n, stream);
}
void launch_pointwise(Pointwise op, const float2* a, const float* b, long long nb, float2* out, long long n,
                      cudaStream_t stream) {
    if (op == Pointwise::Div)
        pointwise_launch<Pointwise::Div>(a, b, nb, out, n, stream);
    else
        pointwise_launch<Pointwise::Mul>(a, b, nb, out, n, stream);
}
void launch_pointwise(Pointwise op, const float* a, const float* b, long long nb, float* out, long long n,
                      cudaStream_t stream) {
    if (op == Pointwise::Div)
        pointwise_launch<Pointwise::Div>(a, b, nb, out, n, stream);
    else
        pointwise_launch<Pointwise::Mul>(a, b, nb, out, n, stream);
}

void launch_reduce_conj_mul(const float2* a, const float2* b, long long n, long long groups, float2* out,
                            cudaStream_t stream) {
    if (n == 0) return;
    const dim3 block(kReduceX, kReduceY);
    const unsigned grid = static_cast<unsigned>((n + kReduceX - 1) / kReduceX);
    reduce_conj_mul_kernel<<<grid, block, 0, stream>>>(a, b, n, groups, out);
    LARMOR_CUDA_LAUNCH_CHECK("reduce_conj_mul_kernel", elements(n) + " x " + std::to_string(groups) + " groups");
}

void launch_change_norms(const float2* x, float2* previous, long long n, float2* out, ReductionScratch s,
                         cudaStream_t stream) {
    const unsigned grid = grid_stride_blocks(n, kThreads, kReductionBlocks);
    change_norms_kernel<<<grid, kThreads, 0, stream>>>(x, previous, n, out, s.partials, s.counter);
    LARMOR_CUDA_LAUNCH_CHECK("change_norms_kernel", elements(n));
}

void launch_cg_coefficients(const float2* r, const float2* w, long long n, float2* scalars, ReductionScratch s,
                            cudaStream_t stream) {
    const unsigned grid = grid_stride_blocks(n, kThreads, kReductionBlocks);
    cg_coefficients_kernel<<<grid, kThreads, 0, stream>>>(r, w, n, scalars, s.partials, s.counter);
    LARMOR_CUDA_LAUNCH_CHECK("cg_coefficients_kernel", elements(n));
}

void launch_cg_update(const float2* w, const float2* scalars, float2* p, float2* s, float2* x, float2* r, long long n,
                      cudaStream_t stream) {
    if (n == 0) return;
    cg_update_kernel<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(w, scalars, p, s, x, r, n);
    LARMOR_CUDA_LAUNCH_CHECK("cg_update_kernel", elements(n));
}

void launch_copy_to_host(const float2* x, float2* host, long long n, cudaStream_t stream) {
    if (n == 0) return;
    copy_to_host_kernel<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(x, host, n);
    LARMOR_CUDA_LAUNCH_CHECK("copy_to_host_kernel", elements(n));
}

void launch_blend(const float* m, long long nm, const float2* y, float2* x, long long n, cudaStream_t stream) {
    if (n == 0) return;
    blend_kernel<<<grid_stride_blocks(nm, kThreads), kThreads, 0, stream>>>(m, nm, y, x, n / nm);
    LARMOR_CUDA_LAUNCH_CHECK("blend_kernel", std::to_string(nm) + " mask entries x " + std::to_string(n / nm));
}

void launch_soft_threshold(float lambda, const float2* x, float2* out, long long rows, long long joint,
                           cudaStream_t stream) {
    if (rows == 0) return;
    soft_threshold_kernel<<<grid_stride_blocks(rows, kThreads), kThreads, 0, stream>>>(lambda, x, out, rows, joint);
    LARMOR_CUDA_LAUNCH_CHECK("soft_threshold_kernel", std::to_string(rows) + " rows x " + std::to_string(joint));
}

}  // namespace larmor::cuda
