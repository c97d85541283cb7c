#include "core/cpu/blas1.h"

#include <omp.h>

#include <cmath>
#include <vector>

namespace larmor::cpu {
namespace {

using ll = long long;

// Complex products written out: std::complex's operator* checks for NaN/Inf (C99 Annex G) through a
// library call per element, which keeps the loops from vectorising.
inline cfloat cmul(cfloat a, cfloat b) {
    return {a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real()};
}
inline cfloat cmul(cfloat a, float b) { return {a.real() * b, a.imag() * b}; }
inline float cmul(float a, float b) { return a * b; }

template <class T>
T as(cfloat a);
template <>
cfloat as<cfloat>(cfloat a) { return a; }
template <>
float as<float>(cfloat a) { return a.real(); }

// Per-thread partial sums in double, added in thread order: the same result every run.
template <class Acc, class F>
Acc ordered_sum(size_t n, int threads, F term) {
    std::vector<Acc> part(static_cast<size_t>(threads), Acc(0));
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        const size_t lo = n * static_cast<size_t>(t) / static_cast<size_t>(nt);
        const size_t hi = n * static_cast<size_t>(t + 1) / static_cast<size_t>(nt);
        Acc acc(0);
        for (size_t i = lo; i < hi; ++i) acc += term(i);
        part[static_cast<size_t>(t)] = acc;
    }
    Acc s(0);
    for (const Acc& p : part) s += p;
    return s;
}

}  // namespace

template <class T>
void fill(T* x, size_t n, T v, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (ll i = 0; i < ll(n); ++i) x[i] = v;
}

template <class T>
void scale(cfloat a, const T* x, T* y, size_t n, int threads) {
    const T s = as<T>(a);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (ll i = 0; i < ll(n); ++i) y[i] = cmul(s, x[i]);
}

template <class T>
void axpy(cfloat a, const T* x, T* y, size_t n, int threads) {
    const T s = as<T>(a);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (ll i = 0; i < ll(n); ++i) y[i] += cmul(s, x[i]);
}

template <class T>
void xpay(cfloat a, const T* x, T* y, size_t n, int threads) {
    const T s = as<T>(a);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (ll i = 0; i < ll(n); ++i) y[i] = x[i] + cmul(s, y[i]);
}

template void fill<cfloat>(cfloat*, size_t, cfloat, int);
template void fill<float>(float*, size_t, float, int);
template void scale<cfloat>(cfloat, const cfloat*, cfloat*, size_t, int);
template void scale<float>(cfloat, const float*, float*, size_t, int);
template void axpy<cfloat>(cfloat, const cfloat*, cfloat*, size_t, int);
template void axpy<float>(cfloat, const float*, float*, size_t, int);
template void xpay<cfloat>(cfloat, const cfloat*, cfloat*, size_t, int);
template void xpay<float>(cfloat, const float*, float*, size_t, int);

cdouble dot(const cfloat* x, const cfloat* y, size_t n, int threads) {
    return ordered_sum<cdouble>(n, threads, [&](size_t i) {
        const double xr = x[i].real(), xi = x[i].imag(), yr = y[i].real(), yi = y[i].imag();
        return cdouble(xr * yr + xi * yi, xr * yi - xi * yr);
    });
}

double dot(const float* x, const float* y, size_t n, int threads) {
    return ordered_sum<double>(n, threads, [&](size_t i) { return double(x[i]) * double(y[i]); });
}

std::pair<double, double> change_norms(const cfloat* x, cfloat* previous, size_t n, int threads) {
    const cdouble s = ordered_sum<cdouble>(n, threads, [&](size_t i) {
        const cfloat v = x[i], d = v - previous[i];
        previous[i] = v;
        return cdouble(double(d.real()) * d.real() + double(d.imag()) * d.imag(),
                       double(v.real()) * v.real() + double(v.imag()) * v.imag());
    });
    return {s.real(), s.imag()};
}

std::pair<double, double> cg_inner_products(const cfloat* r, const cfloat* w, size_t n, int threads) {
    const cdouble s = ordered_sum<cdouble>(n, threads, [&](size_t i) {
        const double rr = r[i].real(), ri = r[i].imag();
        return cdouble(rr * rr + ri * ri, rr * w[i].real() + ri * w[i].imag());
    });
    return {s.real(), s.imag()};
}

