// Trajectory generators of core/trajectory: angles against their closed forms (golden and tiny golden
// angles from the papers' definitions), geometry (spokes through the centre, |k| max, integral kz,
// kooshball uniformity, spiral radius and density), the hash and Gadgetron's normalised units.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/trajectory/trajectory.h"

namespace larmor::trajectory {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kDeg = kPi / 180.0;

double angle_of(const RArray& k, size_t readout) {
    // Direction of the last sample (the positive end of a spoke), in [0, 2 pi).
    const size_t n = k.shape()[1], d = k.shape()[0];
    const float* p = k.data() + (readout * n + (n - 1)) * d;
    const double a = std::atan2(p[1], p[0]);
    return a < 0 ? a + 2 * kPi : a;
}

double angular_distance(double a, double b, double period) {
    const double d = std::fmod(std::abs(a - b), period);
    return std::min(d, period - d);
}

TEST(Trajectory, GoldenAngleSpokes) {
    RadialSpec s;
    s.spokes = 40;
    s.samples = 32;
    s.kmax = 16;
    s.order = RadialOrder::golden;
    const RArray k = radial_2d(s);
    ASSERT_EQ(k.shape(), (Shape{2, 32, 40}));
    for (int r = 0; r < s.spokes; ++r) {
        // 111.246 deg to the paper's three decimals; exact value 180 / phi.
        const double expected = std::fmod(r * 111.246, 180.0) * kDeg;
        EXPECT_NEAR(radial_angle(s, r), expected, 1e-3 * kDeg * r + 1e-12) << r;
        EXPECT_NEAR(angular_distance(angle_of(k, r), std::fmod(r * 180.0 / golden_ratio(), 180.0) * kDeg, kPi), 0.0, 1e-5)
            << r;
    }
    s.full_circle = true;
    EXPECT_NEAR(radial_angle(s, 3), std::fmod(3 * 180.0 / golden_ratio(), 360.0) * kDeg, 1e-12);
}

TEST(Trajectory, TinyGoldenAngles) {
    // psi_N = 180 / (phi + N - 1) deg (Wundrak et al. 2016): 111.246 (the golden angle), 68.754, ... 23.628.
    const double phi = (1.0 + std::sqrt(5.0)) / 2.0;
    EXPECT_NEAR(phi, golden_ratio(), 1e-15);
    for (int n = 1; n <= 10; ++n) EXPECT_NEAR(tiny_golden_angle(n) / kDeg, 180.0 / (phi + n - 1), 1e-12) << n;
    EXPECT_NEAR(tiny_golden_angle(1) / kDeg, 111.246, 1e-3);
    EXPECT_NEAR(tiny_golden_angle(2) / kDeg, 68.754, 1e-3);
    EXPECT_NEAR(tiny_golden_angle(7) / kDeg, 23.628, 1e-3);
    RadialSpec s;
    s.spokes = 10;
    s.samples = 8;
    s.kmax = 4;
    s.order = RadialOrder::tiny_golden;
    s.tiny_golden_n = 7;
    for (int r = 0; r < 10; ++r) EXPECT_NEAR(radial_angle(s, r), std::fmod(r * tiny_golden_angle(7), kPi), 1e-12);
    EXPECT_THROW(tiny_golden_angle(0), std::invalid_argument);
}

TEST(Trajectory, UniformInterleavedAndContinuation) {
    RadialSpec s;
    s.spokes = 12;
    s.samples = 16;
    s.kmax = 8;
    for (int r = 0; r < 12; ++r) EXPECT_NEAR(radial_angle(s, r), r * kPi / 12, 1e-12);
    s.full_circle = true;
    EXPECT_NEAR(radial_angle(s, 5), 5 * 2 * kPi / 12, 1e-12);
    s.full_circle = false;
    s.order = RadialOrder::interleaved;
    s.interleaves = 3;
    std::set<long> seen;
    for (int r = 0; r < 12; ++r) seen.insert(std::lround(radial_angle(s, r) / (kPi / 12)));
    EXPECT_EQ(seen.size(), 12u);  // the same set of angles as uniform
    EXPECT_NEAR(radial_angle(s, 1), 3 * kPi / 12, 1e-12);   // group 0 steps by 3
    EXPECT_NEAR(radial_angle(s, 4), 1 * kPi / 12, 1e-12);   // group 1 starts at 1
    s.interleaves = 5;
    EXPECT_THROW(radial_2d(s), std::invalid_argument);

    // A stream continues the golden sequence: spokes [7, 12) of a long run equal a run from first_readout 7.
    RadialSpec g;
    g.spokes = 12;
    g.samples = 16;
    g.kmax = 8;
    g.order = RadialOrder::golden;
    const RArray all = radial_2d(g);
    g.spokes = 5;
    g.first_readout = 7;
    const RArray tail = radial_2d(g);
    for (size_t i = 0; i < tail.size(); ++i) EXPECT_EQ(tail.data()[i], all.data()[7 * 2 * 16 + i]) << i;
}

TEST(Trajectory, SpokesThroughCentreReachKmaxAndOversample) {
    for (int os : {1, 2}) {
        RadialSpec s;
        s.spokes = 9;
        s.samples = 64;
        s.oversampling = os;
        s.kmax = 32;
        s.order = RadialOrder::golden;
        const RArray k = radial_2d(s);
        const size_t n = 64 * os;
        ASSERT_EQ(k.shape()[1], n);
        double kmax = 0.0;
        for (size_t r = 0; r < 9; ++r) {
            const float* c = k.data() + (r * n + n / 2) * 2;
            EXPECT_EQ(c[0], 0.0f);
            EXPECT_EQ(c[1], 0.0f);
            for (size_t i = 0; i < n; ++i) {
                const float* p = k.data() + (r * n + i) * 2;
                const double rad = std::hypot(p[0], p[1]);
                kmax = std::max(kmax, rad);
                EXPECT_NEAR(rad, std::abs((double(i) - n / 2.0) * 32.0 / (n / 2.0)), 1e-4);
            }
        }
        EXPECT_NEAR(kmax, 32.0, 1e-5);
    }
}

TEST(Trajectory, StackOfStarsIntegralKz) {
    RadialSpec s;
    s.spokes = 6;
    s.samples = 16;
    s.kmax = 8;
    const int parts = 5;
    for (bool rotate : {false, true}) {
        const RArray k = stack_of_stars(s, parts, rotate);
        ASSERT_EQ(k.shape(), (Shape{3, 16, 30}));
        for (int p = 0; p < parts; ++p)
            for (int r = 0; r < 6; ++r) {
                const size_t ro = static_cast<size_t>(p * 6 + r);
                for (size_t i = 0; i < 16; ++i) {
                    const float kz = k.data()[(ro * 16 + i) * 3 + 2];
                    EXPECT_EQ(kz, std::round(kz));
                    EXPECT_EQ(kz, static_cast<float>(p - parts / 2));
                }
                const double expected = r * kPi / 6 + (rotate ? p * (kPi / 6) / parts : 0.0);
                EXPECT_NEAR(angular_distance(angle_of(k, ro), expected, 2 * kPi), 0.0, 1e-5);
            }
    }
}

TEST(Trajectory, KooshballOnSphereAndRoughlyUniform) {
    const int spokes = 400;
    const RArray k = radial_3d(spokes, 32, 1, 16.0);
    ASSERT_EQ(k.shape(), (Shape{3, 32, 400}));
    std::vector<std::array<double, 3>> dirs;
    for (int r = 0; r < spokes; ++r) {
        double d[3];
        kooshball_direction(r, d);
        EXPECT_NEAR(d[0] * d[0] + d[1] * d[1] + d[2] * d[2], 1.0, 1e-12);
        EXPECT_GE(d[2], 0.0);  // a hemisphere of directions; spokes cover both halves
        const float* last = k.data() + (static_cast<size_t>(r) * 32 + 31) * 3;
        for (int a = 0; a < 3; ++a) EXPECT_NEAR(last[a], d[a] * 15.0, 1e-4);  // (31 - 16) * 16 / 16
        dirs.push_back({d[0], d[1], d[2]});
        dirs.push_back({-d[0], -d[1], -d[2]});
    }
    // Mean nearest-neighbour angle of the 2 x spokes spoke ends against a hexagonal packing of the same
    // count on the sphere (area 4 pi / M per point, spacing sqrt(2 A / sqrt 3)), and against the same
    // number of independent uniform random directions (mirrored likewise). Measured: 0.61 vs 0.47.
    auto mean_nn = [](const std::vector<std::array<double, 3>>& d) {
        double sum = 0.0;
        for (size_t i = 0; i < d.size(); ++i) {
            double best = 1e9;
            for (size_t j = 0; j < d.size(); ++j) {
                if (i == j) continue;
                const double c = d[i][0] * d[j][0] + d[i][1] * d[j][1] + d[i][2] * d[j][2];
                best = std::min(best, std::acos(std::clamp(c, -1.0, 1.0)));
            }
            sum += best;
        }
        return sum / d.size();
    };
    std::mt19937_64 rng(7);
    std::normal_distribution<double> gauss;
    std::vector<std::array<double, 3>> random;
    for (int r = 0; r < spokes; ++r) {
        std::array<double, 3> v{gauss(rng), gauss(rng), gauss(rng)};
        const double n = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
        for (double& x : v) x /= n;
        random.push_back(v);
        random.push_back({-v[0], -v[1], -v[2]});
    }
    const double ideal = std::sqrt(2.0 * (4 * kPi / dirs.size()) / std::sqrt(3.0));
    const double golden = mean_nn(dirs) / ideal, baseline = mean_nn(random) / ideal;
    RecordProperty("mean_nn_over_hexagonal", std::to_string(golden));
    RecordProperty("random_mean_nn_over_hexagonal", std::to_string(baseline));
    EXPECT_GT(golden, 0.55);
    EXPECT_LT(golden, 1.05);
    EXPECT_GT(golden, 1.2 * baseline);
}

TEST(Trajectory, SpiralReachesKmaxMonotoneWithDensity) {
    const int arms = 8, n = 600;
    const double kmax = 32.0, density = 4.0;
    const RArray k = spiral_2d(arms, n, 1, kmax, density);
    ASSERT_EQ(k.shape(), (Shape{2, 600, 8}));
    auto at = [&](int a, int j) { return k.data() + (static_cast<size_t>(a) * n + j) * 2; };
    for (int a = 0; a < arms; ++a) {
        EXPECT_EQ(std::hypot(at(a, 0)[0], at(a, 0)[1]), 0.0);
        EXPECT_NEAR(std::hypot(at(a, n - 1)[0], at(a, n - 1)[1]), kmax, 1e-4);
        for (int j = 1; j < n; ++j)
            EXPECT_GE(std::hypot(at(a, j)[0], at(a, j)[1]), std::hypot(at(a, j - 1)[0], at(a, j - 1)[1]) - 1e-5) << j;
        // Arm a is arm 0 turned by 2 pi a / arms.
        const double t = 2 * kPi * a / arms;
        const float* p0 = at(0, 300);
        EXPECT_NEAR(at(a, 300)[0], p0[0] * std::cos(t) - p0[1] * std::sin(t), 1e-3);
        EXPECT_NEAR(at(a, 300)[1], p0[0] * std::sin(t) + p0[1] * std::cos(t), 1e-3);
    }
    // Constant dwell at constant speed: equal arc steps. Chords are shorter only where the arm bends
    // sharply (the first few samples), so away from the centre they agree with the arc step to 1%.
    auto chord = [&](int j) { return std::hypot(at(0, j)[0] - at(0, j - 1)[0], at(0, j)[1] - at(0, j - 1)[1]); };
    const double step = chord(n - 1);
    for (int j = 1; j < n; ++j) {
        EXPECT_LE(chord(j), step * 1.001) << j;
        if (j >= 10) {
            EXPECT_NEAR(chord(j), step, 0.01 * step) << j;
        }
    }
    // Turn spacing dr/dtheta near the centre vs the edge: F(edge) / F(centre) of the design.
    auto dr_dtheta = [&](int j) {
        const float *p = at(0, j - 1), *q = at(0, j + 1);
        const double dth = std::atan2(p[0] * q[1] - p[1] * q[0], p[0] * q[0] + p[1] * q[1]);
        return (std::hypot(q[0], q[1]) - std::hypot(p[0], p[1])) / dth;
    };
    int jc = 1, je = n - 2;
    while (std::hypot(at(0, jc)[0], at(0, jc)[1]) < 0.1 * kmax) ++jc;
    const double rc = std::hypot(at(0, jc)[0], at(0, jc)[1]), re = std::hypot(at(0, je)[0], at(0, je)[1]);
    auto F = [&](double r) { return 1.0 + (density - 1.0) * std::pow(1.0 - r / kmax, 2); };
    EXPECT_NEAR(dr_dtheta(je) / dr_dtheta(jc), F(rc) / F(re), 0.05 * F(rc) / F(re));
    EXPECT_GT(F(rc) / F(re), 3.0);  // the centre really is denser by about the chosen factor
    // Edge: neighbouring arms one cycle/FOV apart (Nyquist) -> dr/dtheta = arms / (2 pi).
    EXPECT_NEAR(dr_dtheta(je), arms / (2 * kPi) / F(re), 0.03 * arms / (2 * kPi));
    EXPECT_THROW(spiral_2d(arms, n, 1, kmax, 0.5), std::invalid_argument);
}

TEST(Trajectory, SingleSpokesAreTheArraysReadouts) {
    // Every readout of each array generator, computed alone, bit for bit (accumulate_readouts computes a
    // stream's trajectory one readout at a time and must match data written from the arrays).
    auto expect_same = [](const float* one, const RArray& all, size_t readout, const char* what) {
        const size_t len = all.shape()[0] * all.shape()[1];
        for (size_t i = 0; i < len; ++i)
            ASSERT_EQ(one[i], all.data()[readout * len + i]) << what << " readout " << readout << " value " << i;
    };
    for (RadialOrder order :
         {RadialOrder::uniform, RadialOrder::interleaved, RadialOrder::golden, RadialOrder::tiny_golden}) {
        RadialSpec s;
        s.spokes = 12;
        s.samples = 20;
        s.oversampling = 2;
        s.kmax = 10;
        s.order = order;
        s.interleaves = 3;
        s.tiny_golden_n = 5;
        s.first_readout = order == RadialOrder::golden || order == RadialOrder::tiny_golden ? 31 : 0;
        const RArray all = radial_2d(s);
        std::vector<float> one(2 * 40);
        for (size_t r = 0; r < 12; ++r) {
            radial_spoke(s, static_cast<long>(r), one.data());
            expect_same(one.data(), all, r, "radial_2d");
        }
        if (order == RadialOrder::uniform || order == RadialOrder::interleaved) {
            // A repeated set: readout 12 + r is readout r again.
            std::vector<float> again(one.size());
            radial_spoke(s, 5, one.data());
            radial_spoke(s, 17, again.data());
            EXPECT_EQ(one, again);
        }
    }
    {
        const RArray all = radial_3d(9, 16, 2, 8.0, 40);
        std::vector<float> one(3 * 32);
        for (size_t r = 0; r < 9; ++r) {
            kooshball_spoke(40 + static_cast<long>(r), 16, 2, 8.0, one.data());
            expect_same(one.data(), all, r, "radial_3d");
        }
    }
    for (bool rotate : {false, true}) {
        RadialSpec s;
        s.spokes = 5;
        s.samples = 16;
        s.kmax = 8;
        const RArray all = stack_of_stars(s, 4, rotate);
        std::vector<float> one(3 * 16);
        for (int p = 0; p < 4; ++p)
            for (int r = 0; r < 5; ++r) {
                stack_of_stars_spoke(s, 4, rotate, p, r, one.data());
                expect_same(one.data(), all, static_cast<size_t>(p * 5 + r), "stack_of_stars");
            }
        EXPECT_THROW(stack_of_stars_spoke(s, 4, rotate, 4, 0, one.data()), std::invalid_argument);
        EXPECT_THROW(stack_of_stars_spoke(s, 4, rotate, -1, 0, one.data()), std::invalid_argument);
    }
    RadialSpec s;
    s.samples = 8;
    s.kmax = 4;
    std::vector<float> one(3 * 8);
    EXPECT_THROW(radial_spoke(s, -1, one.data()), std::invalid_argument);
    EXPECT_THROW(kooshball_spoke(-1, 8, 1, 4.0, one.data()), std::invalid_argument);
    EXPECT_THROW(kooshball_spoke(0, 1, 1, 4.0, one.data()), std::invalid_argument);
    s.kmax = 0.0;
    EXPECT_THROW(radial_spoke(s, 0, one.data()), std::invalid_argument);
}

TEST(Trajectory, HashSeesEveryBitAndTheGrid) {
    RadialSpec s;
    s.spokes = 5;
    s.samples = 16;
    s.kmax = 8;
    const RArray a = radial_2d(s), b = radial_2d(s);
    EXPECT_EQ(trajectory_hash(a, Shape{16, 16}), trajectory_hash(b, Shape{16, 16}));
    EXPECT_NE(trajectory_hash(a, Shape{16, 16}), trajectory_hash(a, Shape{16, 17}));
    RArray c = radial_2d(s);
    c.data()[37] = std::nextafter(c.data()[37], 100.0f);
    EXPECT_NE(trajectory_hash(a, Shape{16, 16}), trajectory_hash(c, Shape{16, 16}));
    EXPECT_NE(trajectory_hash(a, Shape{16, 16}), trajectory_hash(a.reshaped(Shape{2, 8, 10}), Shape{16, 16}));
}

TEST(Trajectory, NormalisedUnitsRoundTripAndValidation) {
    const RArray k = stack_of_stars([] {
        RadialSpec s;
        s.spokes = 4;
        s.samples = 32;
        s.kmax = 16;
        return s;
    }(), 8, true);
    const Shape image{32, 32, 8};
    const RArray norm = cycles_to_normalised(k, image);
    for (size_t i = 0; i < k.size(); ++i) {
        const double n = image[static_cast<int>(i % 3)];
        EXPECT_FLOAT_EQ(norm.data()[i], static_cast<float>(k.data()[i] / n));
        EXPECT_LE(std::abs(norm.data()[i]), 0.5f);
    }
    const RArray back = normalised_to_cycles(norm, image);
    for (size_t i = 0; i < k.size(); ++i) EXPECT_NEAR(back.data()[i], k.data()[i], 1e-5);

    RArray bad = RArray::host(Shape{2, 4, 3});
    bad.data()[(1 * 4 + 2) * 2 + 1] = 0.6f;  // readout 1, sample 2, axis 1, normalised
    try {
        normalised_to_cycles(bad, Shape{16, 16});
        FAIL() << "no throw";
    } catch (const std::invalid_argument& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("readout 1, sample 2, axis 1"), std::string::npos) << m;
        EXPECT_NE(m.find("9.6"), std::string::npos) << m;
    }
    bad.data()[(1 * 4 + 2) * 2 + 1] = std::nanf("");
    EXPECT_THROW(validate_trajectory(bad, Shape{16, 16}), std::invalid_argument);
    EXPECT_THROW(validate_trajectory(RArray::host(Shape{4, 4, 3}), Shape{16, 16, 16, 16}), std::invalid_argument);
    EXPECT_THROW(validate_trajectory(RArray::host(Shape{3, 4, 3}), Shape{16, 16}), std::invalid_argument);
    RArray edge = RArray::host(Shape{2, 1, 1});
    edge.data()[0] = -8.0f;
    edge.data()[1] = 8.0f;  // |k| = N/2 exactly is valid
    EXPECT_NO_THROW(validate_trajectory(edge, Shape{16, 16}));
}

}  // namespace
}  // namespace larmor::trajectory
