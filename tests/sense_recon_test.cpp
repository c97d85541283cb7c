// Cartesian CG-SENSE on the analytic phantom (tools/phantom: exact k-space of the Shepp-Logan object
// through plane-wave coils): coil maps from the fully sampled centre by Walsh's method, then CG on
// the regularised normal equations. Two references:
//  * the true object as the array sees it, rho(x) sqrt(sum_c |S_c(x)|^2) at the pixel centres, which
//    both an optimal (SENSE) and a root-sum-of-squares combination estimate. A finite k-space cannot
//    reach it (Gibbs ringing at the ellipses' edges): even fully sampled data give NRMSE 0.22 at 128^2,
//    the floor every method shares;
//  * the fully sampled root-sum-of-squares image, the object at the acquired resolution: here an
//    undersampled reconstruction shows what it loses (aliasing, noise) and nothing else.
// NRMSE = ||a |x| - t|| / ||t|| with the least-squares scale a (ghosts and blur cost, a global scale
// does not).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "core/coils/calibration.h"
#include "core/coils/coil_combination.h"
#include "core/iter/alg.h"
#include "gadgets/sense/cartesian_sense.h"
#include "tests/support/backends.h"
#include "tests/support/operator_checks.h"
#include "tests/support/reference_dft.h"
#include "tools/phantom/phantom.h"

namespace larmor {
namespace {

using test::cdouble;

struct Case {
    int coils;
    int accel;
};

struct Data {
    phantom::PhantomSpec spec;
    CArray full;                   // host [N, N, 1, C], every line
    CArray kspace;                 // host [N, N, 1, C], unsampled lines zero
    std::vector<uint8_t> sampled;  // per e1
    std::vector<double> truth;     // rho * rss(S), N x N
};

Data make_data(const Case& c, size_t n) {
    Data d;
    phantom::PhantomSpec& s = d.spec;
    s.nx = s.ny = int(n);
    s.coils = c.coils;
    s.ro_oversampling = 1;
    s.sampling = phantom::Sampling::uniform;
    s.accel_y = c.accel;
    s.acs_lines = 24;
    s.fov_mm[0] = s.fov_mm[1] = 240.0;
    const phantom::Phantom ph(s);
    const auto k = ph.kspace_all(0);
    d.sampled.assign(n, 0);
    for (const auto& pe : ph.sampling()) d.sampled[size_t(pe.e1)] = 1;
    d.kspace = CArray::host({n, n, 1, size_t(c.coils)});
    d.full = CArray::host(d.kspace.shape());
    std::copy(k.begin(), k.end(), d.full.data());
    for (size_t ch = 0; ch < size_t(c.coils); ++ch)
        for (size_t y = 0; y < n; ++y)
            if (d.sampled[y])
                for (size_t x = 0; x < n; ++x) d.kspace.data()[(ch * n + y) * n + x] = k[(ch * n + y) * n + x];
    d.truth.assign(n * n, 0.0);
    for (int ch = 0; ch < c.coils; ++ch) {
        const auto ci = ph.coil_image(ch, 0, 1);
        for (size_t p = 0; p < n * n; ++p) d.truth[p] += std::norm(ci[p]);
    }
    for (double& v : d.truth) v = std::sqrt(v);
    return d;
}

double nrmse(const std::vector<cdouble>& img, const std::vector<double>& truth) {
    double xt = 0, xx = 0, tt = 0;
    for (size_t i = 0; i < truth.size(); ++i) {
        const double m = std::abs(img[i]);
        xt += m * truth[i];
        xx += m * m;
        tt += truth[i] * truth[i];
    }
    const double a = xx > 0 ? xt / xx : 0;
    double e = 0;
    for (size_t i = 0; i < truth.size(); ++i) e += std::pow(a * std::abs(img[i]) - truth[i], 2);
    return std::sqrt(e / tt);
}

std::vector<double> magnitude(const std::vector<cdouble>& x) {
    std::vector<double> m(x.size());
    for (size_t i = 0; i < x.size(); ++i) m[i] = std::abs(x[i]);
    return m;
}

class SenseRecon : public test::BackendTest {
protected:
    // Root-sum-of-squares image of k-space [N, N, 1, C] (host).
    std::vector<cdouble> rss(const CArray& kspace) {
        const CArray k = be->to_device(kspace);
        CArray coils = be->empty(k.shape());
        be->fft(k, coils, 3u, FFTDirection::Inverse);
        CArray out = be->empty({k.shape()[0], k.shape()[1], 1});
        coils::rss_last_axis(*be, coils, out);
        return test::download(*be, out);
    }

