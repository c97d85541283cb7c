// SPIRiT calibration (core/coils/spirit.h) and its image-space consistency operator
// (core/linops/spirit.h) against references they do not share code with: the shared-factorisation
// kernels against C separate double-precision solves (LAPACKE_zposv) of the reduced normal equations
// and against the library's own per-coil solve on both backends; the image-space operator against the
// k-space convolution written out here; adjointness and CPU = CUDA; scale and error handling.
#include <gtest/gtest.h>

#include "core/dense/lapacke_cpp.h"

#include <cmath>
#include <complex>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/coils/calibration_matrix.h"
#include "core/coils/spirit.h"
#include "core/linops/spirit.h"
#include "core/recon/cg_spirit.h"
#include "tests/support/backends.h"
#include "tests/support/operator_checks.h"
#include "tests/support/refusal_text.h"
#include "tools/phantom/phantom.h"

namespace larmor {
namespace {

using cdouble = std::complex<double>;

constexpr size_t kN = 128, kAcs = 24;

// larmor-phantom's analytic k-space, 128^2, [RO, E1, C] on the host.
CArray phantom_kspace(int coils) {
    phantom::PhantomSpec s;
    s.nx = s.ny = int(kN);
    s.coils = coils;
    s.fov_mm[0] = s.fov_mm[1] = 240.0;
    s.ro_oversampling = 1;
    const phantom::Phantom ph(s);
    const std::vector<std::complex<float>> k = ph.kspace_all();
    CArray a = CArray::host({kN, kN, size_t(coils)});
    std::copy(k.begin(), k.end(), a.data());
    return a;
}

CArray centre_block(const CArray& k) {
    return coils::calibration_block(k.reshaped({kN, kN, 1, k.shape()[2]}), kN / 2 - kAcs / 2, kN / 2 + kAcs / 2, kAcs,
                                    kAcs);
}

double relative_difference(const std::vector<cfloat>& a, const std::vector<cdouble>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        num += std::norm(cdouble(a[i]) - b[i]);
        den += std::norm(b[i]);
    }
    return std::sqrt(num / den);
}

class Spirit : public test::BackendTest {};

// Each target coil's kernel solved on its own, in double: the reduced normal equations
// (A_i^H A_i + eps I) g = A_i^H a_i with the centre column left out, as Lustig & Pauly write the fit.
TEST_P(Spirit, SharedFactorisationEqualsPerCoilSolvesInDouble) {
    const size_t nc = 8;
    const CArray block = centre_block(phantom_kspace(int(nc)));
    coils::SpiritSettings s;
    s.kernel = 5;
    const coils::SpiritKernels shared = coils::spirit_kernels(*be, block, s);
    const coils::SpiritKernels per_coil = coils::spirit_kernels_per_coil(*be, block, s);

    double peak = 0;
    for (size_t i = 0; i < block.size(); ++i) peak = std::max(peak, double(std::abs(block.data()[i])));
    const size_t k = 5, w = kAcs - k + 1, rows = w * w, n = k * k * nc;
    std::vector<cdouble> a(rows * n);  // column-major, written from the definition of a window
    for (size_t c = 0; c < nc; ++c)
        for (size_t oy = 0; oy < k; ++oy)
            for (size_t ox = 0; ox < k; ++ox)
                for (size_t y = 0; y < w; ++y)
                    for (size_t x = 0; x < w; ++x)
                        a[(x + w * y) + rows * (ox + k * (oy + k * c))] =
                            cdouble(block.data()[(x + ox) + kAcs * ((y + oy) + kAcs * c)]) / peak;
    double trace = 0;
    for (size_t q = 0; q < n; ++q)
        for (size_t r = 0; r < rows; ++r) trace += std::norm(a[r + rows * q]);
    const double eps = double(s.lambda) * trace / double(n);
    std::vector<cdouble> reference(n * nc, 0.0);
    for (size_t i = 0; i < nc; ++i) {
        const size_t j = k / 2 + k * (k / 2) + k * k * i, nr = n - 1;
        auto col = [&](size_t q) { return q < j ? q : q + 1; };
        std::vector<cdouble> m(nr * nr, 0.0), rhs(nr, 0.0);
        for (size_t q = 0; q < nr; ++q) {
            for (size_t p = 0; p < nr; ++p)
                for (size_t r = 0; r < rows; ++r) m[p + nr * q] += std::conj(a[r + rows * col(p)]) * a[r + rows * col(q)];
            m[q + nr * q] += eps;
            for (size_t r = 0; r < rows; ++r) rhs[q] += std::conj(a[r + rows * col(q)]) * a[r + rows * j];
        }
        ASSERT_EQ(LAPACKE_zposv(LAPACK_COL_MAJOR, 'L', lapack_int(nr), 1, reinterpret_cast<lapack_complex_double*>(m.data()),
                                lapack_int(nr), reinterpret_cast<lapack_complex_double*>(rhs.data()), lapack_int(nr)),
                  0);
        for (size_t q = 0; q < nr; ++q) reference[col(q) + n * i] = rhs[q];
    }
    ASSERT_EQ(shared.weights.size(), n * nc);
    const double d_shared = relative_difference(shared.weights, reference);
    const double d_per_coil = relative_difference(per_coil.weights, reference);
    std::vector<cdouble> per_coil_d(per_coil.weights.begin(), per_coil.weights.end());
    const double d_between = relative_difference(shared.weights, per_coil_d);
    std::printf("[ spirit ] %s, 8 coils, 5 x 5 kernel, 24 x 24 block: against the double per-coil solves: shared "
                "factorisation %.2e, per-coil (float) %.2e; between them %.2e; fit residual coil 0 %.4f\n",
                device_name(be->device()), d_shared, d_per_coil, d_between,
                shared.fit_residual.at(0));
    EXPECT_LT(d_shared, 2e-3);
    EXPECT_LT(d_between, 2e-3);
    for (size_t i = 0; i < nc; ++i) {
        EXPECT_EQ(shared.weights[k / 2 + k * (k / 2) + k * k * (i + nc * i)], cfloat(0.f, 0.f)) << "coil " << i;
        EXPECT_NEAR(shared.fit_residual[i], per_coil.fit_residual[i], 1e-4);
        EXPECT_LT(shared.fit_residual[i], 0.1) << "a smooth phantom is predicted from its neighbours";
    }
}

// G(r) applied to the fully sampled coil images equals the kernels' convolution in k-space: the
// image-space form's flip, centring and sqrt(N) are right, and the phantom's own k-space is nearly
// SPIRiT-consistent (x = G x).
TEST_P(Spirit, ImageSpaceOperatorIsTheKspaceConvolution) {
    const size_t nc = 6, k = 7;
    const CArray kspace = phantom_kspace(int(nc));
    coils::SpiritSettings s;
    s.kernel = int(k);
    const coils::SpiritKernels kern = coils::spirit_kernels(*be, centre_block(kspace), s);
    const CArray g = coils::spirit_image_kernels(*be, kern, kN, kN);
    ASSERT_EQ(g.shape(), Shape({kN, kN, nc, nc}));
    const LinOp op = spirit_consistency(be, g);

    CArray images = be->empty({kN, kN, nc}), y = be->empty({kN, kN, nc}), ky = be->empty({kN, kN, nc});
    be->fft(be->to_device(kspace), images, 0b011u, FFTDirection::Inverse);
    op->forward(images, y);
    be->fft(y, ky, 0b011u, FFTDirection::Forward);
    const CArray got = be->to_host(ky);

    // (G - I) x in k-space, written out: sum_j sum_o g_ij(o) x_j(p + o) - x_i(p), away from the edges
    // (where the image-space product wraps around).
    const size_t h = k / 2;
    double num = 0, den = 0, residual = 0, signal = 0;
    for (size_t i = 0; i < nc; ++i)
        for (size_t py = h; py + h < kN; ++py)
            for (size_t px = h; px + h < kN; ++px) {
                cdouble sum = 0;
                for (size_t j = 0; j < nc; ++j)
                    for (size_t oy = 0; oy < k; ++oy)
                        for (size_t ox = 0; ox < k; ++ox)
                            sum += cdouble(kern.weights[ox + k * (oy + k * (j + nc * i))]) *
                                   cdouble(kspace.data()[(px + ox - h) + kN * ((py + oy - h) + kN * j)]);
                const cdouble x = kspace.data()[px + kN * (py + kN * i)];
                const cdouble want = sum - x;
                num += std::norm(cdouble(got.data()[px + kN * (py + kN * i)]) - want);
                den += std::norm(want);
                residual += std::norm(want);
                signal += std::norm(x);
            }
    const double err = std::sqrt(num / den), consistency = std::sqrt(residual / signal);
    std::printf("[ spirit ] %s, 6 coils, 7 x 7 kernel: image-space (G - I) x against the k-space convolution %.2e; "
                "||(G - I) x|| / ||x|| of the fully sampled phantom %.4f\n",
                device_name(be->device()), err, consistency);
    EXPECT_LT(err, 1e-3);
    EXPECT_LT(consistency, 0.05);
}

TEST_P(Spirit, ConsistencyOperatorIsAdjointAndMatchesTheCpu) {
    const size_t nc = 4, n1 = 12, n2 = 10;
    auto make = [&](std::shared_ptr<Backend> b) {
        std::mt19937 gen(3);
        std::normal_distribution<float> nd;
        CArray g = CArray::host({n1, n2, nc, nc});
        for (size_t i = 0; i < g.size(); ++i) g.data()[i] = cfloat(nd(gen), nd(gen));
        return spirit_consistency(std::move(b), g);
    };
    const LinOp op = make(be);
    EXPECT_EQ(op->ishape(), Shape({n1, n2, nc}));
    test::expect_adjoint(*op, 1e-5);
    test::expect_same_on_cpu(be, make, 1e-5);
}

// The fit does not depend on the data's scale: raw scanner units from 1e-12 to 1e14 give one kernel (to
// the float rounding of the scaled samples: 6.5e-5 measured; the solve itself is good to 4e-4).
TEST_P(Spirit, KernelsDoNotDependOnTheDataScale) {
    const CArray block = centre_block(phantom_kspace(4));
    const coils::SpiritKernels ref = coils::spirit_kernels(*be, block, {});
    for (double scale : {1e-12, 1e14}) {
        CArray scaled = CArray::host(block.shape());
        for (size_t i = 0; i < block.size(); ++i) scaled.data()[i] = cfloat(cdouble(block.data()[i]) * scale);
        const coils::SpiritKernels k = coils::spirit_kernels(*be, scaled, {});
        std::vector<cdouble> r(ref.weights.begin(), ref.weights.end());
        EXPECT_LT(relative_difference(k.weights, r), 5e-4) << scale;
    }
}

// CG-SPIRiT (core/recon/cg_spirit.h) on the noiseless phantom, 128^2, 8 coils, uniform R = 3 with the 24
// central lines: the root sum of squares of its coil images against the fully sampled one's.
TEST_P(Spirit, CgSpiritUnfoldsAnUndersampledPhantom) {
    const size_t nc = 8, r = 3;
    const CArray full = phantom_kspace(int(nc));
    std::vector<uint8_t> sampled(kN, 0);
    for (size_t l = 0; l < kN; ++l) sampled[l] = l % r == 0 || (l >= kN / 2 - kAcs / 2 && l < kN / 2 + kAcs / 2);
    CArray under = CArray::host({kN, kN, 1, nc});
    for (size_t c = 0; c < nc; ++c)
        for (size_t l = 0; l < kN; ++l)
            for (size_t x = 0; x < kN; ++x)
                under.data()[x + kN * (l + kN * c)] = sampled[l] ? full.data()[x + kN * (l + kN * c)] : cfloat(0.f, 0.f);
    const coils::SpiritKernels kern = coils::spirit_kernels(*be, centre_block(full), {});
    const CArray g = coils::spirit_image_kernels(*be, kern, kN, kN);
    CGOptions o;
    o.max_iterations = 60;
    CgSpirit p = cg_spirit(be, be->to_device(under), sampled, g, 1.f, o);
    while (!p.solver->done()) p.solver->update();

    auto rss = [&](const CArray& kspace_or_images, bool transform) {
        CArray img = be->empty({kN, kN, 1, nc});
        if (transform)
            be->fft(be->to_device(kspace_or_images), img, 0b011u, FFTDirection::Inverse);
        else
            be->copy(kspace_or_images, img);
        const CArray h = be->to_host(img);
        std::vector<double> out(kN * kN, 0.0);
        for (size_t c = 0; c < nc; ++c)
            for (size_t i = 0; i < kN * kN; ++i) out[i] += std::norm(h.data()[i + kN * kN * c]);
        for (double& v : out) v = std::sqrt(v);
        return out;
    };
    const std::vector<double> truth = rss(full.reshaped({kN, kN, 1, nc}), true), zero_filled = rss(under, true),
                              spirit = rss(p.images, false);
    auto nrmse = [&](const std::vector<double>& a) {
        double num = 0, den = 0;
        for (size_t i = 0; i < a.size(); ++i) num += (a[i] - truth[i]) * (a[i] - truth[i]), den += truth[i] * truth[i];
        return std::sqrt(num / den);
    };
    std::printf("[ spirit ] %s, CG-SPIRiT, 128^2, 8 coils, R=3 + 24 ACS, 5 x 5 kernel, lambda 1, %d iterations: NRMSE "
                "against the fully sampled RSS %.4f (zero-filled %.4f)\n",
                device_name(be->device()), p.solver->iteration(), nrmse(spirit), nrmse(zero_filled));
    EXPECT_LT(nrmse(spirit), 0.05);
    EXPECT_LT(nrmse(spirit), 0.2 * nrmse(zero_filled));
}

// 3D kernels (core/coils/spirit.h, spirit_image_kernels_3d) on a fully sampled 3D phantom: the shared
// factorisation equals the per-coil solves on a 3D block; the device cut of the centred block gives the
// host cut's G; G applied in image space is the 3D k-space convolution, and the phantom is consistent.
TEST_P(Spirit, ThreeDimensionalKernelsKeepAFullySampledVolume) {
    phantom::PhantomSpec s;
    s.dims = 3;
    s.nx = s.ny = 48;
    s.nz = 24;
    s.coils = 6;
    s.fov_mm[0] = s.fov_mm[1] = 240.0;
    s.fov_mm[2] = 120.0;
    s.ro_oversampling = 1;
    const std::vector<std::complex<float>> k = phantom::Phantom(s).kspace_all();
    const Shape shape{48, 48, 24, 6};
    CArray host = CArray::host(shape);
    std::copy(k.begin(), k.end(), host.data());
    // A 24 x 24 x 16 block: 20 x 20 x 12 = 4800 windows for 125 x 6 = 750 unknowns.
    const coils::SpiritSettings ks;
    const CArray block = coils::calibration_block_3d(host, 12, 36, 4, 20, 24, 24, 16);
    const coils::SpiritKernels shared = coils::spirit_kernels(*be, block, ks),
                               per_coil = coils::spirit_kernels_per_coil(*be, block, ks);
    ASSERT_EQ(shared.dims, 3);
    double num = 0, den = 0;
    for (size_t i = 0; i < shared.weights.size(); ++i)
        num += std::norm(shared.weights[i] - per_coil.weights[i]), den += std::norm(per_coil.weights[i]);
    EXPECT_LT(std::sqrt(num / den), 1e-3);
    for (double r : shared.fit_residual) EXPECT_LT(r, 0.1);

    coils::SpiritSettings light;
    light.lambda = 1e-3f;
    const coils::SpiritKernels lk = coils::spirit_kernels(*be, block, light);
    const CArray g = coils::spirit_image_kernels_3d(*be, be->to_device(host), 12, 36, 4, 20, 24, light);
    ASSERT_EQ(g.shape(), Shape({48, 48, 24, 6, 6}));
    // The same kernels from the host-cut block give the same G.
    const CArray g_host = coils::spirit_image_kernels(*be, lk, 48, 48, 24);
    const std::vector<cdouble> a = test::download(*be, g), b = test::download(*be, g_host);
    num = den = 0;
    for (size_t i = 0; i < a.size(); ++i) num += std::norm(a[i] - b[i]), den += std::norm(b[i]);
    EXPECT_LT(std::sqrt(num / den), 1e-5);

    // (G - I) x of the coil images, back in k-space, against the 3D convolution written out, away from
    // the edges (where the image-space product wraps around); and how consistent the phantom is there.
    CArray x = be->empty(shape), r = be->empty(shape);
    be->fft(be->to_device(host), x, 0b111u, FFTDirection::Inverse);
    spirit_consistency(be, g)->forward(x, r);
    be->fft(r, r, 0b111u, FFTDirection::Forward);
    const CArray got = be->to_host(r);
    const size_t kw = 5, h = kw / 2, nx = 48, ny = 48, nz = 24, nc = 6;
    double err = 0, ref = 0, signal = 0;
    for (size_t i = 0; i < nc; ++i)
        for (size_t pz = h; pz + h < nz; ++pz)
            for (size_t py = h; py + h < ny; ++py)
                for (size_t px = h; px + h < nx; ++px) {
                    cdouble sum = 0;
                    for (size_t j = 0; j < nc; ++j)
                        for (size_t o = 0; o < kw * kw * kw; ++o) {
                            const size_t ox = o % kw, oy = (o / kw) % kw, oz = o / (kw * kw);
                            sum += cdouble(lk.weights[o + kw * kw * kw * (j + nc * i)]) *
                                   cdouble(host.data()[(px + ox - h) + nx * ((py + oy - h) + ny * ((pz + oz - h) + nz * j))]);
                        }
                    const size_t at = px + nx * (py + ny * (pz + nz * i));
                    const cdouble want = sum - cdouble(host.data()[at]);
                    err += std::norm(cdouble(got.data()[at]) - want);
                    ref += std::norm(want);
                    signal += std::norm(cdouble(host.data()[at]));
                }
    std::printf("[ spirit ] %s, 3D 48x48x24, 6 coils, 5^3 kernels: image-space (G - I) x against the k-space "
                "convolution %.2e; ||(G - I) x|| / ||x|| of the fully sampled phantom %.4f\n",
                device_name(be->device()), std::sqrt(err / ref), std::sqrt(ref / signal));
    EXPECT_LT(std::sqrt(err / ref), 1e-3);
    EXPECT_LT(std::sqrt(ref / signal), 0.05);
}

LARMOR_INSTANTIATE_BACKEND_TEST(Spirit);

TEST(SpiritCalibration, UnusableSettingsAndBlocksAreRefusedByName) {
    auto cpu = make_cpu_backend();
    auto message = [](auto&& f) { return test::refusal_text<std::exception>(f); };
    const CArray block = centre_block(phantom_kspace(2));
    coils::SpiritSettings s;
    s.kernel = 4;
    EXPECT_EQ(message([&] { coils::spirit_kernels(*cpu, block, s); }), "SPIRiT: kernel 4 is not an odd width in 3..15");
    s = {};
    s.lambda = 0.f;
    EXPECT_NE(message([&] { coils::spirit_kernels(*cpu, block, s); }).find("lambda 0.0"), std::string::npos);
    s = {};
    s.kernel = 7;
    CArray small = CArray::host({6, 24, 2});
    std::fill(small.data(), small.data() + small.size(), cfloat(1.f, 0.f));
    EXPECT_EQ(message([&] { coils::spirit_kernels(*cpu, small, s); }),
              "SPIRiT: a calibration block [6x24x2] is smaller than the kernel of width 7 along axis 0");
    CArray zero = CArray::host(block.shape());
    std::fill(zero.data(), zero.data() + zero.size(), cfloat(0.f, 0.f));
    EXPECT_THROW(coils::spirit_kernels(*cpu, zero, {}), coils::SpiritError);
    CArray bad = CArray::host(block.shape());
    std::copy(block.data(), block.data() + block.size(), bad.data());
    bad.data()[5] = cfloat(std::nanf(""), 0.f);
    EXPECT_NE(message([&] { coils::spirit_kernels(*cpu, bad, {}); }).find("not finite"), std::string::npos);
    EXPECT_NE(message([&] { spirit_consistency(cpu, CArray::host({4, 4, 3, 2})); }).find("[4x4x3x2]"),
              std::string::npos);
}

}  // namespace
}  // namespace larmor
