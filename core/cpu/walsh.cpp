// Adaptive coil sensitivities (Walsh, Gmitro & Marcellin, "Adaptive reconstruction of phased array MR
// imagery", MRM 43:682, 2000): per pixel, the dominant eigenvector of the coil correlation matrix
// R = sum_{window} v v^H, v the coil vector of a pixel in the kernel x kernel window in (x, y).
//
// R is Hermitian, so only its upper triangle is accumulated. The window sum is separable: for each
// output row we first sum the outer products down the window's rows (per column), then across the
// window's columns, 2k instead of k^2 outer products per pixel. The eigenvector comes from
// kWalshIterations power iterations started from the column of R with the largest diagonal; the CUDA
// backend follows the same recipe so the two agree to float rounding.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cpu/backend_checks.h"
#include "core/cpu/cpu_ops.h"

namespace larmor::cpu {

int strongest_coil(const cfloat* x, size_t pixels, size_t coils, int threads) {
    std::vector<double> energy(coils, 0.0);
    const long long nc = static_cast<long long>(coils);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long c = 0; c < nc; ++c) {
        double e = 0.0;
        const cfloat* xc = x + static_cast<size_t>(c) * pixels;
        for (size_t p = 0; p < pixels; ++p) e += static_cast<double>(std::norm(xc[p]));
        energy[static_cast<size_t>(c)] = e;
    }
    return static_cast<int>(std::max_element(energy.begin(), energy.end()) - energy.begin());
}

namespace {

// Dominant unit eigenvector of the Hermitian C x C matrix r (column-major, full), phase-referenced
// to coil `ref`; zeros when r vanishes.
void dominant_eigenvector(const std::vector<cfloat>& r, size_t c, int ref, std::vector<cfloat>& v,
                          std::vector<cfloat>& w) {
    size_t j0 = 0;
    for (size_t i = 1; i < c; ++i)
        if (r[i * c + i].real() > r[j0 * c + j0].real()) j0 = i;
    if (!(r[j0 * c + j0].real() > 0.f)) {
        std::fill(v.begin(), v.end(), cfloat(0.f, 0.f));
        return;
    }
    auto normalise = [&](std::vector<cfloat>& u) {
        float n2 = 0.f;
        for (size_t i = 0; i < c; ++i) n2 += u[i].real() * u[i].real() + u[i].imag() * u[i].imag();
        const float inv = 1.f / std::sqrt(n2);
        for (size_t i = 0; i < c; ++i) u[i] *= inv;
        return n2 > 0.f;
    };
    for (size_t i = 0; i < c; ++i) v[i] = r[j0 * c + i];
    normalise(v);
    for (int it = 0; it < detail::kWalshIterations; ++it) {
        for (size_t i = 0; i < c; ++i) {
            float re = 0.f, im = 0.f;
            for (size_t j = 0; j < c; ++j) {
                const cfloat a = r[j * c + i], b = v[j];
                re += a.real() * b.real() - a.imag() * b.imag();
                im += a.real() * b.imag() + a.imag() * b.real();
            }
            w[i] = cfloat(re, im);
        }
        float n2 = 0.f;
        for (size_t i = 0; i < c; ++i) n2 += w[i].real() * w[i].real() + w[i].imag() * w[i].imag();
        if (!(n2 > 0.f)) break;
        const float inv = 1.f / std::sqrt(n2);
        for (size_t i = 0; i < c; ++i) v[i] = w[i] * inv;
    }
    const cfloat vr = v[static_cast<size_t>(ref)];
    const float mag = std::abs(vr);
    if (mag > 0.f) {
        const cfloat ph = std::conj(vr) / mag;
        for (size_t i = 0; i < c; ++i) v[i] *= ph;
    }
}

}  // namespace

void walsh_sensitivities(const CArray& x, int kernel, CArray& maps, int threads) {
    const Shape& s = x.shape();
    const size_t nx = s[0], ny = s[1], nc = s[s.rank() - 1];
    const size_t pixels = nc ? x.size() / nc : 0;
    if (pixels == 0 || nc == 0) return;
    const size_t slices = pixels / (nx * ny);
    const size_t tri = nc * (nc + 1) / 2;
    const int lo = detail::walsh_lo(kernel), hi = detail::walsh_hi(kernel);
    const int ref = strongest_coil(x.data(), pixels, nc, threads);
    const cfloat* in = x.data();
    cfloat* out = maps.data();
    const long long rows = static_cast<long long>(ny * slices);

#pragma omp parallel num_threads(threads)
    {
        std::vector<cfloat> col(nx * tri), acc(tri), r(nc * nc), v(nc), w(nc), u(nc);
#pragma omp for schedule(dynamic, 1)
        for (long long row = 0; row < rows; ++row) {
            const long long y = row % static_cast<long long>(ny);
            const size_t slice_off = static_cast<size_t>(row / static_cast<long long>(ny)) * nx * ny;
            const long long y0 = std::max(0LL, y - lo), y1 = std::min(static_cast<long long>(ny) - 1, y + hi);
            std::fill(col.begin(), col.end(), cfloat(0.f, 0.f));
            for (size_t xx = 0; xx < nx; ++xx) {
                cfloat* cx = col.data() + xx * tri;
                for (long long yy = y0; yy <= y1; ++yy) {
                    const size_t p = slice_off + static_cast<size_t>(yy) * nx + xx;
                    for (size_t c = 0; c < nc; ++c) u[c] = in[c * pixels + p];
                    size_t t = 0;
                    for (size_t i = 0; i < nc; ++i)
                        for (size_t j = i; j < nc; ++j, ++t) {
                            // v_i conj(v_j)
                            cx[t] += cfloat(u[i].real() * u[j].real() + u[i].imag() * u[j].imag(),
                                            u[i].imag() * u[j].real() - u[i].real() * u[j].imag());
                        }
                }
            }
            for (long long xx = 0; xx < static_cast<long long>(nx); ++xx) {
                const long long x0 = std::max(0LL, xx - lo), x1 = std::min(static_cast<long long>(nx) - 1, xx + hi);
                std::fill(acc.begin(), acc.end(), cfloat(0.f, 0.f));
                for (long long k = x0; k <= x1; ++k) {
                    const cfloat* ck = col.data() + static_cast<size_t>(k) * tri;
                    for (size_t t = 0; t < tri; ++t) acc[t] += ck[t];
                }
                size_t t = 0;
                for (size_t i = 0; i < nc; ++i)
                    for (size_t j = i; j < nc; ++j, ++t) {
                        r[j * nc + i] = acc[t];  // R_ij, column-major
                        r[i * nc + j] = std::conj(acc[t]);
                    }
                dominant_eigenvector(r, nc, ref, v, w);
                const size_t p = slice_off + static_cast<size_t>(y) * nx + static_cast<size_t>(xx);
                for (size_t c = 0; c < nc; ++c) out[c * pixels + p] = v[c];
            }
        }
    }
}

}  // namespace larmor::cpu
