// Adaptive coil sensitivities (Walsh, Gmitro & Marcellin, "Adaptive reconstruction of phased array MR
// imagery", MRM 43:682, 2000): per pixel, the dominant eigenvector of the coil correlation matrix
// R = sum_{window} v v^H, v the coil vector of a pixel in the kernel x kernel window in (x, y).
//
// R is Hermitian, so only its upper triangle is accumulated. The window sum is separable: for each
// output row we first sum the outer products down the window's rows (per column), then across the
// window's columns, 2k instead of k^2 outer products per pixel. The eigenvector comes from
// kWalshIterations power iterations started from the column of R with the largest diagonal; the CUDA
// backend follows the same recipe so the two agree to float rounding.
//
// The maps vary slowly (that is what the window average assumes), so computing the eigenvector at
// every pixel is wasted work: it is computed exactly on a grid of spacing `stride` (grid rows only get
// column sums) and bilinearly interpolated and renormalised in between. Stride 1 is the per-pixel
// definition, bit for bit.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/coils/coil_checks.h"
#include "core/coils/coil_kernels.h"

namespace larmor::coils::cpu {

std::vector<double> coil_energies(const cfloat* x, size_t pixels, size_t coils, int threads) {
    std::vector<double> energy(coils, 0.0);
    const long long nc = static_cast<long long>(coils);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long c = 0; c < nc; ++c) {
        double e = 0.0;
        const cfloat* xc = x + static_cast<size_t>(c) * pixels;
        for (size_t p = 0; p < pixels; ++p) e += static_cast<double>(std::norm(xc[p]));
        energy[static_cast<size_t>(c)] = e;
    }
    return energy;
}

