#pragma once
// BLAS-1 and pointwise loops of the CPU backend (core/backend.h gives the semantics), OpenMP over
// `threads`. Arguments are validated by the caller (backend_checks.h). Reductions accumulate in
// double, in a fixed order for a given thread count, so results repeat run to run.
#include <complex>
#include <cstddef>
#include <utility>

#include "core/array.h"

namespace larmor::cpu {

using cdouble = std::complex<double>;

template <class T>
void fill(T* x, size_t n, T v, int threads);
// y = a x, y += a x, y = x + a y (x and y may be the same array).
template <class T>
void scale(cfloat a, const T* x, T* y, size_t n, int threads);
template <class T>
void axpy(cfloat a, const T* x, T* y, size_t n, int threads);
template <class T>
void xpay(cfloat a, const T* x, T* y, size_t n, int threads);
// sum conj(x) y
cdouble dot(const cfloat* x, const cfloat* y, size_t n, int threads);
double dot(const float* x, const float* y, size_t n, int threads);
// out[i] = a[i] * op(b[i % nb]), op = conj when conj_b (complex b only).
void mul(const cfloat* a, const cfloat* b, size_t nb, cfloat* out, size_t n, bool conj_b, int threads);
void mul(const cfloat* a, const float* b, size_t nb, cfloat* out, size_t n, int threads);
void mul(const float* a, const float* b, size_t nb, float* out, size_t n, int threads);
void div(const cfloat* a, const float* b, size_t nb, cfloat* out, size_t n, int threads);
void div(const float* a, const float* b, size_t nb, float* out, size_t n, int threads);
// out[i] = sum_k conj(a[i + k n]) b[i + k n], k < groups.
void reduce_conj_mul(const cfloat* a, const cfloat* b, size_t n, size_t groups, cfloat* out, int threads);
void soft_threshold(float lambda, const cfloat* x, cfloat* out, size_t n, size_t joint, int threads);
// {||x - previous||^2, ||x||^2} in double (thread order, as dot), then previous = x.
std::pair<double, double> change_norms(const cfloat* x, cfloat* previous, size_t n, int threads);
// {||r||^2, Re <r, w>} in double, thread order (Backend::cg_coefficients).
std::pair<double, double> cg_inner_products(const cfloat* r, const cfloat* w, size_t n, int threads);
// p = r + beta p, s = w + beta s, x += alpha p, r -= alpha s (Backend::cg_update).
void cg_update(float alpha, float beta, const cfloat* w, cfloat* p, cfloat* s, cfloat* x, cfloat* r, size_t n,
               int threads);
// x[g nm + j] = (1 - m[j]) x + m[j] y where m[j] != 0, for g < n / nm.
void blend(const float* m, size_t nm, const cfloat* y, cfloat* x, size_t n, int threads);

}  // namespace larmor::cpu
