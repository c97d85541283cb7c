// CPU kernels of the exact non-uniform DFT (core/linops/nudft_kernels.h), threaded with OpenMP.
//
// The phase factor of sample m at voxel (x, y, z) is separable, e_x[m][x] e_y[m][y] e_z[m][z]. For a
// chunk of samples both kernels first tabulate the three factors (a sine and cosine per sample and
// axis, then complex rotations in double, so a table of 256 entries is accurate to 1e-14), then:
//   adjoint: for each voxel row (y, z) and batch b, acc[x] += (d[m, b] e_y e_z) e_x[m][x] over the
//            chunk: four multiply-adds per sample and voxel, contiguous in x, so GCC vectorises it;
//   forward: for each sample and row, a complex dot product of the image row with conj(e_x[m]).
// Chunk sums are float (2048 samples); the adjoint adds them into a double image, the forward into a
// double per sample, so the result does not degrade with the number of samples.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/linops/nudft_kernels.h"

namespace larmor::cpu {
namespace {

constexpr size_t kChunk = 2048;
constexpr double kTwoPi = 6.283185307179586476925286766559;

using cdouble = std::complex<double>;

// exp(sign 2 pi i k c / n) for c = -extent/2 .. extent - 1 - extent/2, by rotation from the first.
void fill_axis(float k, size_t extent, size_t n, double sign, float* re, float* im) {
    const double u = static_cast<double>(k) / static_cast<double>(n);  // turns per voxel
    auto turn = [](double t) { return t - std::nearbyint(t); };
    const double c0 = -static_cast<double>(extent / 2);
    const double t0 = turn(u * c0), dt = turn(u);
    cdouble e(std::cos(kTwoPi * t0), sign * std::sin(kTwoPi * t0));
    const cdouble r(std::cos(kTwoPi * dt), sign * std::sin(kTwoPi * dt));
    // Reseed every 64 voxels: a rotation loses about 1e-16 per step in double, so this bounds the
    // drift far below float's resolution even for the 2N grid of Toeplitz's kernel.
    for (size_t x = 0; x < extent; ++x) {
        if (x % 64 == 0 && x > 0) {
            const double t = turn(u * (c0 + static_cast<double>(x)));
            e = cdouble(std::cos(kTwoPi * t), sign * std::sin(kTwoPi * t));
        }
        re[x] = static_cast<float>(e.real());
        im[x] = static_cast<float>(e.imag());
        e *= r;
    }
}

// The factor tables of samples [m0, m0 + count): axis a's entry of sample j at [j * extent_a + c].
struct Tables {
    std::vector<float> re[3], im[3];

    void reserve(const NudftGeometry& g) {
        for (int a = 0; a < 3; ++a) {
            re[a].resize(kChunk * g.extent[a]);
            im[a].resize(kChunk * g.extent[a]);
        }
    }
    // Called by every thread of a parallel region (a work-shared loop with its closing barrier).
    void fill(const RArray& coords, size_t m0, size_t count, const NudftGeometry& g, double sign) {
        const float* k = coords.data();
#pragma omp for schedule(static)
        for (long long j = 0; j < static_cast<long long>(count); ++j)
            for (int a = 0; a < 3; ++a) {
                const size_t e = g.extent[a];
                const float ka = a < g.dims ? k[(m0 + size_t(j)) * size_t(g.dims) + size_t(a)] : 0.f;
                fill_axis(ka, e, g.image[a], sign, re[a].data() + size_t(j) * e, im[a].data() + size_t(j) * e);
            }
    }
};

void check(const NudftGeometry& g, const RArray& coords, const CArray& samples, const CArray& image) {
    if (g.dims < 1 || g.dims > 3 || coords.shape().size() != size_t(g.dims) * g.points ||
        samples.size() != g.points * g.batch || image.size() != g.voxels() * g.batch)
        throw std::invalid_argument("nudft (cpu): arrays coords " + coords.shape().str() + ", samples " +
                                    samples.shape().str() + ", image " + image.shape().str() +
                                    " do not match the geometry (" + std::to_string(g.dims) + " dims, " +
                                    std::to_string(g.points) + " points, " + std::to_string(g.voxels()) +
                                    " voxels, batch " + std::to_string(g.batch) + ")");
}

}  // namespace

void nudft_adjoint(const RArray& coords, const CArray& samples, CArray& image, const NudftGeometry& g) {
    check(g, coords, samples, image);
    const size_t nx = g.extent[0], ny = g.extent[1], rows = ny * g.extent[2], nv = g.voxels(), nb = g.batch;
    std::vector<cdouble> total(nv * nb, cdouble(0.0, 0.0));
    Tables t;
    t.reserve(g);
    const cfloat* d = samples.data();
    // One parallel region for all chunks (a fork per chunk costs more than a small chunk's work).
#pragma omp parallel
    {
        std::vector<float> acc_re(nx * nb), acc_im(nx * nb);
        for (size_t m0 = 0; m0 < g.points; m0 += kChunk) {
            const size_t count = std::min(kChunk, g.points - m0);
            t.fill(coords, m0, count, g, +1.0);
#pragma omp for schedule(dynamic, 1)
            for (long long row = 0; row < static_cast<long long>(rows); ++row) {
                const size_t y = size_t(row) % ny, z = size_t(row) / ny;
                std::fill(acc_re.begin(), acc_re.end(), 0.f);
                std::fill(acc_im.begin(), acc_im.end(), 0.f);
                for (size_t j = 0; j < count; ++j) {
                    const cfloat eyz = cfloat(t.re[1][j * ny + y], t.im[1][j * ny + y]) *
                                       cfloat(t.re[2][j * g.extent[2] + z], t.im[2][j * g.extent[2] + z]);
                    const float* __restrict__ xr = t.re[0].data() + j * nx;
                    const float* __restrict__ xi = t.im[0].data() + j * nx;
                    for (size_t b = 0; b < nb; ++b) {
                        const cfloat w = d[b * g.points + m0 + j] * eyz;
                        const float br = w.real(), bi = w.imag();
                        float* __restrict__ ar = acc_re.data() + b * nx;
                        float* __restrict__ ai = acc_im.data() + b * nx;
                        for (size_t x = 0; x < nx; ++x) {
                            ar[x] += br * xr[x] - bi * xi[x];
                            ai[x] += br * xi[x] + bi * xr[x];
                        }
                    }
                }
                for (size_t b = 0; b < nb; ++b) {
                    cdouble* out = total.data() + b * nv + size_t(row) * nx;
                    for (size_t x = 0; x < nx; ++x) out[x] += cdouble(acc_re[b * nx + x], acc_im[b * nx + x]);
                }
            }
        }
    }
    cfloat* out = image.data();
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < static_cast<long long>(nv * nb); ++i)
        out[i] = cfloat(static_cast<float>(total[size_t(i)].real()), static_cast<float>(total[size_t(i)].imag()));
}

