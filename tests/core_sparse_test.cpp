// The sparse-reconstruction building blocks: the Daubechies-4 wavelet (core/linops/wavelet.h) against a
// dense double-precision matrix written from the filter definition, its orthogonality and vanishing
// moments; the low-band-sparing joint threshold (core/iter/wavelet_threshold.h); the power method,
// FISTA and POCS (core/iter) on problems with known solutions; CPU = CUDA for every kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>
#include <tuple>
#include <vector>

#include "core/iter/fista.h"
#include "core/iter/pocs.h"
#include "core/iter/power_method.h"
#include "core/iter/prox.h"
#include "core/iter/wavelet_threshold.h"
#include "core/linops/algebra.h"
#include "core/linops/diag.h"
#include "core/linops/spirit.h"
#include "core/linops/wavelet.h"
#include "tests/support/backends.h"
#include "tests/support/operator_checks.h"

namespace larmor {
namespace {

using test::cdouble;
using test::DenseMatrix;

// Daubechies' four taps, from their closed form in double.
std::vector<double> d4_low() {
    const double r3 = std::sqrt(3.0), d = 4.0 * std::sqrt(2.0);
    return {(1 + r3) / d, (3 + r3) / d, (3 - r3) / d, (1 - r3) / d};
}

// One level along `axis` of the block of `shape` as a dense matrix on the whole array: inside the
// block each line of length m maps to [low; high] with low_j = sum_k h_k v_{2j+k mod m} and
// high_j = sum_k (-1)^k h_{3-k} v_{2j+k mod m}; everything else is the identity.
DenseMatrix level_matrix(const Shape& shape, const Shape& block, int axis) {
    const std::vector<double> h = d4_low();
    const size_t n = shape.size(), m = block[axis], s = shape.stride(axis);
    DenseMatrix a(n, n);
    for (size_t i = 0; i < n; ++i) {
        bool inside = true;
        size_t rest = i;
        for (int b = 0; b < shape.rank(); ++b) {
            inside = inside && rest % shape[b] < block[b];
            rest /= shape[b];
        }
        if (!inside) {
            a.at(i, i) = 1.0;
            continue;
        }
        const size_t pos = (i / s) % shape[axis], line = i - pos * s;
        const size_t j = pos % (m / 2);
        const bool high = pos >= m / 2;
        for (size_t k = 0; k < 4; ++k) {
            const double tap = high ? ((k % 2) ? -h[3 - k] : h[3 - k]) : h[k];
            a.at(i, line + ((2 * j + k) % m) * s) += tap;
        }
    }
    return a;
}

DenseMatrix dense_wavelet(const WaveletGeometry& g) {
    DenseMatrix w = DenseMatrix::identity(g.shape.size());
    for (int l = 0; l < g.levels(); ++l)
        for (int a = 0; a < g.shape.rank(); ++a)
            if (g.level_axes[size_t(l)] & (1u << a)) w = level_matrix(g.shape, g.blocks[size_t(l)], a) * w;
    return w;
}

TEST(WaveletGeometry, LevelsFollowEachAxisAndTheLowBandIsWhatRemains) {
    const WaveletGeometry g = wavelet_geometry({256, 64, 1, 8}, 0b011u);
    // x: 256 -> 4 in 6 levels, then 4 -> 2 in a seventh; y: 64 -> 2 in five.
    ASSERT_EQ(g.levels(), 7);
    EXPECT_EQ(g.level_axes[4], 0b011u);
    EXPECT_EQ(g.level_axes[5], 0b001u);
    EXPECT_EQ(g.coarse, Shape({2, 2, 1, 8}));
    EXPECT_EQ(wavelet_geometry({48, 40}, 0b11u, 2).coarse, Shape({12, 10}));
    // 10 = 2 x 5: one level; 6 is even but 3 is below the minimum length after it.
    const WaveletGeometry odd = wavelet_geometry({10, 6}, 0b11u);
    EXPECT_EQ(odd.levels(), 1);
    EXPECT_EQ(odd.coarse, Shape({5, 3}));
}

// The reconstructions' default: stop once an axis would drop below 16 samples, after a first level that
// every axis takes.
TEST(WaveletGeometry, TheCoarsestBandStopsEachAxis) {
    const WaveletGeometry g = wavelet_geometry({256, 64, 1, 8}, 0b011u, -1, 16);
    ASSERT_EQ(g.levels(), 4);
    EXPECT_EQ(g.level_axes[1], 0b011u);
    EXPECT_EQ(g.level_axes[2], 0b001u);
    EXPECT_EQ(g.coarse, Shape({16, 16, 1, 8}));
    const WaveletGeometry small = wavelet_geometry({24, 20}, 0b11u, -1, 16);
    EXPECT_EQ(small.levels(), 1);
    EXPECT_EQ(small.coarse, Shape({12, 10}));
    EXPECT_EQ(wavelet_geometry({256, 64}, 0b11u, 6, 16).levels(), 6);  // a level count given wins
}

TEST(WaveletGeometry, ShapesWithoutALevelAreRefusedByName) {
    auto message = [](auto f) {
        try {
            f();
        } catch (const std::invalid_argument& e) {
            return std::string(e.what());
        }
        return std::string("no exception");
    };
    EXPECT_NE(message([] { wavelet_geometry({7, 9}, 0b11u); }).find("[7x9]"), std::string::npos);
    EXPECT_NE(message([] { wavelet_geometry({8, 8}, 0b100u); }).find("axis mask 4"), std::string::npos);
    EXPECT_NE(message([] { wavelet_geometry({8192, 8}, 0b01u); }).find("longer than 4096"), std::string::npos);
    EXPECT_NE(message([] { wavelet_geometry({8, 8}, 0b11u, 0); }).find("levels 0"), std::string::npos);
}

class Wavelet : public test::BackendTest {};

TEST_P(Wavelet, MatchesTheDenseTransformWrittenFromTheFilters) {
    for (const auto& [shape, axes] : std::vector<std::pair<Shape, AxisMask>>{
             {{16, 8, 1, 2}, 0b011u}, {{8, 4, 6, 1}, 0b111u}, {{12, 10}, 0b01u}}) {
        const WaveletGeometry g = wavelet_geometry(shape, axes);
        LinOp w = wavelet(be, g);
        test::expect_matches(*w, dense_wavelet(g), 2e-6);
    }
}

TEST_P(Wavelet, IsOrthogonalToFloatRoundingAtImageSizes) {
    for (const Shape& shape : {Shape{256, 256, 1, 8}, Shape{64, 48, 32, 4}}) {
        const WaveletGeometry g = wavelet_geometry(shape, shape[2] > 1 ? 0b111u : 0b011u);
        LinOp w = wavelet(be, g);
        const CArray x = test::random_on(*be, shape, 3);
        CArray c = be->empty(shape), back = be->empty(shape);
        w->forward(x, c);
        w->adjoint(c, back);
        const std::vector<cdouble> xs = test::download(*be, x), cs = test::download(*be, c),
                                   bs = test::download(*be, back);
        double ex = 0, ec = 0, err = 0;
        for (size_t i = 0; i < xs.size(); ++i) ex += std::norm(xs[i]), ec += std::norm(cs[i]), err += std::norm(bs[i] - xs[i]);
        EXPECT_NEAR(std::sqrt(ec / ex), 1.0, 2e-6) << shape.str();
        EXPECT_LT(std::sqrt(err / ex), 2e-6) << shape.str();
        test::expect_adjoint(*w);
    }
}

// Two vanishing moments: a periodic image that is linear along x inside every level's lines has no
// detail, and a constant keeps all its energy in the low band.
TEST_P(Wavelet, ConstantsLiveInTheLowBandOnly) {
    const Shape shape{64, 32, 1, 3};
    const WaveletGeometry g = wavelet_geometry(shape, 0b011u);
    CArray h = be->host_complex(shape);
    for (size_t i = 0; i < h.size(); ++i) h.data()[i] = cfloat(2.f, -1.f) * float(1 + i / (64 * 32));
    LinOp w = wavelet(be, g);
    CArray c = be->empty(shape);
    w->forward(be->to_device(h), c);
    const std::vector<cdouble> cs = test::download(*be, c);
    double low = 0, all = 0;
    for (size_t i = 0; i < cs.size(); ++i) {
        const size_t x = i % 64, y = (i / 64) % 32;
        all += std::norm(cs[i]);
        if (x < g.coarse[0] && y < g.coarse[1]) low += std::norm(cs[i]);
    }
    EXPECT_GT(low / all, 1.0 - 1e-10);
}

TEST_P(Wavelet, CudaMatchesTheCpu) {
    const Shape shape{96, 80, 1, 5};
    test::expect_same_on_cpu(be, [&](std::shared_ptr<Backend> b) { return wavelet(b, wavelet_geometry(shape, 0b011u)); },
                             2e-6);
    const Shape volume{32, 24, 16, 2};
    test::expect_same_on_cpu(be, [&](std::shared_ptr<Backend> b) { return wavelet(b, wavelet_geometry(volume, 0b111u)); },
                             2e-6);
}

// Cycle spinning: W with a shift is W of the circularly shifted input, and the shifted inverse undoes it.
TEST_P(Wavelet, ShiftedTransformIsTheTransformOfTheShiftedInput) {
    for (const auto& [shape, axes, shift] : std::vector<std::tuple<Shape, AxisMask, WaveletShift>>{
             {{16, 8, 1, 2}, 0b011u, {5, 3, 0, 0}}, {{8, 4, 6, 1}, 0b111u, {7, 1, 5, 0}}, {{12, 10}, 0b01u, {11, 9}}}) {
        const WaveletGeometry g = wavelet_geometry(shape, axes);
        const CArray x = test::random_on(*be, shape, 9);
        const CArray hx = be->to_host(x);
        CArray turned = CArray::host(shape);
        for (size_t i = 0; i < hx.size(); ++i) {
            size_t rest = i, from = 0;
            for (int a = 0; a < shape.rank(); ++a) {
                const size_t n = shape[a], at = rest % n, by = (axes & (1u << a)) ? shift[size_t(a)] : 0;
                from += ((at + by) % n) * shape.stride(a);
                rest /= n;
            }
            turned.data()[i] = hx.data()[from];
        }
        CArray want = be->empty(shape), got = be->empty(shape);
        wavelet_forward(*be, g, be->to_device(turned), want);
        wavelet_forward(*be, g, x, got, shift);
        const std::vector<cdouble> w = test::download(*be, want), c = test::download(*be, got);
        double err = 0, ref = 0;
        for (size_t i = 0; i < w.size(); ++i) err += std::norm(c[i] - w[i]), ref += std::norm(w[i]);
        EXPECT_LT(std::sqrt(err / ref), 1e-6) << shape.str();
        wavelet_inverse_in_place(*be, g, got, shift);
        const std::vector<cdouble> back = test::download(*be, got), xs = test::download(*be, x);
        err = ref = 0;
        for (size_t i = 0; i < xs.size(); ++i) err += std::norm(back[i] - xs[i]), ref += std::norm(xs[i]);
        EXPECT_LT(std::sqrt(err / ref), 2e-6) << shape.str();
    }
}

// The threshold shrinks each coil vector c_i by max(1 - lambda / ||c_i||, 0) and leaves the low band.
TEST_P(Wavelet, JointThresholdSparesTheLowBand) {
    const Shape shape{32, 16, 1, 4};
    const WaveletGeometry g = wavelet_geometry(shape, 0b011u);
    const CArray c = test::random_on(*be, shape, 5);
    CArray out = be->empty(shape);
    const float lambda = 2.5f;
    wavelet_soft_threshold(*be, g, lambda, 4, c, out);
    const std::vector<cdouble> in = test::download(*be, c), got = test::download(*be, out);
    const size_t n = 32 * 16;
    double worst = 0;
    size_t zeroed = 0;
    for (size_t i = 0; i < n; ++i) {
        double e = 0;
        for (size_t k = 0; k < 4; ++k) e += std::norm(in[i + k * n]);
        const bool low = i % 32 < g.coarse[0] && i / 32 < g.coarse[1];
        const double f = low ? 1.0 : std::max(0.0, 1.0 - lambda / std::sqrt(e));
        zeroed += f == 0.0;
        for (size_t k = 0; k < 4; ++k) worst = std::max(worst, std::abs(got[i + k * n] - f * in[i + k * n]));
    }
    EXPECT_LT(worst, 1e-5);
    EXPECT_GT(zeroed, n / 10);  // the test exercises both branches
}

TEST_P(Wavelet, ThresholdProxIsTheShrinkageOfTheCoefficients) {
    const Shape shape{64, 64, 1, 2};
    const WaveletGeometry g = wavelet_geometry(shape, 0b011u, 3);
    LinOp w = wavelet(be, g);
    const CArray x = test::random_on(*be, shape, 9);
    CArray c = be->empty(shape), direct = be->empty(shape), prox_out = be->empty(shape);
    w->forward(x, c);
    wavelet_soft_threshold(*be, g, 0.5f, 2, c, c);
    w->adjoint(c, direct);
    std::unique_ptr<Prox> p = wavelet_threshold_prox(be, g, 0.25f, 2);
    p->apply(2.f, x, prox_out);  // step * lambda = 0.5
    const std::vector<cdouble> a = test::download(*be, direct), b = test::download(*be, prox_out);
    double err = 0, ref = 0;
    for (size_t i = 0; i < a.size(); ++i) err += std::norm(a[i] - b[i]), ref += std::norm(a[i]);
    EXPECT_LT(std::sqrt(err / ref), 1e-6);
    EXPECT_THROW(wavelet_threshold_prox(be, g, 0.1f, 3), std::invalid_argument);
    EXPECT_THROW(wavelet_threshold_prox(be, wavelet_geometry(shape, 0b1111u), 0.1f, 2), std::invalid_argument);
}

// G x = (G - I) x + x, and G's adjoint is the per-pixel conjugate transpose (core/linops/spirit.h).
TEST_P(Wavelet, SpiritStepIsTheConsistencyOperatorPlusIdentity) {
    const Shape image{24, 20, 1, 4};
    const CArray g = test::random_on(*be, {24, 20, 1, 4, 4}, 13);
    LinOp step = spirit_g(be, g), consistency = spirit_consistency(be, g);
    const CArray x = test::random_on(*be, image, 14);
    const std::vector<cdouble> a = test::apply_forward(*step, x), b = test::apply_forward(*consistency, x),
                               xs = test::download(*be, x);
    double err = 0, ref = 0;
    for (size_t i = 0; i < a.size(); ++i) err += std::norm(a[i] - (b[i] + xs[i])), ref += std::norm(a[i]);
    EXPECT_LT(std::sqrt(err / ref), 1e-6);
    test::expect_adjoint(*step);
    test::expect_same_on_cpu(be, [&](std::shared_ptr<Backend> b2) { return spirit_g(b2, b2->to_device(be->to_host(g))); });
}

// The POCS step in place, x <- G x, equals G's forward into a separate array: at 4 coils, at 40 (a
// 128-thread block on CUDA) and at 130 (past the shared staging: staged through device memory).
TEST_P(Wavelet, SpiritStepInPlaceIsG) {
    for (size_t coils : {4u, 40u, 130u}) {
        const Shape image{7, 5, 1, coils};
        const CArray g = test::random_on(*be, {7, 5, 1, coils, coils}, 15);
        CArray x = test::random_on(*be, image, 16);
        const std::vector<cdouble> want = test::apply_forward(*spirit_g(be, g), x);
        std::unique_ptr<Prox> step = spirit_step(be, g);
        CArray apart = be->empty(image);
        step->apply(1.f, x, apart);
        EXPECT_EQ(test::download(*be, apart), want) << coils << " coils, out apart";
        step->apply(1.f, x, x);
        EXPECT_EQ(test::download(*be, x), want) << coils << " coils, in place";
    }
    EXPECT_THROW(spirit_step(be, be->empty({4, 3, 2})), std::invalid_argument);
}

LARMOR_INSTANTIATE_BACKEND_TEST(Wavelet);

class Solvers : public test::BackendTest {};

// A diagonal operator with known largest entry.
TEST_P(Solvers, PowerMethodFindsTheLargestEigenvalue) {
    const Shape shape{50, 20};
    RArray d = be->host_real(shape);
    for (size_t i = 0; i < d.size(); ++i) d.data()[i] = 0.5f + float(i % 97) / 100.f;  // max 1.46
    d.data()[123] = 3.f;
    const LinOp a = diag(be, shape, be->to_device(d));
    EXPECT_NEAR(max_eigenvalue(a, 40), 3.0, 1e-4);
    EXPECT_NEAR(max_eigenvalue(normal(a), 40), 9.0, 1e-3);
}

// With A = I the problem min 1/2 ||x - y||^2 + lambda ||x||_1 has the solution S_lambda(y), and FISTA
// with step 1 reaches it in one step (its extrapolation then stays put).
TEST_P(Solvers, FistaSolvesTheDenoisingProblemExactly) {
    const Shape shape{40, 30};
    const CArray y = test::random_on(*be, shape, 21);
    CArray x = be->zeros(shape);
    FistaOptions o;
    o.max_iterations = 5;
    Fista f(identity(be, shape), y, soft_threshold_prox(be, shape, 0.7f), x, 1.f, o);
    run(f);
    CArray want = be->empty(shape);
    be->soft_threshold(0.7f, y, want);
    const std::vector<cdouble> a = test::download(*be, f.x()), b = test::download(*be, want);
    double err = 0, ref = 0;
    for (size_t i = 0; i < a.size(); ++i) err += std::norm(a[i] - b[i]), ref += std::norm(b[i]);
    EXPECT_LT(std::sqrt(err / ref), 1e-6);
    EXPECT_EQ(f.residuals().size(), 6u);
}

// Without a penalty FISTA is accelerated gradient descent on a least-squares problem: on a diagonal
// operator with d in [0.3, 1] (A^H A's condition number 11) it converges to y / d.
TEST_P(Solvers, FistaWithoutAPenaltyReachesLeastSquares) {
    const Shape shape{64, 8};
    RArray d = be->host_real(shape);
    for (size_t i = 0; i < d.size(); ++i) d.data()[i] = 0.3f + 0.7f * float(i % 13) / 12.f;
    const LinOp a = diag(be, shape, be->to_device(d));
    const CArray y = test::random_on(*be, shape, 4);
    CArray aty = be->empty(shape);
    a->adjoint(y, aty);
    FistaOptions o;
    o.max_iterations = 400;
    Fista f(a, aty, soft_threshold_prox(be, shape, 0.f), be->zeros(shape), 1.f / 1.01f, o);
    run(f);
    const std::vector<cdouble> got = test::download(*be, f.x()), ys = test::download(*be, y);
    double err = 0, ref = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const cdouble want = ys[i] / double(d.data()[i]);
        err += std::norm(got[i] - want), ref += std::norm(want);
    }
    EXPECT_LT(std::sqrt(err / ref), 1e-4);
}

// Alternating projections onto two data-consistency sets whose masks together cover every sample
// converge to the one point in their intersection after one cycle.
TEST_P(Solvers, PocsAlternatesProjectionsToTheIntersection) {
    const Shape shape{16, 16};
    const CArray truth = test::random_on(*be, shape, 8);
    const std::vector<cdouble> t = test::download(*be, truth);
    RArray m1 = be->host_real(shape), m2 = be->host_real(shape);
    for (size_t i = 0; i < m1.size(); ++i) (i % 3 ? m1 : m2).data()[i] = 1.f;
    std::vector<std::unique_ptr<Prox>> steps;
    steps.push_back(data_consistency_projection(be, m1, truth));
    steps.push_back(data_consistency_projection(be, m2, truth));
    Pocs p(std::move(steps), be->zeros(shape), 3);
    run(p);
    const std::vector<cdouble> got = test::download(*be, p.x());
    double err = 0;
    for (size_t i = 0; i < got.size(); ++i) err += std::norm(got[i] - t[i]);
    EXPECT_LT(err, 1e-10);
    ASSERT_EQ(p.residuals().size(), 4u);
    EXPECT_NEAR(p.residuals()[1], 1.0, 1e-6);  // from zero, the first cycle is the whole image
    EXPECT_LT(p.residuals()[3], 1e-6);

    // With a tolerance it stops once the change is below it, seen one iteration late: the second
    // cycle changes nothing, which the third iteration learns, so it ends there instead of at 10.
    std::vector<std::unique_ptr<Prox>> again;
    again.push_back(data_consistency_projection(be, m1, truth));
    again.push_back(data_consistency_projection(be, m2, truth));
    Pocs q(std::move(again), be->zeros(shape), 10, true, 1e-3);
    run(q);
    EXPECT_EQ(q.iteration(), 3);
}

LARMOR_INSTANTIATE_BACKEND_TEST(Solvers);

}  // namespace
}  // namespace larmor
