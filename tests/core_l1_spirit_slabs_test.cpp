// l1-SPIRiT split along the readout (core/recon/l1_spirit_slabs.h): the slab plan; each slab's G equals
// the same rows of the whole volume's G; and with the device count forced (several backends of one
// kind, on the CPU and on one GPU) every split gives the images and residual history of one backend
// solving the volume, which in turn equals l1_spirit on the whole G.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/coils/spirit.h"
#include "core/recon/l1_spirit.h"
#include "core/recon/l1_spirit_slabs.h"
#include "tests/support/backends.h"
#include "tests/support/refusal_text.h"
#include "tests/support/operator_checks.h"
#include "tools/phantom/phantom.h"

namespace larmor {
namespace {

using test::cdouble;

constexpr size_t kRo = 32, kE1 = 32, kE2 = 16, kCoils = 4;

// A 3D phantom on a Poisson-disc (E1, E2) pattern with a 12 x 12 calibration block, the readout
// transformed (hybrid space), and its 5^3 kernels.
struct Volume {
    CArray hybrid;  // host [RO, E1, E2, C]
    RArray mask;    // host [RO, E1, E2]
    coils::SpiritKernels kernels;
};

Volume volume(Backend& be) {
    phantom::PhantomSpec s;
    s.dims = 3;
    s.nx = int(kRo);
    s.ny = int(kE1);
    s.nz = int(kE2);
    s.coils = int(kCoils);
    s.fov_mm[0] = s.fov_mm[1] = 240.0;
    s.fov_mm[2] = 120.0;
    s.ro_oversampling = 1;
    s.sampling = phantom::Sampling::poisson;
    s.accel_y = s.accel_z = 2;
    s.acs_lines = 12;
    s.seed = 3;
    const std::vector<std::complex<float>> k = phantom::Phantom(s).kspace_all();
    Volume v;
    v.mask = RArray::host({kRo, kE1, kE2});
    for (const phantom::PhaseEncode& e : phantom::sampling_pattern(s))
        if (e.imaging || e.calibration)
            for (size_t x = 0; x < kRo; ++x) v.mask.data()[x + kRo * (size_t(e.e1) + kE1 * size_t(e.e2))] = 1.f;
    CArray kspace = CArray::host({kRo, kE1, kE2, kCoils});
    for (size_t i = 0; i < kspace.size(); ++i) kspace.data()[i] = v.mask.data()[i % v.mask.size()] * k[i];
    const CArray dk = be.to_device(kspace);
    v.kernels = coils::spirit_kernels_3d(be, dk, 10, 22, 2, 14, 24, coils::SpiritSettings{});
    CArray hybrid = be.empty(kspace.shape());
    be.fft(dk, hybrid, 0b001u, FFTDirection::Inverse);
    v.hybrid = be.to_host(hybrid);
    return v;
}

double relative_difference(const std::vector<cdouble>& a, const std::vector<cdouble>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) num += std::norm(a[i] - b[i]), den += std::norm(b[i]);
    return std::sqrt(num / den);
}

TEST(L1SpiritSlabPlan, CutsEvenlyOrDealsFixedSlabsInTurn) {
    const std::vector<Slab> even = plan_slabs(10, 3);
    ASSERT_EQ(even.size(), 3u);
    EXPECT_EQ(even[0].first, 0u);
    EXPECT_EQ(even[0].count, 4u);
    EXPECT_EQ(even[1].first, 4u);
    EXPECT_EQ(even[1].count, 3u);
    EXPECT_EQ(even[2].first, 7u);
    EXPECT_EQ(even[2].count, 3u);
    EXPECT_EQ(even[2].backend, 2u);
    EXPECT_EQ(plan_slabs(2, 5).size(), 2u);  // never an empty slab
    const std::vector<Slab> dealt = plan_slabs(10, 2, 3);
    ASSERT_EQ(dealt.size(), 4u);
    EXPECT_EQ(dealt[3].first, 9u);
    EXPECT_EQ(dealt[3].count, 1u);
    EXPECT_EQ(dealt[2].backend, 0u);
    EXPECT_EQ(dealt[3].backend, 1u);
    EXPECT_THROW(plan_slabs(10, 0), std::invalid_argument);
    EXPECT_THROW(plan_slabs(0, 2), std::invalid_argument);
}

class SlabSplit : public test::BackendTest {};

TEST_P(SlabSplit, SlabKernelsAreTheRowsOfTheWhole) {
    const Volume v = volume(*be);
    const std::vector<cdouble> whole = test::download(*be, coils::spirit_image_kernels(*be, v.kernels, kRo, kE1, kE2));
    for (const auto& [first, count] : std::vector<std::pair<size_t, size_t>>{{0, 32}, {0, 7}, {5, 9}, {31, 1}}) {
        const CArray g = coils::spirit_image_kernels(*be, v.kernels, kRo, kE1, kE2, first, count);
        ASSERT_EQ(g.shape(), Shape({count, kE1, kE2, kCoils, kCoils}));
        const std::vector<cdouble> slab = test::download(*be, g);
        std::vector<cdouble> rows(slab.size());
        for (size_t l = 0; l < slab.size() / count; ++l)
            for (size_t x = 0; x < count; ++x) rows[x + count * l] = whole[first + x + kRo * l];
        EXPECT_LT(relative_difference(slab, rows), 1e-5) << first << " + " << count;
    }
    EXPECT_THROW(coils::spirit_image_kernels(*be, v.kernels, kRo, kE1, kE2, 30, 3), std::invalid_argument);
    EXPECT_THROW(coils::spirit_image_kernels(*be, v.kernels, kRo, kE1, kE2, 0, 0), std::invalid_argument);
}

TEST_P(SlabSplit, AnyForcedDeviceCountGivesTheImagesOfOneBackend) {
    const Volume v = volume(*be);
    L1SpiritSettings s;
    s.iterations = 12;
    // The reference: l1_spirit on the whole G, with the threshold the split computes.
    L1SpiritSlabs one({be}, v.hybrid, v.mask, v.kernels, s);
    run(one);
    const std::vector<cdouble> want = test::download(*be, one.images(*be));
    L1SpiritSettings fixed = s;
    fixed.threshold = one.threshold();
    L1Spirit direct = l1_spirit(be, be->to_device(v.hybrid), v.mask,
                                coils::spirit_image_kernels(*be, v.kernels, kRo, kE1, kE2), fixed);
    run(*direct.solver);
    EXPECT_LT(relative_difference(test::download(*be, direct.images), want), 1e-6);

    // Forced device counts: backends of the same kind, as a multi-GPU host would give one per device.
    std::vector<std::shared_ptr<Backend>> three = {be, test::backend_for(GetParam()), test::backend_for(GetParam())};
    for (const auto& [devices, per_slab] : std::vector<std::pair<size_t, size_t>>{{2, 0}, {3, 0}, {3, 5}}) {
        const std::vector<std::shared_ptr<Backend>> backends(three.begin(), three.begin() + long(devices));
        L1SpiritSlabs split(backends, v.hybrid, v.mask, v.kernels, s, per_slab);
        EXPECT_EQ(split.slabs().size(), per_slab ? (kRo + per_slab - 1) / per_slab : devices);
        EXPECT_FLOAT_EQ(split.threshold(), one.threshold());
        run(split);
        const double d = relative_difference(test::download(*be, split.images(*be)), want);
        std::printf("[ slabs ] %s, %zu backends, %zu slabs: images against one backend %.2e\n",
                    device_name(be->device()), devices, split.slabs().size(), d);
        EXPECT_LT(d, 1e-5);
        ASSERT_EQ(split.residuals().size(), one.residuals().size());
        for (size_t k = 1; k < one.residuals().size(); ++k)
            EXPECT_NEAR(split.residuals()[k], one.residuals()[k], 1e-4 * one.residuals()[k] + 1e-7) << k;
    }

    // The stopping rule reads the whole volume's change: a split stops where one backend stops.
    L1SpiritSettings tol = s;
    tol.iterations = 200;
    tol.tolerance = 1.5e-2;  // reached near iteration 7 here
    L1SpiritSlabs whole({be}, v.hybrid, v.mask, v.kernels, tol);
    L1SpiritSlabs split(three, v.hybrid, v.mask, v.kernels, tol, 3);
    EXPECT_EQ(run(split), run(whole));
    EXPECT_LT(whole.iteration(), 20);
}

TEST_P(SlabSplit, ShapesThatDoNotFitAreRefusedByName) {
    const Volume v = volume(*be);
    const L1SpiritSettings s;
    auto message = [](auto&& f) { return test::refusal_text(f); };
    EXPECT_NE(message([&] { L1SpiritSlabs({be, nullptr}, v.hybrid, v.mask, v.kernels, s); }).find("backend 1 is null"),
              std::string::npos);
    EXPECT_NE(message([&] { L1SpiritSlabs({be}, v.hybrid, RArray::host({kRo, kE1, 8}), v.kernels, s); })
                  .find("mask [32x32x8]"),
              std::string::npos);
    coils::SpiritKernels two = v.kernels;
    two.dims = 2;
    EXPECT_NE(message([&] { L1SpiritSlabs({be}, v.hybrid, v.mask, two, s); }).find("2D kernels"), std::string::npos);
    EXPECT_NE(message([&] { L1SpiritSlabs({}, v.hybrid, v.mask, v.kernels, s); }).find("no backends"),
              std::string::npos);
}

LARMOR_INSTANTIATE_BACKEND_TEST(SlabSplit);

}  // namespace
}  // namespace larmor
