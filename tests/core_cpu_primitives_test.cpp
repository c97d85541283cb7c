// CPU backend primitives (mix, crop/pad, rss, combine, Walsh maps) against plain double-precision loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "core/backend.h"
#include "core/coils/coil_combination.h"
#include "gadgets/kernels/line_placement.h"
#include "tests/support/reference_dft.h"

namespace larmor {
namespace {

using test::cdouble;

std::vector<cfloat> random_matrix(size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> nd;
    std::vector<cfloat> m(n);
    for (auto& v : m) {
        const float re = nd(gen);
        v = cfloat(re, nd(gen));
    }
    return m;
}

TEST(CoreCpuPrimitives, MixLastAxisMatchesLoops) {
    auto cpu = make_cpu_backend();
    for (auto [shape, c] : {std::pair<Shape, size_t>{{16, 12, 8}, 5}, {{7, 3, 2, 4}, 4}, {{33, 6}, 9}}) {
        const size_t d = shape[shape.rank() - 1], n = shape.size() / d;
        Shape ys = shape;
        ys[ys.rank() - 1] = c;
        const CArray x = test::random_array(shape, 11);
        const auto m = random_matrix(c * d, 12);
        CArray y = CArray::host(ys);
        kernels::mix_last_axis(*cpu, x, m, y);
        std::vector<cdouble> want(n * c);
        for (size_t p = 0; p < n; ++p)
            for (size_t cc = 0; cc < c; ++cc) {
                cdouble acc = 0;
                for (size_t dd = 0; dd < d; ++dd) acc += cdouble(m[cc * d + dd]) * cdouble(x.data()[dd * n + p]);
                want[cc * n + p] = acc;
            }
        EXPECT_LT(test::relative_error(y, want), 1e-5) << shape.str() << " -> " << ys.str();
    }
}

TEST(CoreCpuPrimitives, MixRejectsMismatchedMatrix) {
    auto cpu = make_cpu_backend();
    CArray x = CArray::host({4, 3}), y = CArray::host({4, 2});
    EXPECT_THROW(kernels::mix_last_axis(*cpu, x, std::vector<cfloat>(5), y), std::invalid_argument);
    EXPECT_THROW(kernels::mix_last_axis(*cpu, x, std::vector<cfloat>(9), x), std::invalid_argument);
}

std::vector<cdouble> crop_pad_loop(const CArray& src, const Shape& ds) {
    const Shape& ss = src.shape();
    std::vector<cdouble> out(ds.size());
    for (size_t j = 0; j < ds.size(); ++j) {
        size_t rem = j, soff = 0;
        bool inside = true;
        for (int a = 0; a < ds.rank(); ++a) {
            const long long jj = static_cast<long long>(rem % ds[a]);
            rem /= ds[a];
            const long long i = jj - static_cast<long long>(ds[a] / 2) + static_cast<long long>(ss[a] / 2);
            if (i < 0 || i >= static_cast<long long>(ss[a])) inside = false;
            else soff += static_cast<size_t>(i) * ss.stride(a);
        }
        out[j] = inside ? cdouble(src.data()[soff]) : cdouble(0);
    }
    return out;
}

TEST(CoreCpuPrimitives, CropPadCentredMatchesLoops) {
    auto cpu = make_cpu_backend();
    const std::pair<Shape, Shape> cases[] = {
        {{16, 12, 3}, {8, 20, 3}},  {{15, 9}, {16, 8}}, {{8, 8}, {7, 11}},
        {{5, 6, 7, 2}, {9, 4, 7, 3}}, {{10}, {4}},       {{4, 4}, {4, 4}},
    };
    for (const auto& [ss, ds] : cases) {
        const CArray src = test::random_array(ss, 21);
        CArray dst = cpu->empty(ds);
        cpu->crop_pad_centred(src, dst);
        EXPECT_EQ(test::relative_error(dst, crop_pad_loop(src, ds)), 0.0) << ss.str() << " -> " << ds.str();
    }
    CArray a = CArray::host({4, 4});
    CArray b = a.reshaped({16});
    EXPECT_THROW(cpu->crop_pad_centred(a, b), std::invalid_argument);
}

TEST(CoreCpuPrimitives, RssAndCombineMatchLoops) {
    auto cpu = make_cpu_backend();
    for (const Shape& s : {Shape{20, 13, 6}, Shape{700, 3}, Shape{5, 4, 3, 8}}) {
        const size_t c = s[s.rank() - 1], p = s.size() / c;
        Shape rs;
        for (int a = 0; a + 1 < s.rank(); ++a) rs.push_back(s[a]);
        const CArray x = test::random_array(s, 31);
        CArray maps = test::random_array(s, 32);
        for (size_t i = 0; i < p; i += 7) maps.data()[i] = 0;  // a few pixels with one zero coil
        CArray r = CArray::host(rs), y = CArray::host(rs);
        coils::rss_last_axis(*cpu, x, r);
        coils::combine_last_axis(*cpu, x, maps, y);
        std::vector<cdouble> want_r(p), want_y(p);
        for (size_t i = 0; i < p; ++i) {
            double e = 0, n = 0;
            cdouble acc = 0;
            for (size_t cc = 0; cc < c; ++cc) {
                const cdouble xv = x.data()[cc * p + i], sv = maps.data()[cc * p + i];
                e += std::norm(xv);
                n += std::norm(sv);
                acc += std::conj(sv) * xv;
            }
            want_r[i] = std::sqrt(e);
            want_y[i] = acc / n;
        }
        EXPECT_LT(test::relative_error(r, want_r), 1e-5) << s.str();
        EXPECT_LT(test::relative_error(y, want_y), 1e-5) << s.str();
    }
    CArray x = CArray::host({4, 4, 2}), bad = CArray::host({4, 2});
    EXPECT_THROW(coils::rss_last_axis(*cpu, x, bad), std::invalid_argument);
}

TEST(CoreCpuPrimitives, CombineGivesZeroWhereMapsVanish) {
    auto cpu = make_cpu_backend();
    CArray x = test::random_array({3, 2}, 1), maps = CArray::host({3, 2}), y = CArray::host({3});
    coils::combine_last_axis(*cpu, x, maps, y);
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(y.data()[i], cfloat(0.f, 0.f));
}

// Index of the coil with the largest energy (double sums), the phase reference of the Walsh maps.
size_t strongest_coil_of(const CArray& x) {
    const size_t nc = x.shape()[x.shape().rank() - 1], pixels = x.size() / nc;
    std::vector<double> energy(nc, 0);
    for (size_t c = 0; c < nc; ++c)
        for (size_t p = 0; p < pixels; ++p) energy[c] += std::norm(cdouble(x.data()[c * pixels + p]));
    return static_cast<size_t>(std::max_element(energy.begin(), energy.end()) - energy.begin());
}

// Walsh eigenvector at pixel (px, py) of slice z by the definition: direct window sum in double,
// power iteration from all ones (not the backends' start) run to convergence, phase of coil `ref`
// removed; zeros where the window is empty.
std::vector<cdouble> walsh_exact_at(const CArray& x, size_t z, long long px, long long py, int kernel, size_t ref) {
    const Shape& s = x.shape();
    const long long nx = static_cast<long long>(s[0]), ny = static_cast<long long>(s[1]);
    const size_t nc = s[s.rank() - 1], pixels = x.size() / nc;
    const int lo = kernel / 2, hi = kernel - 1 - kernel / 2;
    std::vector<cdouble> r(nc * nc, 0.0), v(nc, 1.0), w(nc);
    for (long long yy = std::max(0LL, py - lo); yy <= std::min(ny - 1, py + hi); ++yy)
        for (long long x2 = std::max(0LL, px - lo); x2 <= std::min(nx - 1, px + hi); ++x2) {
            const size_t q = z * static_cast<size_t>(nx * ny) + static_cast<size_t>(yy * nx + x2);
            for (size_t i = 0; i < nc; ++i)
                for (size_t j = 0; j < nc; ++j)
                    r[i * nc + j] += cdouble(x.data()[i * pixels + q]) * std::conj(cdouble(x.data()[j * pixels + q]));
        }
    for (int it = 0; it < 2000; ++it) {
        double n2 = 0;
        for (size_t i = 0; i < nc; ++i) {
            w[i] = 0;
            for (size_t j = 0; j < nc; ++j) w[i] += r[i * nc + j] * v[j];
            n2 += std::norm(w[i]);
        }
        if (n2 == 0) return std::vector<cdouble>(nc, 0.0);
        double change = 0;
        for (size_t i = 0; i < nc; ++i) {
            const cdouble u = w[i] / std::sqrt(n2);
            change += std::norm(u - v[i]);
            v[i] = u;
        }
        if (it > 10 && change < 1e-28) break;
    }
    const cdouble ph = std::abs(v[ref]) > 0 ? std::conj(v[ref]) / std::abs(v[ref]) : cdouble(1);
    for (auto& e : v) e *= ph;
    return v;
}

// Per-pixel Walsh maps by the definition.
std::vector<cdouble> walsh_loop(const CArray& x, int kernel) {
    const Shape& s = x.shape();
    const size_t nx = s[0], ny = s[1], nc = s[s.rank() - 1], pixels = x.size() / nc, slices = pixels / (nx * ny);
    const size_t ref = strongest_coil_of(x);
    std::vector<cdouble> out(x.size());
    for (size_t z = 0; z < slices; ++z)
        for (size_t y = 0; y < ny; ++y)
            for (size_t xx = 0; xx < nx; ++xx) {
                const auto v = walsh_exact_at(x, z, static_cast<long long>(xx), static_cast<long long>(y), kernel, ref);
                for (size_t c = 0; c < nc; ++c) out[c * pixels + z * nx * ny + y * nx + xx] = v[c];
            }
    return out;
}

// Walsh maps on a grid of spacing `stride` by the definition: exact eigenvectors at the grid points
// min(i * stride, n - 1), bilinear interpolation in double between the four around each pixel with
// weights from the pixel coordinates, unit norm (zero stays zero).
std::vector<cdouble> walsh_grid_loop(const CArray& x, int kernel, size_t stride) {
    const Shape& s = x.shape();
    const size_t nx = s[0], ny = s[1], nc = s[s.rank() - 1], pixels = x.size() / nc, slices = pixels / (nx * ny);
    const size_t ref = strongest_coil_of(x);
    auto coords = [stride](size_t n) {
        std::vector<size_t> g;
        for (size_t i = 0;; ++i) {
            g.push_back(std::min(i * stride, n - 1));
            if (g.back() == n - 1) return g;
        }
    };
    const std::vector<size_t> gxs = coords(nx), gys = coords(ny);
    // the grid interval [g[i], g[i + 1]] holding p (i = last index when there is one point)
    auto locate = [](const std::vector<size_t>& g, size_t p, size_t& i0, size_t& i1, double& t) {
        i0 = 0;
        while (i0 + 1 < g.size() && g[i0 + 1] <= p && g[i0 + 1] != g.back()) ++i0;
        i1 = std::min(i0 + 1, g.size() - 1);
        t = g[i1] > g[i0] ? double(p - g[i0]) / double(g[i1] - g[i0]) : 0.0;
    };
    std::vector<cdouble> out(x.size());
    for (size_t z = 0; z < slices; ++z) {
        std::vector<std::vector<cdouble>> grid(gxs.size() * gys.size());
        for (size_t j = 0; j < gys.size(); ++j)
            for (size_t i = 0; i < gxs.size(); ++i)
                grid[j * gxs.size() + i] = walsh_exact_at(x, z, static_cast<long long>(gxs[i]),
                                                          static_cast<long long>(gys[j]), kernel, ref);
        for (size_t y = 0; y < ny; ++y)
            for (size_t xx = 0; xx < nx; ++xx) {
                size_t i0, i1, j0, j1;
                double tx, ty;
                locate(gxs, xx, i0, i1, tx);
                locate(gys, y, j0, j1, ty);
                std::vector<cdouble> v(nc);
                double n2 = 0;
                for (size_t c = 0; c < nc; ++c) {
                    v[c] = (1 - tx) * (1 - ty) * grid[j0 * gxs.size() + i0][c] + tx * (1 - ty) * grid[j0 * gxs.size() + i1][c] +
                           (1 - tx) * ty * grid[j1 * gxs.size() + i0][c] + tx * ty * grid[j1 * gxs.size() + i1][c];
                    n2 += std::norm(v[c]);
                }
                for (size_t c = 0; c < nc; ++c)
                    out[c * pixels + z * nx * ny + y * nx + xx] = n2 > 0 ? v[c] / std::sqrt(n2) : cdouble(0);
            }
    }
    return out;
}

// Relative error over the pixels of `support` (all coils), after aligning one global phase.
double support_error(const CArray& got, const std::vector<cdouble>& want, const std::vector<char>& support) {
    const size_t pixels = support.size(), nc = got.size() / pixels;
    cdouble dot = 0;
    for (size_t c = 0; c < nc; ++c)
        for (size_t p = 0; p < pixels; ++p)
            if (support[p]) dot += std::conj(cdouble(got.data()[c * pixels + p])) * want[c * pixels + p];
    const cdouble ph = std::abs(dot) > 0 ? dot / std::abs(dot) : cdouble(1);
    double num = 0, den = 0;
    for (size_t c = 0; c < nc; ++c)
        for (size_t p = 0; p < pixels; ++p)
            if (support[p]) {
                num += std::norm(cdouble(got.data()[c * pixels + p]) * ph - want[c * pixels + p]);
                den += std::norm(want[c * pixels + p]);
            }
    return std::sqrt(num / den);
}

TEST(CoreCpuPrimitives, WalshMatchesDirectDefinition) {
    auto cpu = make_cpu_backend();
    for (auto [nx, ny, nz, nc, kernel] :
         {std::tuple<size_t, size_t, size_t, size_t, int>{24, 20, 1, 4, 5}, {16, 18, 3, 6, 4}, {20, 20, 1, 8, 7}}) {
        const auto ph = test::smooth_coil_phantom(nx, ny, nz, nc);
        CArray maps = CArray::host(ph.data.shape());
        coils::walsh_sensitivities(*cpu, ph.data, kernel, 1, maps);
        const auto want = walsh_loop(ph.data, kernel);
        EXPECT_LT(support_error(maps, want, ph.support), 1e-4) << ph.data.shape().str() << " kernel " << kernel;
        // unit norm in the support
        const size_t pixels = nx * ny * nz;
        for (size_t p = 0; p < pixels; ++p)
            if (ph.support[p]) {
                double n2 = 0;
                for (size_t c = 0; c < nc; ++c) n2 += std::norm(cdouble(maps.data()[c * pixels + p]));
                ASSERT_NEAR(n2, 1.0, 1e-4) << "pixel " << p;
            }
    }
}

// The true maps with each pixel's phase of the strongest coil removed, as the Walsh maps are.
std::vector<cdouble> phase_referenced(const CArray& data, const CArray& maps) {
    const size_t nc = data.shape()[data.shape().rank() - 1], pixels = data.size() / nc;
    std::vector<double> energy(nc, 0);
    for (size_t c = 0; c < nc; ++c)
        for (size_t p = 0; p < pixels; ++p) energy[c] += std::norm(cdouble(data.data()[c * pixels + p]));
    const size_t ref = static_cast<size_t>(std::max_element(energy.begin(), energy.end()) - energy.begin());
    std::vector<cdouble> out = test::to_double(maps);
    for (size_t p = 0; p < pixels; ++p) {
        const cdouble r = out[ref * pixels + p];
        if (std::abs(r) == 0) continue;
        for (size_t c = 0; c < nc; ++c) out[c * pixels + p] *= std::conj(r) / std::abs(r);
    }
    return out;
}

TEST(CoreCpuPrimitives, WalshRecoversKnownSmoothSensitivities) {
    auto cpu = make_cpu_backend();
    const auto ph = test::smooth_coil_phantom(48, 40, 1, 8);
    CArray maps = CArray::host(ph.data.shape());
    coils::walsh_sensitivities(*cpu, ph.data, 5, 1, maps);
    EXPECT_LT(support_error(maps, phase_referenced(ph.data, ph.true_maps), ph.support), 2e-2);
    // Combining the coil images with the estimated maps gives back the object up to one phase.
    CArray obj = CArray::host({48, 40, 1});
    coils::combine_last_axis(*cpu, ph.data, maps, obj);
    CArray rss = CArray::host({48, 40, 1});
    coils::rss_last_axis(*cpu, ph.data, rss);
    for (size_t p = 0; p < 48 * 40; ++p)
        if (ph.support[p]) {
            ASSERT_NEAR(std::abs(obj.data()[p]), rss.data()[p].real(), 2e-2 * rss.data()[p].real()) << p;
        }
}

// Maps on a grid: exact eigenvectors at the grid points, interpolated in between, against the
// double-precision definition; strides that divide X - 1 and Y - 1 and strides that do not (a
// shorter last interval), strides above the kernel (windows with gaps between them) and above the
// image (corners only), odd coil counts, several slices, even kernels.
TEST(CoreCpuPrimitives, WalshGridMatchesDoubleReference) {
    auto cpu = make_cpu_backend();
    struct Case {
        size_t nx, ny, nz, nc;
        int kernel, stride;
    };
    for (const Case& k : {Case{21, 17, 1, 4, 5, 4}, Case{24, 20, 1, 4, 5, 4}, Case{20, 20, 1, 8, 7, 3},
                          Case{16, 18, 3, 6, 4, 4}, Case{21, 17, 2, 5, 5, 2}, Case{30, 22, 1, 3, 3, 8},
                          Case{20, 14, 1, 4, 15, 64}, Case{19, 23, 1, 1, 7, 4}, Case{2, 30, 2, 3, 5, 4},
                          Case{25, 2, 1, 4, 5, 3}}) {
        const auto ph = test::smooth_coil_phantom(k.nx, k.ny, k.nz, k.nc);
        CArray maps = CArray::host(ph.data.shape());
        coils::walsh_sensitivities(*cpu, ph.data, k.kernel, k.stride, maps);
        const auto want = walsh_grid_loop(ph.data, k.kernel, static_cast<size_t>(k.stride));
        EXPECT_LT(test::relative_error(maps, want), 1e-5)
            << ph.data.shape().str() << " kernel " << k.kernel << " stride " << k.stride;
    }
}

// At the grid points the interpolation is the identity: the maps there are the per-pixel maps (up to
// the renormalisation of an already unit vector).
TEST(CoreCpuPrimitives, WalshGridPointsAreThePerPixelMaps) {
    auto cpu = make_cpu_backend();
    const size_t nx = 23, ny = 18, nc = 6, pixels = nx * ny;
    const auto ph = test::smooth_coil_phantom(nx, ny, 1, nc);
    CArray every = CArray::host(ph.data.shape()), grid = CArray::host(ph.data.shape());
    coils::walsh_sensitivities(*cpu, ph.data, 5, 1, every);
    coils::walsh_sensitivities(*cpu, ph.data, 5, 3, grid);
    size_t checked = 0;
    for (size_t y = 0; y < ny; ++y)
        for (size_t x = 0; x < nx; ++x) {
            if ((x % 3 != 0 && x != nx - 1) || (y % 3 != 0 && y != ny - 1)) continue;
            ++checked;
            for (size_t c = 0; c < nc; ++c) {
                const size_t i = c * pixels + y * nx + x;
                ASSERT_LT(std::abs(grid.data()[i] - every.data()[i]), 1e-6f) << "x " << x << " y " << y << " coil " << c;
            }
        }
    EXPECT_EQ(checked, 9u * 7u);  // x: 0, 3, ..., 21, 22; y: 0, 3, ..., 15, 17
}

// Physics: noise-free coil images rho * s of an object rho seen through smooth sensitivities s. The
// Walsh estimate of s at any stride is s / ||s|| up to a phase, so combining with it gives back
// rho * ||s|| up to a phase: |combined| = |rho| ||s|| = the root-sum-of-squares of the coil images.
// Maps interpolated at stride 4 must give that as well as the per-pixel maps do, and the two combined
// images agree. Measured: 4.3e-4 and 8.4e-4; without the renormalisation the first is 1.6e-3,
// nearest-neighbour maps give 1.4e-3 and 1.4e-2, mirrored weights 1 and 5e-2.
TEST(CoreCpuPrimitives, WalshGridCombinationRecoversTheObject) {
    auto cpu = make_cpu_backend();
    const size_t nx = 96, ny = 80, nc = 8, pixels = nx * ny;
    const auto ph = test::smooth_coil_phantom(nx, ny, 1, nc);
    CArray m1 = CArray::host(ph.data.shape()), m4 = CArray::host(ph.data.shape());
    coils::walsh_sensitivities(*cpu, ph.data, 7, 1, m1);
    coils::walsh_sensitivities(*cpu, ph.data, 7, 4, m4);
    EXPECT_LT(support_error(m4, phase_referenced(ph.data, ph.true_maps), ph.support), 2e-2);
    CArray y1 = CArray::host({nx, ny, 1}), y4 = CArray::host({nx, ny, 1}), rss = CArray::host({nx, ny, 1});
    coils::combine_last_axis(*cpu, ph.data, m1, y1);
    coils::combine_last_axis(*cpu, ph.data, m4, y4);
    coils::rss_last_axis(*cpu, ph.data, rss);
    double num = 0, den = 0, worst = 0;
    for (size_t p = 0; p < pixels; ++p) {
        if (!ph.support[p]) continue;
        const double r = rss.data()[p].real();
        worst = std::max(worst, std::abs(std::abs(cdouble(y4.data()[p])) - r) / r);
        num += std::norm(cdouble(y4.data()[p]) - cdouble(y1.data()[p]));
        den += std::norm(cdouble(y1.data()[p]));
    }
    EXPECT_LT(worst, 1e-3) << "largest relative deviation of |combined| from |rho| ||s||";
    EXPECT_LT(std::sqrt(num / den), 3e-3) << "stride 4 against stride 1";
}

TEST(CoreCpuPrimitives, WalshRejectsInvalidStride) {
    auto cpu = make_cpu_backend();
    CArray x = test::random_array({8, 8, 1, 2}, 3), maps = CArray::host({8, 8, 1, 2});
    for (int stride : {0, -3}) {
        try {
            coils::walsh_sensitivities(*cpu, x, 5, stride, maps);
            ADD_FAILURE() << "stride " << stride << " accepted";
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find("stride " + std::to_string(stride)), std::string::npos) << e.what();
        }
    }
}

TEST(CoreCpuBackend, ArraysAndTransfers) {
    auto cpu = make_cpu_backend(1);
    EXPECT_EQ(cpu->device(), Device::Cpu);
    EXPECT_NE(cpu->describe().find("cpu"), std::string::npos);
    CArray z = cpu->zeros({3, 5});
    for (size_t i = 0; i < z.size(); ++i) EXPECT_EQ(z.data()[i], cfloat(0.f, 0.f));
    CArray h = cpu->host_staging({4});
    EXPECT_EQ(h.device(), Device::Cpu);
    EXPECT_EQ(cpu->to_device(h).data(), h.data());
    EXPECT_EQ(cpu->to_host(h).data(), h.data());
    EXPECT_THROW(make_cpu_backend(-1), std::invalid_argument);
}

}  // namespace
}  // namespace larmor
