// Density compensation weights of core/trajectory: quadrature sums against the area / volume of the
// sampled region, the ramp shape and DC weight, Voronoi cells against a lattice (exact areas), their
// total against the disk and Hoge's formula, and the process-wide cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/trajectory/density.h"
#include "core/trajectory/trajectory.h"

namespace larmor::trajectory {
namespace {

constexpr double kPi = 3.14159265358979323846;

double sum(const RArray& w) {
    double s = 0.0;
    for (size_t i = 0; i < w.size(); ++i) s += w.data()[i];
    return s;
}

RadialSpec radial(int spokes, int samples, int os, double kmax) {
    RadialSpec s;
    s.spokes = spokes;
    s.samples = samples;
    s.oversampling = os;
    s.kmax = kmax;
    return s;
}

TEST(Density, Radial2DRampSumsToTheDisk) {
    for (int os : {1, 2}) {
        const RArray k = radial_2d(radial(101, 128, os, 32.0));
        const RArray w = density_radial_2d(k);
        ASSERT_EQ(w.shape(), (Shape{128u * os, 101}));
        const double area = kPi * 32.0 * 32.0, rel = sum(w) / area - 1.0;
        RecordProperty("os" + std::to_string(os) + "_relative_error", std::to_string(rel));
        EXPECT_LT(std::abs(rel), 0.01) << rel;
        const double dk = 64.0 / (128.0 * os);
        const size_t n = 128u * os;
        // Centre: pi (dk/2)^2 / spokes; elsewhere proportional to |k| with factor pi dk / spokes.
        EXPECT_NEAR(w.data()[n / 2], kPi * dk * dk / 4.0 / 101, 1e-9);
        for (size_t r = 0; r < 101; r += 17)
            for (size_t s = 0; s < n; ++s) {
                if (s == n / 2) continue;
                const float* p = k.data() + (r * n + s) * 2;
                EXPECT_NEAR(w.data()[r * n + s] / std::hypot(p[0], p[1]), kPi * dk / 101, 1e-6);
            }
    }
}

TEST(Density, StackOfStarsAndRadial3D) {
    RadialSpec s = radial(31, 64, 1, 32.0);
    s.order = RadialOrder::golden;
    const int parts = 6;
    const RArray k = stack_of_stars(s, parts, true);
    const RArray w = density_stack_of_stars(k, parts);
    EXPECT_NEAR(sum(w) / (kPi * 32.0 * 32.0 * parts), 1.0, 0.01);
    EXPECT_THROW(density_stack_of_stars(k, 7), std::invalid_argument);

    const RArray k3 = radial_3d(500, 64, 1, 32.0);
    const RArray w3 = density_radial_3d(k3);
    const double ball = 4.0 / 3.0 * kPi * std::pow(32.0, 3);
    RecordProperty("radial3d_relative_error", std::to_string(sum(w3) / ball - 1.0));
    EXPECT_NEAR(sum(w3) / ball, 1.0, 0.02);
    const double dk = 1.0;
    EXPECT_NEAR(w3.data()[32], kPi * dk * dk * dk / 6.0 / 500, 1e-9);
    for (size_t i : {size_t(3), size_t(40), size_t(64 * 7 + 10)}) {
        const float* p = k3.data() + i * 3;
        const double r2 = double(p[0]) * p[0] + double(p[1]) * p[1] + double(p[2]) * p[2];
        EXPECT_NEAR(w3.data()[i] / r2, 2.0 * kPi * dk / 500, 1e-7);
    }
}

TEST(Density, VoronoiOfALatticeIsExact) {
    // A Cartesian lattice with spacing 0.5, jittered by nothing: every cell that stays inside the disk is a
    // 0.5 x 0.5 square, and the cells together cover the disk exactly.
    const double kmax = 8.0;
    std::vector<float> pts;
    for (int y = -16; y <= 16; ++y)
        for (int x = -16; x <= 16; ++x)
            if (std::hypot(x * 0.5, y * 0.5) <= kmax) {
                pts.push_back(x * 0.5f);
                pts.push_back(y * 0.5f);
            }
    const size_t m = pts.size() / 2;
    RArray k = RArray::host(Shape{2, m, 1});
    std::copy(pts.begin(), pts.end(), k.data());
    const RArray w = density_voronoi(k, kmax);
    EXPECT_NEAR(sum(w) / (kPi * kmax * kmax), 1.0, 1e-6);
    int interior = 0;
    for (size_t i = 0; i < m; ++i)
        if (std::hypot(pts[2 * i], pts[2 * i + 1]) + 0.5 < kmax) {
            EXPECT_NEAR(w.data()[i], 0.25, 1e-6) << i;
            ++interior;
        }
    EXPECT_GT(interior, 500);
    // Duplicates share a cell: the same lattice given twice halves every weight.
    RArray k2 = RArray::host(Shape{2, m, 2});
    std::copy(pts.begin(), pts.end(), k2.data());
    std::copy(pts.begin(), pts.end(), k2.data() + pts.size());
    const RArray w2 = density_voronoi(k2, kmax);
    for (size_t i = 0; i < m; ++i) {
        EXPECT_NEAR(w2.data()[i], w.data()[i] / 2, 1e-6);
        EXPECT_EQ(w2.data()[i], w2.data()[m + i]);
    }
}

TEST(Density, SpiralVoronoiCoversTheDiskAndMatchesHoge) {
    const double kmax = 32.0;
    const RArray k = spiral_2d(16, 512, 1, kmax, 2.0);
    const RArray wv = density_voronoi(k, kmax);
    const RArray wh = density_hoge(k);
    const double disk = kPi * kmax * kmax;
    const double rel_sum = sum(wv) / disk - 1.0;
    RecordProperty("voronoi_sum_relative_error", std::to_string(rel_sum));
    EXPECT_LT(std::abs(rel_sum), 1e-6);
    EXPECT_NEAR(sum(wh) / disk, 1.0, 0.03);
    // Away from the edge (|k| < 0.85 kmax) and the crowded centre (|k| > 0.15 kmax).
    std::vector<double> rel;
    for (size_t i = 0; i < wv.size(); ++i) {
        const double r = std::hypot(k.data()[2 * i], k.data()[2 * i + 1]);
        if (r > 0.15 * kmax && r < 0.85 * kmax) rel.push_back(std::abs(wv.data()[i] / wh.data()[i] - 1.0));
    }
    ASSERT_GT(rel.size(), 4000u);
    std::sort(rel.begin(), rel.end());
    const double median = rel[rel.size() / 2], p90 = rel[rel.size() * 9 / 10];
    RecordProperty("voronoi_vs_hoge_median", std::to_string(median));
    RecordProperty("voronoi_vs_hoge_p90", std::to_string(p90));
    std::printf("voronoi sum rel %.3g, hoge sum rel %.3g, |voronoi/hoge - 1| median %.4f p90 %.4f max %.4f\n", rel_sum,
                sum(wh) / disk - 1.0, median, p90, rel.back());
    // Measured: median 0.07%, 90th percentile 0.26%, max 0.83%.
    EXPECT_LT(median, 0.01);
    EXPECT_LT(p90, 0.02);
    EXPECT_LT(rel.back(), 0.05);
}

// density_of dispatches to the closed forms by kind (the server's cache of them is tested with the
// gadgets, tests/noncartesian_chain_test.cpp).
TEST(Density, DensityOfGivesEachKindsWeights) {
    const RArray k = radial_2d(radial(21, 32, 1, 16.0));
    const Shape image{32, 32};
    auto same = [](const RArray& a, const RArray& b) {
        ASSERT_EQ(a.size(), b.size());
        for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a.data()[i], b.data()[i]) << i;
    };
    same(density_of(DensityKind::radial_2d, k, image), density_radial_2d(k));
    same(density_of(DensityKind::voronoi, k, image), density_voronoi(k, 16.0));
    EXPECT_THROW(density_of(DensityKind::voronoi, k, Shape{}), std::invalid_argument);
}

}  // namespace
}  // namespace larmor::trajectory
