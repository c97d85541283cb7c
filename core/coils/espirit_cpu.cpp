// ESPIRiT's per-pixel step on the CPU (core/coils/espirit_kernels.h). Threads take columns x: each
// evaluates H[x, dy] once (D^2 C^2 multiply-adds) and reuses it for the whole column, so a pixel costs
// D C^2 for G plus C^2 per power iteration. Complex arithmetic is written out on split real and
// imaginary arrays: std::complex<float>'s operator* calls the NaN-safe __mulsc3 and blocks
// vectorisation.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/coils/espirit_kernels.h"

namespace larmor::coils::cpu {
namespace {

void check_host(const CArray& a, size_t n, const char* name) {
    if (a.device() != Device::Cpu || a.size() != n)
        throw std::invalid_argument(std::string("espirit_eigenvectors: ") + name + " " + a.shape().str() +
                                    " should be a host array of " + std::to_string(n) + " elements");
}

// The dominant eigenvector of the Hermitian matrix (gr, gi) (column-major C x C) by power iteration,
// into (vr, vi); returns the Rayleigh quotient, or -1 when an iterate vanished (G v = 0: no eigenvector
// of a positive eigenvalue to find). (wr, wi): scratch of C.
float dominant(const float* gr, const float* gi, size_t c, int iterations, float* vr, float* vi, float* wr,
               float* wi) {
    size_t j = 0;
    for (size_t r = 1; r < c; ++r)
        if (gr[r + c * r] > gr[j + c * j]) j = r;
    for (size_t r = 0; r < c; ++r) vr[r] = gr[r + c * j], vi[r] = gi[r + c * j];
    auto multiply = [&] {  // w = G v
        for (size_t r = 0; r < c; ++r) wr[r] = wi[r] = 0.f;
        for (size_t q = 0; q < c; ++q) {
            const float a = vr[q], b = vi[q];
            const float* cr = gr + c * q;
            const float* ci = gi + c * q;
#pragma omp simd
            for (size_t r = 0; r < c; ++r) {
                wr[r] += cr[r] * a - ci[r] * b;
                wi[r] += cr[r] * b + ci[r] * a;
            }
        }
    };
    auto normalise = [&](const float* xr, const float* xi) {
        double n2 = 0;
        for (size_t r = 0; r < c; ++r) n2 += double(xr[r]) * xr[r] + double(xi[r]) * xi[r];
        if (!(n2 > 0)) return false;
        const float s = float(1.0 / std::sqrt(n2));
        for (size_t r = 0; r < c; ++r) vr[r] = xr[r] * s, vi[r] = xi[r] * s;
        return true;
    };
    if (!normalise(vr, vi)) return -1.f;
    for (int it = 0; it < iterations; ++it) {
        multiply();
        if (!normalise(wr, wi)) return -1.f;
    }
    multiply();
    double lambda = 0;  // v^H G v, real for Hermitian G
    for (size_t r = 0; r < c; ++r) lambda += double(vr[r]) * wr[r] + double(vi[r]) * wi[r];
    return float(lambda);
}

}  // namespace

void espirit_eigenvectors(const CArray& k, const CArray& ex, const CArray& ey, const CArray& principal, CArray& maps,
                          RArray& eigenvalues, const EspiritPixelProblem& p) {
    const size_t c = p.coils, cc = c * c, d = p.offsets, n1 = p.n1, n2 = p.n2;
    check_host(k, cc * d * d, "k");
    check_host(ex, d * n1, "ex");
    check_host(ey, d * n2, "ey");
    check_host(principal, c, "principal");
    const size_t sets = size_t(p.sets);
    if (sets < 1 || sets > 2) throw std::invalid_argument("espirit_eigenvectors: " + std::to_string(p.sets) + " sets");
    check_host(maps, n1 * n2 * c * sets, "maps");
    if (eigenvalues.device() != Device::Cpu || eigenvalues.size() != n1 * n2 * sets)
        throw std::invalid_argument("espirit_eigenvectors: eigenvalues " + eigenvalues.shape().str() +
                                    " should be a host array of " + std::to_string(n1 * n2 * sets) + " elements");
    // Split copies of K and the tables: the inner loops then run over contiguous floats.
    std::vector<float> kr(k.size()), ki(k.size());
    for (size_t i = 0; i < k.size(); ++i) kr[i] = k.data()[i].real(), ki[i] = k.data()[i].imag();
    const cfloat* u = principal.data();
    cfloat* out = maps.data();
    float* lam = eigenvalues.data();
#pragma omp parallel
    {
        std::vector<float> hr(d * cc), hi(d * cc), gr(cc), gi(cc), v(4 * c);
        float *vr = v.data(), *vi = vr + c, *wr = vi + c, *wi = wr + c;
#pragma omp for schedule(dynamic)
        for (size_t x = 0; x < n1; ++x) {
            std::fill(hr.begin(), hr.end(), 0.f);
            std::fill(hi.begin(), hi.end(), 0.f);
            for (size_t dy = 0; dy < d; ++dy)
                for (size_t dx = 0; dx < d; ++dx) {
                    const cfloat e = ex.data()[dx + d * x];
                    const float er = e.real(), ei = e.imag();
                    const float* sr = kr.data() + cc * (dx + d * dy);
                    const float* si = ki.data() + cc * (dx + d * dy);
                    float* tr = hr.data() + cc * dy;
                    float* ti = hi.data() + cc * dy;
#pragma omp simd
                    for (size_t i = 0; i < cc; ++i) {
                        tr[i] += sr[i] * er - si[i] * ei;
                        ti[i] += sr[i] * ei + si[i] * er;
                    }
                }
            for (size_t y = 0; y < n2; ++y) {
                std::fill(gr.begin(), gr.end(), 0.f);
                std::fill(gi.begin(), gi.end(), 0.f);
                for (size_t dy = 0; dy < d; ++dy) {
                    const cfloat e = ey.data()[dy + d * y];
                    const float er = e.real(), ei = e.imag();
                    const float* sr = hr.data() + cc * dy;
                    const float* si = hi.data() + cc * dy;
#pragma omp simd
                    for (size_t i = 0; i < cc; ++i) {
                        gr[i] += sr[i] * er - si[i] * ei;
                        gi[i] += sr[i] * ei + si[i] * er;
                    }
                }
                const size_t pixel = x + n1 * y;
                bool alive = true;
                for (size_t set = 0; set < sets; ++set) {
                    const float found = alive ? dominant(gr.data(), gi.data(), c, p.iterations, vr, vi, wr, wi) : -1.f;
                    alive = found > -0.5f;  // G is positive semidefinite: the Rayleigh quotient is >= 0 up to rounding
                    const float lambda = alive ? std::max(found, 0.f) : 0.f;
                    lam[pixel + n1 * n2 * set] = lambda;
                    // Phase: z = u^H v made real and positive.
                    float zr = 0.f, zi = 0.f;
                    for (size_t q = 0; q < c; ++q) {
                        zr += u[q].real() * vr[q] + u[q].imag() * vi[q];
                        zi += u[q].real() * vi[q] - u[q].imag() * vr[q];
                    }
                    const float zn = std::hypot(zr, zi);
                    const bool keep = alive && lambda >= p.crop;
                    // conj(z) / |z|; 1 where v is orthogonal to u; 0 outside the support.
                    const float pr = !keep ? 0.f : zn > 0.f ? zr / zn : 1.f, pi = keep && zn > 0.f ? -zi / zn : 0.f;
                    for (size_t q = 0; q < c; ++q)
                        out[pixel + n1 * n2 * (q + c * set)] = cfloat(vr[q] * pr - vi[q] * pi, vr[q] * pi + vi[q] * pr);
                    if (set + 1 == sets || !alive) continue;  // a vanished iterate leaves the next set zero too
                    // Deflation: G - lambda v v^H, whose dominant eigenvector is G's second.
                    for (size_t q = 0; q < c; ++q)
                        for (size_t r = 0; r < c; ++r) {
                            // (v v^H)_{r q} = v_r conj(v_q)
                            gr[r + c * q] -= lambda * (vr[r] * vr[q] + vi[r] * vi[q]);
                            gi[r + c * q] -= lambda * (vi[r] * vr[q] - vr[r] * vi[q]);
                        }
                }
            }
        }
    }
}

}  // namespace larmor::coils::cpu
