// The fused CG-SENSE normal operator (core/linops/sense_normal.h) against the composed one it replaces,
// S^H (F_y^H M F_y) S + lambda I built from the sense and sampled_fft operators (which have their own
// tests against dense matrices): on both backends, for every phase-encode count the CUDA kernel has and
// readout lengths that leave a partial block, with one coil, fewer coils than a cluster and more. Also
// Hermitian, CPU = CUDA, the same bits on every run, the solver's image against the composed solver's,
// and refusals that name the offending value.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>
#include <string>
#include <vector>

#include "core/iter/cg.h"
#include "core/linops/algebra.h"
#include "core/linops/sampled_fft.h"
#include "core/linops/sense.h"
#include "core/linops/sense_normal.h"
#include "gadgets/sense/cartesian_sense.h"
#include "tests/support/backends.h"
#include "tests/support/operator_checks.h"
#include "tests/support/refusal_text.h"

namespace larmor {
namespace {

struct Case {
    size_t ro, e1, coils;
};

// Random maps (not normalised: the operator must not assume it) and lines: every third line, a centre
// block, and a few random ones.
CArray random_maps(const Case& c, unsigned seed) {
    CArray m = CArray::host({c.ro, c.e1, c.coils});
    std::mt19937 gen(seed);
    std::normal_distribution<float> nd;
    for (size_t i = 0; i < m.size(); ++i) {
        const float re = nd(gen);
        m.data()[i] = cfloat(re, nd(gen));
    }
    return m;
}

std::vector<float> lines_of(size_t e1, unsigned seed) {
    std::vector<float> w(e1, 0.f);
    std::mt19937 gen(seed);
    for (size_t y = 0; y < e1; ++y)
        if (y % 3 == 0 || (y >= e1 / 2 - e1 / 16 && y < e1 / 2 + e1 / 16) || gen() % 7 == 0) w[y] = 1.f;
    return w;
}

LinOp composed_normal(const std::shared_ptr<Backend>& be, const CArray& maps, const std::vector<float>& lines,
                      float lambda) {
    const Shape& s = maps.shape();
    RArray mask = RArray::host({s[0], s[1]});
    for (size_t y = 0; y < s[1]; ++y)
        for (size_t x = 0; x < s[0]; ++x) mask.data()[y * s[0] + x] = lines[y];
    const LinOp e = compose(sampled_fft(be, s, 0b011u, mask), sense(be, maps));
    return tikhonov_normal(e, lambda);
}

double relative_l2(const std::vector<test::cdouble>& a, const std::vector<test::cdouble>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) num += std::norm(a[i] - b[i]), den += std::norm(b[i]);
    return std::sqrt(num / den);
}

class SenseNormal : public test::BackendTest {};

TEST_P(SenseNormal, EqualsTheComposedOperator) {
    // 8 columns per CUDA block: 37 and 100 leave a partial block; 3 coils < the portable cluster's 8,
    // 12 > it; 17 and 32 coils > 16, the widest cluster (blocks with two coils, one with one more).
    for (const Case c : {Case{256, 256, 8}, Case{100, 64, 1}, Case{37, 128, 12}, Case{64, 256, 3}, Case{24, 64, 17},
                         Case{40, 256, 32}}) {
        SCOPED_TRACE("RO " + std::to_string(c.ro) + ", E1 " + std::to_string(c.e1) + ", " + std::to_string(c.coils) +
                     " coils");
        const CArray maps = random_maps(c, 3);
        const std::vector<float> lines = lines_of(c.e1, 4);
        const LinOp fused = sense_normal(be, maps, lines, 0.05f);
        const LinOp reference = composed_normal(be, maps, lines, 0.05f);
        const CArray x = test::random_on(*be, {c.ro, c.e1}, 5);
        const auto want = test::apply_forward(*reference, x);
        const auto got = test::apply_forward(*fused, x);
        EXPECT_LT(relative_l2(got, want), 2e-6);
        test::expect_adjoint(*fused, 1e-5);
    }
}

// Scanners deliver k-space from 1e-12 to 1e14: the operator is linear and squares nothing, so it must
// agree with the composed one at every scale, not only at unit scale.
TEST_P(SenseNormal, EqualsTheComposedOperatorAtScannerScales) {
    const Case c{128, 256, 8};
    const CArray maps = random_maps(c, 31);
    const std::vector<float> lines = lines_of(c.e1, 32);
    const LinOp fused = sense_normal(be, maps, lines, 0.01f);
    const LinOp reference = composed_normal(be, maps, lines, 0.01f);
    for (const float scale : {1e-12f, 1e12f, 1e14f}) {
        SCOPED_TRACE("scale " + std::to_string(scale));
        CArray x = test::random_on(*be, {c.ro, c.e1}, 33);
        be->scale(scale, x, x);
        const auto got = test::apply_forward(*fused, x);
        for (const auto& v : got) ASSERT_TRUE(std::isfinite(v.real()) && std::isfinite(v.imag()));
        EXPECT_LT(relative_l2(got, test::apply_forward(*reference, x)), 2e-6);
    }
}

TEST_P(SenseNormal, RepeatsItsBitsAndMatchesTheCpu) {
    const Case c{136, 256, 20};
    const std::vector<float> lines = lines_of(c.e1, 8);
    const CArray maps = random_maps(c, 9);
    const LinOp op = sense_normal(be, maps, lines, 0.01f);
    const CArray x = test::random_on(*be, {c.ro, c.e1}, 10);
    const auto first = test::apply_forward(*op, x), second = test::apply_forward(*op, x);
    EXPECT_EQ(first, second);
    test::expect_same_on_cpu(be, [&](std::shared_ptr<Backend> b) { return sense_normal(b, maps, lines, 0.01f); }, 2e-6);
}

// forward_cg (CG's operator and inner products in one pass; on CUDA in the kernel's epilogue) against
// forward then Backend::cg_coefficients: the same image bit for bit, gamma and delta to double-sum
// rounding, and the step sizes from the stored previous gamma and alpha. Cluster widths 1, 8 and 16
// (two coils per block), a partial column block, and 8208 columns: 1026 clusters, more than the
// reduction has partials, where the coefficients take their own pass.
TEST_P(SenseNormal, ForwardCgEqualsTheOperatorThenTheCoefficients) {
    for (const Case c : {Case{256, 256, 8}, Case{37, 128, 1}, Case{256, 256, 32}, Case{8208, 64, 2}}) {
        SCOPED_TRACE("RO " + std::to_string(c.ro) + ", E1 " + std::to_string(c.e1) + ", " + std::to_string(c.coils) +
                     " coils");
        const CArray maps = random_maps(c, 41);
        const std::vector<float> lines = lines_of(c.e1, 42);
        const LinOp op = sense_normal(be, maps, lines, 0.03f);
        const CArray x = test::random_on(*be, {c.ro, c.e1}, 43);
        CArray want_y = be->empty({c.ro, c.e1}), got_y = be->empty({c.ro, c.e1});
        // A previous iteration's gamma and alpha, so that beta and the recurrence's alpha are exercised.
        CArray previous = CArray::host({4});
        previous.data()[0] = cfloat(3.5f, 0.f);
        previous.data()[1] = cfloat(0.25f, 0.f);
        CArray want_s = be->to_device(previous), got_s = be->to_device(previous);
        op->forward(x, want_y);
        be->cg_coefficients(x, want_y, want_s);
        op->forward_cg(x, got_y, got_s);
        EXPECT_EQ(test::download(*be, got_y), test::download(*be, want_y));
        const auto want = test::download(*be, want_s), got = test::download(*be, got_s);
        for (int k = 0; k < 4; ++k) {
            EXPECT_NEAR(got[k].real(), want[k].real(), 2e-6 * std::abs(want[k].real())) << "scalar " << k;
            EXPECT_EQ(got[k].imag(), 0.0);
        }
        EXPECT_GT(got[2].real(), 0.0) << "beta from the previous gamma";
    }
    const CArray maps = random_maps({16, 64, 2}, 44);
    const LinOp op = sense_normal(be, maps, lines_of(64, 45), 0.f);
    const CArray x = test::random_on(*be, {16, 64}, 46);
    CArray y = be->empty({16, 64}), three = be->zeros({3});
    EXPECT_THROW(op->forward_cg(x, y, three), std::invalid_argument);
}

TEST_P(SenseNormal, ImageAndFourDimensionalMapsOfOneSlice) {
    const Case c{64, 64, 4};
    const CArray maps = random_maps(c, 11);
    const LinOp op = sense_normal(be, maps.reshaped({64, 64, 1, 4}), lines_of(64, 12), 0.f);
    EXPECT_EQ(op->ishape(), (Shape{64, 64, 1}));
    EXPECT_EQ(op->oshape(), (Shape{64, 64, 1}));
}

TEST_P(SenseNormal, CgSenseImageEqualsTheComposedSolvers) {
    // A smooth object seen through the maps, sampled on the lines: the image of 15 CG iterations on the
    // fused operator against the composed solver's.
    const Case c{96, 128, 6};
    const Shape ks{c.ro, c.e1, 1, c.coils};
    const CArray maps = random_maps(c, 13).reshaped(ks);
    std::vector<uint8_t> sampled(c.e1, 0);
    const std::vector<float> lines = lines_of(c.e1, 14);
    for (size_t y = 0; y < c.e1; ++y) sampled[y] = lines[y] > 0.f ? 1 : 0;
    CArray kspace = test::random_on(*be, ks, 15);
    {
        CArray host = be->to_host(kspace);
        for (size_t ch = 0; ch < c.coils; ++ch)
            for (size_t y = 0; y < c.e1; ++y)
                if (!sampled[y])
                    for (size_t x = 0; x < c.ro; ++x) host.data()[(ch * c.e1 + y) * c.ro + x] = cfloat(0.f, 0.f);
        kspace = be->to_device(host);
    }
    const CArray dmaps = be->to_device(maps);
    auto fused = cartesian_sense(be, kspace, sampled, dmaps, 0.02f, {15, 0.0});
    auto composed = cartesian_sense(be, kspace, sampled, dmaps, 0.02f, {15, 0.0}, CArray{}, false);
    EXPECT_EQ(fused.normal, "fused");
    EXPECT_EQ(composed.normal, "composed (asked for)");
    while (!fused.solver->done()) fused.solver->update();
    while (!composed.solver->done()) composed.solver->update();
    // Both replay their iterations from a recording on CUDA (cuFFT inside the composed one's graph).
    if (be->device() == Device::Cuda) {
        EXPECT_TRUE(fused.solver->recorded()) << fused.solver->why_not_recorded();
        EXPECT_TRUE(composed.solver->recorded()) << composed.solver->why_not_recorded();
    }
    EXPECT_LT(relative_l2(test::download(*be, fused.image), test::download(*be, composed.image)), 1e-5);
    ASSERT_EQ(fused.solver->residuals().size(), composed.solver->residuals().size());
    for (size_t k = 0; k < fused.solver->residuals().size(); ++k)
        EXPECT_NEAR(fused.solver->residuals()[k], composed.solver->residuals()[k], 1e-5 * composed.solver->residuals()[0]);
}

TEST_P(SenseNormal, RefusesWhatItCannotTake) {
    const CArray maps = random_maps({32, 64, 2}, 1);
    auto refusal = [](auto&& f) { return test::refusal_text(f); };
    EXPECT_NE(refusal([&] { sense_normal(be, maps, std::vector<float>(63, 1.f), 0.f); }).find("63 line weights"),
              std::string::npos);
    std::vector<float> bad(64, 1.f);
    bad[5] = -1.f;
    EXPECT_NE(refusal([&] { sense_normal(be, maps, bad, 0.f); }).find("at line 5"), std::string::npos);
    EXPECT_NE(refusal([&] { sense_normal(be, maps, std::vector<float>(64, 1.f), -0.5f); }).find("lambda"),
              std::string::npos);
    EXPECT_NE(refusal([&] { sense_normal(be, maps.reshaped({32, 64, 2, 1}), std::vector<float>(64, 1.f), 0.f); })
                  .find("[32x64x2x1]"),
              std::string::npos);
    EXPECT_NE(sense_normal_unsupported({32, 64, 2, 8}, be->device()), "");
    EXPECT_EQ(sense_normal_unsupported({32, 64, 1, 8}, be->device()), "");
    // The CUDA kernel has 64, 128 and 256 phase encodes; the CPU takes any count.
    const std::string odd = sense_normal_unsupported({32, 96, 8}, be->device());
    if (be->device() == Device::Cuda)
        EXPECT_NE(odd.find("96 phase encodes"), std::string::npos) << odd;
    else
        EXPECT_EQ(odd, "");
}

LARMOR_INSTANTIATE_BACKEND_TEST(SenseNormal);

// Phase-encode counts only the CPU kernel takes, odd ones among them (the mask's shift by E1/2).
TEST(SenseNormalCpu, AnyPhaseEncodeCount) {
    const auto be = make_cpu_backend(2);
    for (const size_t e1 : {size_t(1), size_t(7), size_t(96), size_t(75)}) {
        SCOPED_TRACE("E1 " + std::to_string(e1));
        const Case c{24, e1, 3};
        const CArray maps = random_maps(c, 21);
        const std::vector<float> lines = lines_of(e1, 22);
        const CArray x = test::random_on(*be, {c.ro, e1}, 23);
        EXPECT_LT(relative_l2(test::apply_forward(*sense_normal(be, maps, lines, 0.1f), x),
                              test::apply_forward(*composed_normal(be, maps, lines, 0.1f), x)),
                  2e-6);
    }
}

}  // namespace
}  // namespace larmor