void cg_update(float alpha, float beta, const cfloat* w, cfloat* p, cfloat* s, cfloat* x, cfloat* r, size_t n,
               int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (ll i = 0; i < ll(n); ++i) {
        const cfloat pi = r[i] + cmul(p[i], beta), si = w[i] + cmul(s[i], beta);
        p[i] = pi;
        s[i] = si;
        x[i] += cmul(pi, alpha);
        r[i] -= cmul(si, alpha);
    }
}

namespace {

// out[g nb + i] = f(a[g nb + i], b[i]): b broadcast over the trailing axes of a.
template <class A, class B, class F>
void broadcast(const A* a, const B* b, size_t nb, A* out, size_t n, int threads, F f) {
    const size_t groups = n / nb;
#pragma omp parallel for num_threads(threads) schedule(static) collapse(2)
    for (ll g = 0; g < ll(groups); ++g)
        for (ll i = 0; i < ll(nb); ++i) {
            const size_t k = size_t(g) * nb + size_t(i);
            out[k] = f(a[k], b[i]);
        }
}

}  // namespace

void mul(const cfloat* a, const cfloat* b, size_t nb, cfloat* out, size_t n, bool conj_b, int threads) {
    if (conj_b)
        broadcast(a, b, nb, out, n, threads, [](cfloat x, cfloat w) { return cmul(x, std::conj(w)); });
    else
        broadcast(a, b, nb, out, n, threads, [](cfloat x, cfloat w) { return cmul(x, w); });
}

void mul(const cfloat* a, const float* b, size_t nb, cfloat* out, size_t n, int threads) {
    broadcast(a, b, nb, out, n, threads, [](cfloat x, float w) { return cmul(x, w); });
}

void mul(const float* a, const float* b, size_t nb, float* out, size_t n, int threads) {
    broadcast(a, b, nb, out, n, threads, [](float x, float w) { return x * w; });
}

void div(const cfloat* a, const float* b, size_t nb, cfloat* out, size_t n, int threads) {
    broadcast(a, b, nb, out, n, threads,
              [](cfloat x, float w) { return w != 0.f ? cmul(x, 1.f / w) : cfloat(0.f, 0.f); });
}

void div(const float* a, const float* b, size_t nb, float* out, size_t n, int threads) {
    broadcast(a, b, nb, out, n, threads, [](float x, float w) { return w != 0.f ? x / w : 0.f; });
}

void reduce_conj_mul(const cfloat* a, const cfloat* b, size_t n, size_t groups, cfloat* out, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (ll i = 0; i < ll(n); ++i) {
        // Float accumulation over the coils, as the GPU does: a few dozen terms.
        float re = 0.f, im = 0.f;
        for (size_t g = 0; g < groups; ++g) {
            const cfloat p = a[g * n + size_t(i)], q = b[g * n + size_t(i)];
            re += p.real() * q.real() + p.imag() * q.imag();
            im += p.real() * q.imag() - p.imag() * q.real();
        }
        out[i] = cfloat(re, im);
    }
}

void soft_threshold(float lambda, const cfloat* x, cfloat* out, size_t n, size_t joint, int threads) {
    const size_t rows = n / joint;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (ll i = 0; i < ll(rows); ++i) {
        float e = 0.f;
        for (size_t g = 0; g < joint; ++g) e += std::norm(x[g * rows + size_t(i)]);
        const float mag = std::sqrt(e);
        const float keep = mag > lambda ? 1.f - lambda / mag : 0.f;
        for (size_t g = 0; g < joint; ++g) out[g * rows + size_t(i)] = cmul(x[g * rows + size_t(i)], keep);
    }
}

void blend(const float* m, size_t nm, const cfloat* y, cfloat* x, size_t n, int threads) {
    const size_t groups = n / nm;
    // Over the mask's entries, each visiting its own position in every group: an unsampled entry costs
    // one read of m, nothing of x or y.
#pragma omp parallel for num_threads(threads) schedule(static)
    for (ll j = 0; j < ll(nm); ++j) {
        const float w = m[j];
        if (w == 0.f) continue;
        for (size_t g = 0; g < groups; ++g) {
            const size_t k = g * nm + size_t(j);
            x[k] = cmul(x[k], 1.f - w) + cmul(y[k], w);
        }
    }
}

}  // namespace larmor::cpu
