// The Backend's BLAS-1 and pointwise primitives on every backend against double-precision loops,
// including device-scalar coefficients, broadcasting, real arrays, views and the aliasing contract.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tests/support/backends.h"
#include "tests/support/operator_checks.h"
#include "tests/support/reference_dft.h"

namespace larmor {
namespace {

using test::cdouble;

class Blas1 : public test::BackendTest {
protected:
    CArray rnd(const Shape& s, unsigned seed) { return test::random_on(*be, s, seed); }
    std::vector<cdouble> host(const CArray& a) { return test::download(*be, a); }
    RArray rreal(const Shape& s, unsigned seed) {
        RArray w = RArray::host(s);
        std::mt19937 gen(seed);
        std::normal_distribution<float> nd;
        for (size_t i = 0; i < w.size(); ++i) w.data()[i] = nd(gen);
        return be->to_device(w);
    }
    std::vector<double> host(const RArray& a) {
        const RArray h = be->to_host(a);
        return std::vector<double>(h.data(), h.data() + h.size());
    }
    cdouble scalar(const CArray& s) { return host(s)[0]; }
};
LARMOR_INSTANTIATE_BACKEND_TEST(Blas1);

double rel(const std::vector<double>& a, const std::vector<double>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

TEST_P(Blas1, ScaleAxpyXpayWithHostAndDeviceCoefficients) {
    const Shape s{37, 11};
    const CArray x = rnd(s, 1);
    const auto xh = host(x);
    CArray sc = be->zeros({2});
    CArray num = sc.view(0, {1}), den = sc.view(1, {1});
    be->dot(x, x, num);               // ||x||^2
    be->dot(x, rnd(s, 2), den);       // some complex value
    const cdouble n = scalar(num), d = scalar(den);
    const cdouble a(0.75, -1.25);
    const cdouble ratio = cdouble(a) * n / d;
    for (bool device_coef : {false, true}) {
        const Coef c = device_coef ? Coef::ratio(cfloat(a), num, den) : Coef(cfloat(a));
        const cdouble k = device_coef ? ratio : a;
        CArray y = rnd(s, 3);
        const auto y0 = host(y);
        be->axpy(c, x, y);
        std::vector<cdouble> want(xh.size());
        for (size_t i = 0; i < want.size(); ++i) want[i] = y0[i] + k * xh[i];
        EXPECT_LT(test::relative_error(host(y), want), 1e-5) << "axpy, device coefficient " << device_coef;
        be->xpay(c, x, y);  // y = x + k y
        for (size_t i = 0; i < want.size(); ++i) want[i] = xh[i] + k * want[i];
        EXPECT_LT(test::relative_error(host(y), want), 1e-5) << "xpay, device coefficient " << device_coef;
        be->scale(c, y, y);  // in place
        for (auto& v : want) v *= k;
        EXPECT_LT(test::relative_error(host(y), want), 1e-5) << "scale, device coefficient " << device_coef;
    }
    // A zero denominator gives a zero coefficient (a converged solver step stays put).
    CArray zero = be->zeros({1});
    CArray y = rnd(s, 4);
    const auto y0 = host(y);
    be->axpy(Coef::ratio(1.f, num, zero), x, y);
    EXPECT_EQ(host(y), y0);
}

TEST_P(Blas1, DotAndNormInDouble) {
    for (size_t n : {1u, 255u, 4096u, 300001u}) {
        const CArray x = rnd({n}, 5), y = rnd({n}, 6);
        const auto xh = host(x), yh = host(y);
        cdouble want = 0;
        double nn = 0;
        for (size_t i = 0; i < n; ++i) {
            want += std::conj(xh[i]) * yh[i];
            nn += std::norm(xh[i]);
        }
        CArray out = be->empty({1});
        be->dot(x, y, out);
        EXPECT_LT(std::abs(scalar(out) - want), 1e-6 * std::sqrt(nn) * std::sqrt(double(n))) << n;
        be->norm2(x, out);
        EXPECT_NEAR(scalar(out).real(), nn, 1e-6 * nn) << n;
        EXPECT_EQ(scalar(out).imag(), 0.0);
        // Twice the same: the reduction order is fixed.
        CArray again = be->empty({1});
        be->norm2(x, again);
        EXPECT_EQ(scalar(again), scalar(out));
    }
    const RArray a = rreal({1000}, 7), b = rreal({1000}, 8);
    const auto ah = host(a), bh = host(b);
    double want = 0;
    for (size_t i = 0; i < ah.size(); ++i) want += ah[i] * bh[i];
    CArray out = be->empty({1});
    be->dot(a, b, out);
    EXPECT_NEAR(scalar(out).real(), want, 1e-5 * std::abs(want) + 1e-5);
}

TEST_P(Blas1, MulBroadcastsOverTrailingAxes) {
    const CArray a = rnd({6, 5, 4}, 9);
    for (const Shape& bs : {Shape{6, 5, 4}, Shape{6, 5}, Shape{6}}) {
        const CArray b = rnd(bs, 10);
        const auto ah = host(a), bh = host(b);
        for (bool conj : {false, true}) {
            CArray out = be->empty(a.shape());
            be->mul(a, b, out, conj);
            std::vector<cdouble> want(ah.size());
            for (size_t i = 0; i < want.size(); ++i) {
                const cdouble v = bh[i % bh.size()];
                want[i] = ah[i] * (conj ? std::conj(v) : v);
            }
            EXPECT_LT(test::relative_error(host(out), want), 1e-6) << bs.str() << " conj " << conj;
        }
        const RArray w = rreal(bs, 11);
        const auto wh = host(w);
        CArray out = be->empty(a.shape());
        be->mul(a, w, out);
        CArray q = be->empty(a.shape());
        be->div(a, w, q);
        std::vector<cdouble> want(ah.size()), wantq(ah.size());
        for (size_t i = 0; i < want.size(); ++i) {
            want[i] = ah[i] * wh[i % wh.size()];
            wantq[i] = ah[i] / wh[i % wh.size()];
        }
        EXPECT_LT(test::relative_error(host(out), want), 1e-6) << bs.str();
        EXPECT_LT(test::relative_error(host(q), wantq), 1e-6) << bs.str();
    }
    CArray bad = be->empty(a.shape());
    EXPECT_THROW(be->mul(a, rnd({5}, 1), bad), std::invalid_argument);  // not a leading shape
}

TEST_P(Blas1, RealPointwiseAndDivisionByZero) {
    RArray a = rreal({100, 3}, 12);
    RArray b = be->to_host(rreal({100}, 13));
    b.data()[7] = 0.f;
    b = be->to_device(b);
    RArray out = be->empty_real(a.shape());
    be->div(a, b, out);
    const auto ah = host(a), bh = host(b), oh = host(out);
    for (size_t i = 0; i < oh.size(); ++i) {
        const double d = bh[i % 100];
        EXPECT_NEAR(oh[i], d == 0 ? 0.0 : ah[i] / d, 1e-5 * std::abs(d == 0 ? 0.0 : ah[i] / d) + 1e-7) << i;
    }
    be->mul(a, b, out);
    be->axpy(2.f, a, out);
    be->scale(0.5f, out, out);
    std::vector<double> want(ah.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = 0.5 * (ah[i] * bh[i % 100] + 2 * ah[i]);
    EXPECT_LT(rel(host(out), want), 1e-6);
    be->fill(out, 3.f);
    for (double v : host(out)) EXPECT_EQ(v, 3.0);
}

TEST_P(Blas1, ReduceConjMulIsTheAdjointOfTheBroadcast) {
    const CArray a = rnd({9, 7, 5}, 14), b = rnd({9, 7, 5}, 15);
    const auto ah = host(a), bh = host(b);
    CArray out = be->empty({9, 7});
    be->reduce_conj_mul(a, b, out);
    std::vector<cdouble> want(63);
    for (size_t c = 0; c < 5; ++c)
        for (size_t p = 0; p < 63; ++p) want[p] += std::conj(ah[c * 63 + p]) * bh[c * 63 + p];
    EXPECT_LT(test::relative_error(host(out), want), 1e-6);
    CArray alias = a;
    EXPECT_THROW(be->reduce_conj_mul(a, b, alias), std::invalid_argument);
}

TEST_P(Blas1, SoftThresholdElementwiseAndJoint) {
    const CArray x = rnd({40, 4}, 16);
    const auto xh = host(x);
    for (size_t joint : {1u, 4u}) {
        CArray out = be->empty(x.shape());
        be->soft_threshold(0.8f, x, out, joint);
        const size_t rows = 160 / joint;
        std::vector<cdouble> want(160);
        for (size_t i = 0; i < rows; ++i) {
            double e = 0;
            for (size_t g = 0; g < joint; ++g) e += std::norm(xh[g * rows + i]);
            const double m = std::sqrt(e), keep = m > 0.8 ? 1 - 0.8 / m : 0;
            for (size_t g = 0; g < joint; ++g) want[g * rows + i] = keep * xh[g * rows + i];
        }
        EXPECT_LT(test::relative_error(host(out), want), 1e-5) << "joint " << joint;
    }
    CArray y = be->empty(x.shape());
    EXPECT_THROW(be->soft_threshold(0.1f, x, y, 3), std::invalid_argument);
    EXPECT_THROW(be->soft_threshold(-1.f, x, y, 1), std::invalid_argument);
}

// blend: (1 - m) x + m y where m != 0, m broadcast over the trailing axis; m = 1 gives y bit for bit,
// and an entry with m = 0 is not read: a NaN of y there does not reach x.
TEST_P(Blas1, BlendTakesTheDataWhereTheMaskIsSetAndLeavesTheRest) {
    const Shape s{37, 3};
    CArray x = rnd(s, 30);
    CArray y = be->empty(s);
    {
        CArray h = be->to_host(rnd(s, 31));
        for (size_t g = 0; g < 3; ++g)
            for (size_t j = 0; j < 37; j += 4) h.data()[g * 37 + j] = cfloat(std::nanf(""), 0.f);
        y = be->to_device(h);
    }
    RArray m = RArray::host({37});
    for (size_t j = 0; j < 37; ++j) m.data()[j] = j % 4 == 0 ? 0.f : (j % 4 == 1 ? 1.f : 0.25f * float(j % 4));
    const auto xh = host(x), yh = host(y);
    be->blend(be->to_device(m), y, x);
    const auto out = host(x);
    for (size_t i = 0; i < out.size(); ++i) {
        const float w = m.data()[i % 37];
        if (w == 0.f || w == 1.f)
            EXPECT_EQ(out[i], w == 0.f ? xh[i] : yh[i]) << i;
        else
            EXPECT_LT(std::abs(out[i] - ((1.0 - w) * xh[i] + double(w) * yh[i])), 1e-6) << i;
    }
    CArray wrong = be->empty({37, 2});
    EXPECT_THROW(be->blend(be->to_device(m), y, wrong), std::invalid_argument);
    EXPECT_THROW(be->blend(be->to_device(RArray::host({36})), y, x), std::invalid_argument);
    CArray alias = y;
    EXPECT_THROW(be->blend(be->to_device(m), y, alias), std::invalid_argument);
}

// cg_coefficients: {||r||^2, Re <r, w>} against double loops, and the step sizes from them and the
// previous gamma and alpha (core/cg_step_sizes.h): the zero start gives a steepest-descent step, a
// second call the recurrence, a zero residual alpha 0; the scalars checked for size and aliasing.
TEST_P(Blas1, CgCoefficientsAreTwoInnerProductsAndTheStepSizes) {
    const Shape s{257, 3};
    // {||r||^2, Re <r, w>} in double on the host
    auto inner_products = [&](const CArray& r, const CArray& w) {
        const auto rh = host(r), wh = host(w);
        std::pair<double, double> g{0.0, 0.0};
        for (size_t i = 0; i < rh.size(); ++i) {
            g.first += std::norm(rh[i]);
            g.second += (std::conj(rh[i]) * wh[i]).real();
        }
        return g;
    };
    const CArray r = rnd(s, 50), w = rnd(s, 51);
    const auto [gamma, delta] = inner_products(r, w);
    CArray sc = be->zeros({4});
    be->cg_coefficients(r, w, sc);
    auto v = host(sc);
    EXPECT_NEAR(v[0].real(), gamma, 1e-6 * gamma);
    EXPECT_NEAR(v[3].real(), delta, 1e-6 * std::abs(gamma));
    EXPECT_NEAR(v[1].real(), gamma / delta, 1e-5 * std::abs(gamma / delta)) << "the first step is steepest descent's";
    EXPECT_EQ(v[2].real(), 0.f) << "beta is 0 the first time";
    for (const cdouble& e : v) EXPECT_EQ(e.imag(), 0.0);
    // The recurrence: beta = gamma' / gamma, alpha = gamma' / (delta' - beta gamma' / alpha), with the
    // stored (float) gamma and alpha, as the device reads them.
    const CArray r2 = rnd(s, 52), w2 = rnd(s, 53);
    const auto [gamma2, delta2] = inner_products(r2, w2);
    const double beta = gamma2 / v[0].real(), alpha = gamma2 / (delta2 - beta * gamma2 / v[1].real());
    be->cg_coefficients(r2, w2, sc);
    const auto v2 = host(sc);
    EXPECT_NEAR(v2[0].real(), gamma2, 1e-6 * gamma2);
    EXPECT_NEAR(v2[2].real(), beta, 1e-5 * beta);
    EXPECT_NEAR(v2[1].real(), alpha, 1e-4 * std::abs(alpha));
    // A zero residual: gamma 0, beta 0, alpha 0 (the iterate stays).
    be->cg_coefficients(be->zeros(s), w, sc);
    for (const cdouble& e : host(sc)) EXPECT_EQ(e, cdouble(0.0, 0.0));
    CArray three = be->zeros({3});
    EXPECT_THROW(be->cg_coefficients(r, w, three), std::invalid_argument);
    EXPECT_THROW(be->cg_coefficients(r, rnd({5}, 1), sc), std::invalid_argument);
    CArray both = be->zeros({8});
    CArray view = both.view(0, {4});
    EXPECT_THROW(be->cg_coefficients(both, both, view), std::invalid_argument);
}

// cg_update against its four BLAS-1 steps with the coefficients it reads (xpay, xpay, axpy, axpy):
// bit for bit on the CPU, to float rounding on CUDA (FMA contraction may differ); aliasing refused.
TEST_P(Blas1, CgUpdateIsFourAxpysWithTheStoredCoefficients) {
    const Shape s{257, 3};
    const CArray w = rnd(s, 60);
    CArray p1 = rnd(s, 61), s1 = rnd(s, 62), x1 = rnd(s, 63), r1 = rnd(s, 64);
    CArray p2 = be->empty(s), s2 = be->empty(s), x2 = be->empty(s), r2 = be->empty(s);
    be->copy(p1, p2);
    be->copy(s1, s2);
    be->copy(x1, x2);
    be->copy(r1, r2);
    CArray sc = be->to_device([] {
        CArray h = CArray::host({4});
        h.data()[0] = cfloat(2.f, 0.f);
        h.data()[1] = cfloat(0.375f, 0.f);  // alpha
        h.data()[2] = cfloat(-0.8125f, 0.f);  // beta
        h.data()[3] = cfloat(5.f, 0.f);
        return h;
    }());
    be->cg_update(w, sc, p1, s1, x1, r1);
    be->xpay(-0.8125f, r2, p2);
    be->xpay(-0.8125f, w, s2);
    be->axpy(0.375f, p2, x2);
    be->axpy(-0.375f, s2, r2);
    const std::pair<CArray*, CArray*> pairs[] = {{&p1, &p2}, {&s1, &s2}, {&x1, &x2}, {&r1, &r2}};
    for (const auto& [fused, apart] : pairs) {
        const auto a = host(*fused), b = host(*apart);
        for (size_t i = 0; i < a.size(); ++i) ASSERT_LT(std::abs(a[i] - b[i]), 1e-6 * (1 + std::abs(b[i]))) << i;
    }
    CArray alias = x1;
    EXPECT_THROW(be->cg_update(w, sc, p1, s1, x1, alias), std::invalid_argument);
    EXPECT_THROW(be->cg_update(p1, sc, p1, s1, x1, r1), std::invalid_argument);
    CArray three = be->zeros({3});
    EXPECT_THROW(be->cg_update(w, three, p1, s1, x1, r1), std::invalid_argument);
}

// change_norms: {||x - p||^2, ||x||^2} in double, then p = x; the same numbers as dot over the difference.
TEST_P(Blas1, ChangeNormsMeasuresTheStepAndKeepsTheIterate) {
    const CArray x = rnd({301, 5}, 40);
    CArray p = rnd({301, 5}, 41);
    const auto xh = host(x), ph = host(p);
    double change = 0, size = 0;
    for (size_t i = 0; i < xh.size(); ++i) change += std::norm(xh[i] - ph[i]), size += std::norm(xh[i]);
    CArray out = be->zeros({2});
    be->change_norms(x, p, out);
    const auto o = host(out);
    EXPECT_NEAR(o[0].real(), change, 1e-6 * change);
    EXPECT_NEAR(o[1].real(), size, 1e-6 * size);
    EXPECT_EQ(o[0].imag(), 0.0);
    EXPECT_EQ(host(p), xh);
    be->change_norms(x, p, out);  // no change left
    EXPECT_EQ(host(out)[0].real(), 0.0);
    CArray one = be->zeros({1}), alias = x;
    EXPECT_THROW(be->change_norms(x, p, one), std::invalid_argument);
    EXPECT_THROW(be->change_norms(x, alias, out), std::invalid_argument);
}

TEST_P(Blas1, ViewsShareStorageAndPartialOverlapIsRefused) {
    CArray a = rnd({8, 3}, 17);
    const auto before = host(a);
    CArray coil = a.slice_last(1);
    EXPECT_EQ(coil.shape(), Shape({8}));
    be->scale(2.f, coil, coil);  // in place on one coil of a
    const auto after = host(a);
    for (size_t i = 0; i < 24; ++i)
        EXPECT_NEAR(std::abs(after[i] - (i >= 8 && i < 16 ? 2.0 : 1.0) * before[i]), 0.0, 1e-6) << i;
    // Overlapping but not identical views.
    CArray left = a.view(0, {10}), right = a.view(5, {10});
    EXPECT_THROW(be->axpy(1.f, left, right), std::invalid_argument);
    EXPECT_THROW(be->copy(left, right), std::invalid_argument);
    // A view that does not fit.
    EXPECT_THROW(a.view(20, {5}), std::invalid_argument);
    EXPECT_THROW(a.slice_last(3), std::invalid_argument);
    // Copy between host and device, and into a view.
    CArray h = CArray::host({8});
    be->copy(a.slice_last(0), h);
    for (size_t i = 0; i < 8; ++i) EXPECT_EQ(cdouble(h.data()[i]), before[i]);
    CArray d = be->zeros({8, 3});
    CArray slot = d.slice_last(2);
    be->copy(h, slot);
    const auto dh = host(d);
    for (size_t i = 0; i < 8; ++i) EXPECT_EQ(dh[16 + i], before[i]);
}

TEST_P(Blas1, OutOfPlaceFftLeavesInputAndInPlaceMatches) {
    const Shape s{16, 12, 3};
    const CArray x = rnd(s, 18);
    const auto xh = host(x);
    CArray y = be->empty(s);
    be->fft(x, y, 3u, FFTDirection::Forward);
    EXPECT_EQ(host(x), xh);
    const auto want = test::reference_centred_dft(xh, s, 3u, FFTDirection::Forward);
    EXPECT_LT(test::relative_error(host(y), want), 1e-5);
    CArray z = be->empty(s);
    be->copy(x, z);
    be->fft(z, z, 3u, FFTDirection::Forward);
    EXPECT_LT(test::relative_error(host(z), want), 1e-5);
    CArray part = z.view(1, {16, 12, 2});
    EXPECT_THROW(be->fft(z.view(0, {16, 12, 2}), part, 3u, FFTDirection::Forward), std::invalid_argument);
}

}  // namespace
}  // namespace larmor