    // CG-SENSE image [N, N] and zero-filled RSS image [N, N] of one case.
    std::pair<std::vector<cdouble>, std::vector<cdouble>> reconstruct(const Data& d, int* iterations = nullptr) {
        const CArray k = be->to_device(d.kspace);
        const size_t n = d.kspace.shape()[0];
        const coils::CalibrationRegion region = coils::fully_sampled_centre(d.sampled, n, 1, 8);
        const CArray maps = coils::sense_maps(*be, coils::calibration_images(*be, k, region), 7, 4);
        CartesianSense p = cartesian_sense(be, k, d.sampled, maps, 1e-3f, {30, 1e-6});
        const int it = run(*p.solver);
        if (iterations) *iterations = it;
        return {test::download(*be, p.image), rss(d.kspace)};
    }
};
LARMOR_INSTANTIATE_BACKEND_TEST(SenseRecon);

TEST_P(SenseRecon, BeatsZeroFilledRssOnThePhantom) {
    for (const Case c : {Case{8, 2}, Case{8, 4}, Case{32, 2}, Case{32, 4}}) {
        const Data d = make_data(c, 128);
        int iterations = 0;
        const auto [sense_img, zf] = reconstruct(d, &iterations);
        const std::vector<double> full = magnitude(rss(d.full));
        const double floor = nrmse(rss(d.full), d.truth);
        const double e_sense = nrmse(sense_img, d.truth), e_zf = nrmse(zf, d.truth);
        const double f_sense = nrmse(sense_img, full), f_zf = nrmse(zf, full);
        std::printf("[ phantom  ] %s %2d coils R=%d, %d iterations: NRMSE vs object: CG-SENSE %.4f, zero-filled RSS "
                    "%.4f (fully sampled %.4f); vs fully sampled: CG-SENSE %.4f, zero-filled RSS %.4f\n",
                    device_name(GetParam()), c.coils, c.accel, iterations, e_sense, e_zf, floor, f_sense, f_zf);
        EXPECT_LT(e_sense, floor + 0.25 * (e_zf - floor)) << c.coils << " coils R=" << c.accel;
        EXPECT_LT(f_sense, 0.2 * f_zf) << c.coils << " coils R=" << c.accel;
    }
}

TEST_P(SenseRecon, CudaMatchesCpu) {
    if (GetParam() == Device::Cpu) GTEST_SKIP() << "compares CUDA with the CPU";
    const Data d = make_data({8, 4}, 128);
    const auto gpu = reconstruct(d).first;
    auto cpu_be = make_cpu_backend();
    std::swap(be, cpu_be);
    const auto cpu = reconstruct(d).first;
    // 30 CG iterations carry the two backends' different float rounding (reduction orders) along.
    EXPECT_LT(test::relative_error(gpu, cpu), 1e-3);
}

TEST(SenseCalibration, FindsTheFullySampledCentre) {
    std::vector<uint8_t> s(64, 0);
    for (size_t y = 0; y < 64; y += 4) s[y] = 1;
    for (size_t y = 20; y < 44; ++y) s[y] = 1;
    const coils::CalibrationRegion r = coils::fully_sampled_centre(s, 64, 1, 8);
    EXPECT_EQ(r.e1_lo, 20u);
    EXPECT_EQ(r.e1_hi, 45u);  // line 44 is also a lattice line
    EXPECT_THROW(coils::fully_sampled_centre(s, 64, 1, 30), std::runtime_error);
    s[32] = 0;
    EXPECT_THROW(coils::fully_sampled_centre(s, 64, 1, 1), std::runtime_error);
}

}  // namespace
}  // namespace larmor