void nudft_forward(const RArray& coords, const CArray& image, CArray& samples, const NudftGeometry& g) {
    check(g, coords, samples, image);
    const size_t nx = g.extent[0], ny = g.extent[1], nz = g.extent[2], rows = ny * nz, nv = g.voxels(), nb = g.batch;
    Tables t;
    t.reserve(g);
    const cfloat* img = image.data();
    cfloat* out = samples.data();
#pragma omp parallel
    for (size_t m0 = 0; m0 < g.points; m0 += kChunk) {
        const size_t count = std::min(kChunk, g.points - m0);
        t.fill(coords, m0, count, g, -1.0);
#pragma omp for schedule(dynamic, 4)
        for (long long jj = 0; jj < static_cast<long long>(count * nb); ++jj) {
            const size_t j = size_t(jj) / nb, b = size_t(jj) % nb;
            const float* __restrict__ xr = t.re[0].data() + j * nx;
            const float* __restrict__ xi = t.im[0].data() + j * nx;
            cdouble sum(0.0, 0.0);
            for (size_t row = 0; row < rows; ++row) {
                const size_t y = row % ny, z = row / ny;
                const float* __restrict__ v = reinterpret_cast<const float*>(img + b * nv + row * nx);
                // Eight partial sums, so the reduction vectorises without reassociating float math.
                float lr[8] = {}, li[8] = {};
                size_t x = 0;
                for (; x + 8 <= nx; x += 8)
                    for (size_t l = 0; l < 8; ++l) {
                        lr[l] += v[2 * (x + l)] * xr[x + l] - v[2 * (x + l) + 1] * xi[x + l];
                        li[l] += v[2 * (x + l)] * xi[x + l] + v[2 * (x + l) + 1] * xr[x + l];
                    }
                for (; x < nx; ++x) {
                    lr[0] += v[2 * x] * xr[x] - v[2 * x + 1] * xi[x];
                    li[0] += v[2 * x] * xi[x] + v[2 * x + 1] * xr[x];
                }
                float sr = 0.f, si = 0.f;
                for (size_t l = 0; l < 8; ++l) {
                    sr += lr[l];
                    si += li[l];
                }
                const cfloat eyz = cfloat(t.re[1][j * ny + y], t.im[1][j * ny + y]) *
                                   cfloat(t.re[2][j * nz + z], t.im[2][j * nz + z]);
                const cfloat s = cfloat(sr, si) * eyz;
                sum += cdouble(s.real(), s.imag());
            }
            out[b * g.points + m0 + j] = cfloat(static_cast<float>(sum.real()), static_cast<float>(sum.imag()));
        }
    }
}

}  // namespace larmor::cpu
