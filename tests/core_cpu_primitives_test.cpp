// CPU backend primitives (mix, crop/pad, rss, combine, Walsh maps) against plain double-precision loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "core/backend.h"
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
        cpu->mix_last_axis(x, m, y);
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
    EXPECT_THROW(cpu->mix_last_axis(x, std::vector<cfloat>(5), y), std::invalid_argument);
    EXPECT_THROW(cpu->mix_last_axis(x, std::vector<cfloat>(9), x), std::invalid_argument);
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
        cpu->rss_last_axis(x, r);
        cpu->combine_last_axis(x, maps, y);
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
    EXPECT_THROW(cpu->rss_last_axis(x, bad), std::invalid_argument);
}

TEST(CoreCpuPrimitives, CombineGivesZeroWhereMapsVanish) {
    auto cpu = make_cpu_backend();
    CArray x = test::random_array({3, 2}, 1), maps = CArray::host({3, 2}), y = CArray::host({3});
    cpu->combine_last_axis(x, maps, y);
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(y.data()[i], cfloat(0.f, 0.f));
}

// Per-pixel Walsh by the definition: direct window sum in double, converged power iteration.
std::vector<cdouble> walsh_loop(const CArray& x, int kernel) {
    const Shape& s = x.shape();
    const long long nx = static_cast<long long>(s[0]), ny = static_cast<long long>(s[1]);
    const size_t nc = s[s.rank() - 1], pixels = x.size() / nc, slices = pixels / static_cast<size_t>(nx * ny);
    const int lo = kernel / 2, hi = kernel - 1 - kernel / 2;
    std::vector<double> energy(nc, 0);
    for (size_t c = 0; c < nc; ++c)
        for (size_t p = 0; p < pixels; ++p) energy[c] += std::norm(cdouble(x.data()[c * pixels + p]));
    const size_t ref = static_cast<size_t>(std::max_element(energy.begin(), energy.end()) - energy.begin());
    std::vector<cdouble> out(x.size()), r(nc * nc), v(nc), w(nc);
    for (size_t z = 0; z < slices; ++z)
        for (long long y = 0; y < ny; ++y)
            for (long long xx = 0; xx < nx; ++xx) {
                std::fill(r.begin(), r.end(), cdouble(0));
                for (long long yy = std::max(0LL, y - lo); yy <= std::min(ny - 1, y + hi); ++yy)
                    for (long long x2 = std::max(0LL, xx - lo); x2 <= std::min(nx - 1, xx + hi); ++x2) {
                        const size_t q = z * static_cast<size_t>(nx * ny) + static_cast<size_t>(yy * nx + x2);
                        for (size_t i = 0; i < nc; ++i)
                            for (size_t j = 0; j < nc; ++j)
                                r[i * nc + j] += cdouble(x.data()[i * pixels + q]) * std::conj(cdouble(x.data()[j * pixels + q]));
                    }
                std::fill(v.begin(), v.end(), cdouble(1));
                for (int it = 0; it < 500; ++it) {
                    double n2 = 0;
                    for (size_t i = 0; i < nc; ++i) {
                        w[i] = 0;
                        for (size_t j = 0; j < nc; ++j) w[i] += r[i * nc + j] * v[j];
                        n2 += std::norm(w[i]);
                    }
                    if (n2 == 0) break;
                    for (size_t i = 0; i < nc; ++i) v[i] = w[i] / std::sqrt(n2);
                }
                const size_t p = z * static_cast<size_t>(nx * ny) + static_cast<size_t>(y * nx + xx);
                const cdouble ph = std::abs(v[ref]) > 0 ? std::conj(v[ref]) / std::abs(v[ref]) : cdouble(1);
                for (size_t c = 0; c < nc; ++c) out[c * pixels + p] = v[c] * ph;
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
        cpu->walsh_sensitivities(ph.data, kernel, maps);
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
    cpu->walsh_sensitivities(ph.data, 5, maps);
    EXPECT_LT(support_error(maps, phase_referenced(ph.data, ph.true_maps), ph.support), 2e-2);
    // Combining the coil images with the estimated maps gives back the object up to one phase.
    CArray obj = CArray::host({48, 40, 1});
    cpu->combine_last_axis(ph.data, maps, obj);
    CArray rss = CArray::host({48, 40, 1});
    cpu->rss_last_axis(ph.data, rss);
    for (size_t p = 0; p < 48 * 40; ++p)
        if (ph.support[p]) {
            ASSERT_NEAR(std::abs(obj.data()[p]), rss.data()[p].real(), 2e-2 * rss.data()[p].real()) << p;
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