int strongest_coil(const std::vector<double>& energy) {
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
    for (int it = 0; it < checks::kWalshIterations; ++it) {
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

void walsh_sensitivities(const CArray& x, int kernel, int stride, CArray& maps, int threads) {
    const Shape& s = x.shape();
    const size_t nx = s[0], ny = s[1], nc = s[s.rank() - 1];
    const size_t pixels = nc ? x.size() / nc : 0;
    if (pixels == 0 || nc == 0) return;
    const size_t slices = pixels / (nx * ny);
    const size_t tri = nc * (nc + 1) / 2;
    const int lo = checks::walsh_lo(kernel), hi = checks::walsh_hi(kernel);
    const std::vector<double> energy = coil_energies(x.data(), pixels, nc, threads);
    const int ref = strongest_coil(energy);
    double total = 0.0;
    for (double e : energy) total += e;
    const float scale = checks::walsh_input_scale(total, static_cast<double>(pixels * nc));
    const cfloat* in = x.data();

    // Exact eigenvectors on the grid. With stride 1 the grid is every pixel and they are the maps.
    const size_t gx = checks::walsh_grid_size(nx, stride), gy = checks::walsh_grid_size(ny, stride);
    const size_t gpoints = gx * gy * slices;
    std::vector<cfloat> grid_buf(stride == 1 ? 0 : gpoints * nc);
    cfloat* out = stride == 1 ? maps.data() : grid_buf.data();
    // Columns some grid window covers (all of them unless stride > kernel).
    std::vector<char> used(nx, 0);
    for (size_t i = 0; i < gx; ++i) {
        const long long g = static_cast<long long>(checks::walsh_grid_coord(i, stride, nx));
        for (long long k = std::max(0LL, g - lo); k <= std::min(static_cast<long long>(nx) - 1, g + hi); ++k)
            used[static_cast<size_t>(k)] = 1;
    }
    const long long rows = static_cast<long long>(gy * slices);

#pragma omp parallel num_threads(threads)
    {
        std::vector<cfloat> col(nx * tri), acc(tri), r(nc * nc), v(nc), w(nc), u(nc);
#pragma omp for schedule(dynamic, 1)
        for (long long row = 0; row < rows; ++row) {
            const size_t j = static_cast<size_t>(row % static_cast<long long>(gy));
            const size_t slice = static_cast<size_t>(row / static_cast<long long>(gy));
            const long long y = static_cast<long long>(checks::walsh_grid_coord(j, stride, ny));
            const size_t slice_off = slice * nx * ny;
            const long long y0 = std::max(0LL, y - lo), y1 = std::min(static_cast<long long>(ny) - 1, y + hi);
            std::fill(col.begin(), col.end(), cfloat(0.f, 0.f));
            for (size_t xx = 0; xx < nx; ++xx) {
                if (!used[xx]) continue;
                cfloat* cx = col.data() + xx * tri;
                for (long long yy = y0; yy <= y1; ++yy) {
                    const size_t p = slice_off + static_cast<size_t>(yy) * nx + xx;
                    for (size_t c = 0; c < nc; ++c) u[c] = in[c * pixels + p] * scale;
                    size_t t = 0;
                    for (size_t i = 0; i < nc; ++i)
                        for (size_t jj = i; jj < nc; ++jj, ++t) {
                            // v_i conj(v_j)
                            cx[t] += cfloat(u[i].real() * u[jj].real() + u[i].imag() * u[jj].imag(),
                                            u[i].imag() * u[jj].real() - u[i].real() * u[jj].imag());
                        }
                }
            }
            for (size_t i = 0; i < gx; ++i) {
                const long long xx = static_cast<long long>(checks::walsh_grid_coord(i, stride, nx));
                const long long x0 = std::max(0LL, xx - lo), x1 = std::min(static_cast<long long>(nx) - 1, xx + hi);
                std::fill(acc.begin(), acc.end(), cfloat(0.f, 0.f));
                for (long long k = x0; k <= x1; ++k) {
                    const cfloat* ck = col.data() + static_cast<size_t>(k) * tri;
                    for (size_t t = 0; t < tri; ++t) acc[t] += ck[t];
                }
                size_t t = 0;
                for (size_t a = 0; a < nc; ++a)
                    for (size_t b = a; b < nc; ++b, ++t) {
                        r[b * nc + a] = acc[t];  // R_ab, column-major
                        r[a * nc + b] = std::conj(acc[t]);
                    }
                dominant_eigenvector(r, nc, ref, v, w);
                const size_t gp = (slice * gy + j) * gx + i;
                for (size_t c = 0; c < nc; ++c) out[c * gpoints + gp] = v[c];
            }
        }
    }
    if (stride == 1) return;

    // Bilinear interpolation between the four surrounding grid points, then unit norm again (a zero
    // vector stays zero). Every grid vector has its reference-coil component real and >= 0 and the
    // weights are >= 0, so the interpolated vector has too: its reference component is the weighted
    // sum of theirs, so neighbouring vectors never cancel through a phase flip between grid points.
    auto cell = [stride](size_t p, size_t n, size_t g, size_t& i0, size_t& i1, float& t) {
        i0 = std::min(p / static_cast<size_t>(stride), g - 1);
        i1 = std::min(i0 + 1, g - 1);
        const size_t p0 = checks::walsh_grid_coord(i0, stride, n), p1 = checks::walsh_grid_coord(i1, stride, n);
        t = p1 > p0 ? static_cast<float>(p - p0) / static_cast<float>(p1 - p0) : 0.f;
    };
    const cfloat* gv = grid_buf.data();
    cfloat* m = maps.data();
    const long long img_rows = static_cast<long long>(ny * slices);
#pragma omp parallel num_threads(threads)
    {
        std::vector<cfloat> val(nx * nc);
        std::vector<float> n2(nx);
#pragma omp for schedule(static)
        for (long long row = 0; row < img_rows; ++row) {
            const size_t y = static_cast<size_t>(row % static_cast<long long>(ny));
            const size_t slice = static_cast<size_t>(row / static_cast<long long>(ny));
            size_t j0, j1;
            float ty;
            cell(y, ny, gy, j0, j1, ty);
            const size_t r0 = (slice * gy + j0) * gx, r1 = (slice * gy + j1) * gx;
            std::fill(n2.begin(), n2.end(), 0.f);
            for (size_t xx = 0; xx < nx; ++xx) {
                size_t i0, i1;
                float tx;
                cell(xx, nx, gx, i0, i1, tx);
                const float w00 = (1.f - tx) * (1.f - ty), w10 = tx * (1.f - ty), w01 = (1.f - tx) * ty, w11 = tx * ty;
                for (size_t c = 0; c < nc; ++c) {
                    const cfloat* g = gv + c * gpoints;
                    const cfloat a = g[r0 + i0], b = g[r0 + i1], d = g[r1 + i0], e = g[r1 + i1];
                    const float re = w00 * a.real() + w10 * b.real() + w01 * d.real() + w11 * e.real();
                    const float im = w00 * a.imag() + w10 * b.imag() + w01 * d.imag() + w11 * e.imag();
                    val[xx * nc + c] = cfloat(re, im);
                    n2[xx] += re * re + im * im;
                }
            }
            const size_t p0 = slice * nx * ny + y * nx;
            for (size_t xx = 0; xx < nx; ++xx) {
                const float inv = n2[xx] > 0.f ? 1.f / std::sqrt(n2[xx]) : 0.f;
                for (size_t c = 0; c < nc; ++c) m[c * pixels + p0 + xx] = val[xx * nc + c] * inv;
            }
        }
    }
}

}  // namespace larmor::coils::cpu
