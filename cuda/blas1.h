#pragma once
// Launchers of the CUDA backend's BLAS-1 and pointwise kernels (core/backend.h gives the semantics).
// All are queued on `stream` and check the launch; arguments are validated by the caller.
#include <cuda_runtime.h>

namespace larmor::cuda {

// value * num[0] / den[0] with optional device scalars (nullptr = 1); a zero denominator gives 0.
struct DevCoef {
    float2 value{1.f, 0.f};
    const float2* num = nullptr;
    const float2* den = nullptr;
};

// Scratch of the single-pass reductions: per-block partial sums and the arrival counter of the
// "last block finishes" scheme (zeroed once; the last block resets it).
struct ReductionScratch {
    double2* partials = nullptr;  // kReductionBlocks entries
    unsigned* counter = nullptr;
};
constexpr int kReductionBlocks = 1024;
size_t reduction_scratch_bytes();
ReductionScratch reduction_scratch_at(void* base);

enum class Blas1 { Scale, Axpy, Xpay };
void launch_blas1(Blas1 op, DevCoef a, const float2* x, float2* y, long long n, cudaStream_t stream);
void launch_blas1(Blas1 op, DevCoef a, const float* x, float* y, long long n, cudaStream_t stream);
void launch_fill(float2* x, long long n, float2 v, cudaStream_t stream);
void launch_fill(float* x, long long n, float v, cudaStream_t stream);

// out[0] = sum conj(x) y, in double, deterministic (fixed block order).
void launch_dot(const float2* x, const float2* y, long long n, float2* out, ReductionScratch s, cudaStream_t stream);
void launch_dot(const float* x, const float* y, long long n, float2* out, ReductionScratch s, cudaStream_t stream);

// out[g nb + j] = a[g nb + j] op b[j] for g < n / nb.
enum class Pointwise { Mul, MulConj, Div };
void launch_pointwise(Pointwise op, const float2* a, const float2* b, long long nb, float2* out, long long n,
                      cudaStream_t stream);
void launch_pointwise(Pointwise op, const float2* a, const float* b, long long nb, float2* out, long long n,
                      cudaStream_t stream);
void launch_pointwise(Pointwise op, const float* a, const float* b, long long nb, float* out, long long n,
                      cudaStream_t stream);

// out[i] = sum_g conj(a[g n + i]) b[g n + i], g < groups.
void launch_reduce_conj_mul(const float2* a, const float2* b, long long n, long long groups, float2* out,
                            cudaStream_t stream);
void launch_soft_threshold(float lambda, const float2* x, float2* out, long long rows, long long joint,
                           cudaStream_t stream);
// out[0] = ||x - previous||^2, out[1] = ||x||^2 (double accumulation, fixed block order), previous = x.
void launch_change_norms(const float2* x, float2* previous, long long n, float2* out, ReductionScratch s,
                         cudaStream_t stream);
// Backend::cg_coefficients: {||r||^2, Re <r, w>} (double accumulation, fixed block order), then the
// last block turns them and the previous gamma and alpha into scalars = {gamma, alpha, beta, delta}.
void launch_cg_coefficients(const float2* r, const float2* w, long long n, float2* scalars, ReductionScratch s,
                            cudaStream_t stream);
// Backend::cg_update: p = r + beta p, s = w + beta s, x += alpha p, r -= alpha s (alpha = scalars[1],
// beta = scalars[2]).
void launch_cg_update(const float2* w, const float2* scalars, float2* p, float2* s, float2* x, float2* r, long long n,
                      cudaStream_t stream);
// host[i] = x[i], i < n, written by the device into page-locked host memory it addresses directly
// (unified addressing): a small read (solver scalars) without the copy engine.
void launch_copy_to_host(const float2* x, float2* host, long long n, cudaStream_t stream);
// x[g nm + j] = (1 - m[j]) x + m[j] y where m[j] != 0, g < n / nm.
void launch_blend(const float* m, long long nm, const float2* y, float2* x, long long n, cudaStream_t stream);

}  // namespace larmor::cuda
