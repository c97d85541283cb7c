// Radial filtered backprojection (core/recon/radial_fbp.h) on every backend: fully sampled radial data
// of the analytic phantom (tools/phantom: the exact Fourier transform of object x coil at each k, no
// gridding or FFT of ours involved) against the phantom's own images, the geometry of a small disk,
// spokes that miss k = 0 (BART's half sample, gradient delays, asymmetric echoes) against centred
// ones, the trajectory checks, the fused RSS against the coil images, and CUDA against the CPU twin
// (centred and shifted spokes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/recon/radial_fbp.h"
#include "tests/support/backends.h"
#include "tools/phantom/phantom.h"

namespace larmor {
namespace {

using phantom::cdouble;
using phantom::Phantom;
using phantom::PhantomSpec;

constexpr double kPi = 3.14159265358979323846;

class RadialFbpTest : public test::BackendTest {};
LARMOR_INSTANTIATE_BACKEND_TEST(RadialFbpTest);

// coords [2, samples, spokes]: spoke j at angle theta(j), sample m at (m - samples/2) dk.
RArray radial_coords(size_t samples, size_t spokes, double dk, const std::function<double(size_t)>& theta) {
    RArray k = RArray::host({2, samples, spokes});
    for (size_t j = 0; j < spokes; ++j)
        for (size_t m = 0; m < samples; ++m) {
            const double r = (double(m) - double(samples / 2)) * dk;
            k.data()[2 * (j * samples + m)] = static_cast<float>(r * std::cos(theta(j)));
            k.data()[2 * (j * samples + m) + 1] = static_cast<float>(r * std::sin(theta(j)));
        }
    return k;
}

// Real spokes: spoke j at angle theta(j), k = 0 along it at the fractional sample centre(j), the line
// passing across(j) cycles/FOV beside k = 0 (towards n = (-sin, cos)): sample m at
// (m - centre) dk u + across n.
RArray offset_coords(size_t samples, size_t spokes, double dk, const std::function<double(size_t)>& theta,
                     const std::function<double(size_t)>& centre, const std::function<double(size_t)>& across) {
    RArray k = RArray::host({2, samples, spokes});
    for (size_t j = 0; j < spokes; ++j) {
        const double u0 = std::cos(theta(j)), u1 = std::sin(theta(j)), c = centre(j), e = across(j);
        for (size_t m = 0; m < samples; ++m) {
            const double r = (double(m) - c) * dk;
            k.data()[2 * (j * samples + m)] = static_cast<float>(r * u0 - e * u1);
            k.data()[2 * (j * samples + m) + 1] = static_cast<float>(r * u1 + e * u0);
        }
    }
    return k;
}

RArray uniform_coords(size_t samples, size_t spokes, double dk) {
    return radial_coords(samples, spokes, dk, [&](size_t j) { return kPi * double(j) / double(spokes); });
}

PhantomSpec spec2d(int nx, int ny, int coils) {
    PhantomSpec s;
    s.dims = 2;
    s.nx = nx;
    s.ny = ny;
    s.coils = coils;
    s.fov_mm[0] = 256.0 * nx / 64.0;  // 4 mm pixels on both axes
    s.fov_mm[1] = 256.0 * ny / 64.0;
    s.ro_oversampling = 1;
    return s;
}

// Radial samples of every coil, [samples, spokes, coils], scaled as the phantom's Cartesian k-space
// (kspace_scale(): the orthonormal inverse FFT of the full grid gives the object in image units).
// Coordinates in cycles/FOV become cycles/mm by dividing by the FOV.
CArray radial_data(const Phantom& ph, const RArray& k) {
    const size_t samples = k.shape()[1], spokes = k.shape()[2], coils = size_t(ph.spec().coils);
    CArray d = CArray::host({samples, spokes, coils});
    const double fx = ph.spec().fov_mm[0], fy = ph.spec().fov_mm[1];
    // The exact samples are the slow part of these tests: spread them over the machine's threads
    // (Phantom is read-only here).
    const size_t total = coils * samples * spokes;
    const size_t threads = std::max<size_t>(1, std::min<size_t>(16, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (size_t t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            for (size_t n = t; n < total; n += threads) {
                const size_t c = n / (samples * spokes), i = n % (samples * spokes);
                const cdouble v =
                    ph.kspace_scale() * ph.coil_ft(int(c), 0, k.data()[2 * i] / fx, k.data()[2 * i + 1] / fy);
                d.data()[n] = cfloat(float(v.real()), float(v.imag()));
            }
        });
    for (std::thread& th : pool) th.join();
    return d;
}

// RSS of the phantom's coil images (the exact object x sensitivity, 4x4 supersampled per pixel).
std::vector<double> true_rss(const Phantom& ph) {
    std::vector<double> rss(size_t(ph.spec().nx) * size_t(ph.spec().ny), 0.0);
    for (int c = 0; c < ph.spec().coils; ++c) {
        const std::vector<cdouble> im = ph.coil_image(c, 0, 4);
        for (size_t i = 0; i < rss.size(); ++i) rss[i] += std::norm(im[i]);
    }
    for (double& v : rss) v = std::sqrt(v);
    return rss;
}

std::vector<double> real_part(Backend& be, const CArray& a) {
    const CArray h = be.to_host(a);
    std::vector<double> r(h.size());
    for (size_t i = 0; i < h.size(); ++i) r[i] = h.data()[i].real();
    return r;
}

// ||a - b|| / ||b|| over the pixels where mask is true.
double nrmse(const std::vector<double>& a, const std::vector<double>& b, const std::vector<bool>& mask) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < b.size(); ++i)
        if (mask[i]) {
            num += (a[i] - b[i]) * (a[i] - b[i]);
            den += b[i] * b[i];
        }
    return std::sqrt(num / den);
}

// The phantom's reference images: the RSS of its coil images (object x sensitivity, 4x4
// supersampled), the object mask, and the interior: object pixels whose 5x5 neighbourhood has one
// intensity, away from the edges where any band-limited reconstruction rings or blurs.
struct Truth {
    std::vector<double> rss;
    std::vector<bool> object, interior;
};

Truth truth_of(const Phantom& ph) {
    const int nx = ph.spec().nx, ny = ph.spec().ny;
    Truth t;
    t.rss = true_rss(ph);
    const std::vector<double> obj = ph.image(0, 4);
    t.object.assign(obj.size(), false);
    t.interior.assign(obj.size(), false);
    for (int y = 0; y < ny; ++y)
        for (int x = 0; x < nx; ++x) {
            const size_t i = size_t(y) * size_t(nx) + size_t(x);
            t.object[i] = obj[i] > 0.0;
            bool flat = t.object[i];
            for (int dy = -2; dy <= 2 && flat; ++dy)
                for (int dx = -2; dx <= 2 && flat; ++dx) {
                    const int xx = x + dx, yy = y + dy;
                    flat = xx >= 0 && yy >= 0 && xx < nx && yy < ny && obj[size_t(yy) * size_t(nx) + size_t(xx)] == obj[i];
                }
            t.interior[i] = flat;
        }
    return t;
}

struct Recon {
    double err = 0.0;       // NRMSE over the object
    double interior = 0.0;  // NRMSE over the interior
    double ratio = 0.0;     // mean(FBP) / mean(truth) over the object
};

Recon fbp_phantom(const std::shared_ptr<Backend>& be, const Phantom& ph, const Truth& t, size_t spokes, RampWindow w) {
    const size_t nx = size_t(ph.spec().nx), ny = size_t(ph.spec().ny), samples = 2 * nx;  // dk = 0.5: 2x readout oversampling
    const RArray k = uniform_coords(samples, spokes, 0.5);
    auto fbp = RadialFbp::create(be, {nx, ny}, samples, spokes, size_t(ph.spec().coils), k, {w});
    const CArray data = be->to_device(radial_data(ph, k));
    CArray img = be->zeros({nx, ny});
    fbp->reconstruct_rss(data, img);
    const std::vector<double> rss = real_part(*be, img);
    Recon r;
    r.err = nrmse(rss, t.rss, t.object);
    r.interior = nrmse(rss, t.rss, t.interior);
    double s = 0.0, u = 0.0;
    for (size_t i = 0; i < rss.size(); ++i)
        if (t.object[i]) {
            s += rss[i];
            u += t.rss[i];
        }
    r.ratio = s / u;
    return r;
}

TEST_P(RadialFbpTest, PhantomMatchesObjectAndImprovesWithSpokes) {
    const Phantom ph(spec2d(64, 64, 2));
    const Truth t = truth_of(ph);
    // pi/2 * 64 ~ 101 spokes sample the edge of k-space at the Cartesian density (angular Nyquist).
    std::vector<Recon> r;
    for (size_t spokes : {16, 40, 101}) {
        r.push_back(fbp_phantom(be, ph, t, spokes, RampWindow::RamLak));
        std::printf("[ radial FBP ] 64^2 Shepp-Logan x 2 coils, Ram-Lak, %zu spokes: NRMSE %.4f over the object, "
                    "%.4f over its interior; mean FBP / mean truth %.4f\n",
                    spokes, r.back().err, r.back().interior, r.back().ratio);
    }
    // Over the object the error is mostly the edges (a band-limited image of a piecewise constant
    // one); in the interior, mostly the skull's ringing (the brain is 0.2 of the skull's intensity).
    EXPECT_LT(r[2].err, 0.2);
    EXPECT_LT(r[2].interior, 0.12);
    EXPECT_LT(r[1].interior, r[0].interior);
    EXPECT_LT(r[2].interior, r[1].interior);
    EXPECT_LT(r[2].err, r[0].err);
    // The constant: fully sampled data give the object in image units (the Cartesian scale).
    EXPECT_NEAR(r[2].ratio, 1.0, 0.02);
}

TEST_P(RadialFbpTest, EveryWindowReconstructs) {
    const Phantom ph(spec2d(64, 64, 1));
    const Truth t = truth_of(ph);
    double prev_err = 0.0, prev_interior = 1.0;
    for (RampWindow w : {RampWindow::RamLak, RampWindow::SheppLogan, RampWindow::Hann}) {
        const Recon r = fbp_phantom(be, ph, t, 101, w);
        std::printf("[ radial FBP ] window %s, 101 spokes: NRMSE %.4f over the object, %.4f over its interior; mean ratio %.4f\n",
                    to_string(w), r.err, r.interior, r.ratio);
        EXPECT_LT(r.interior, 0.12) << to_string(w);
        EXPECT_NEAR(r.ratio, 1.0, 0.05) << to_string(w);  // blurred edges lose some to the outside
        // Each window apodises more than the one before: the edges blur (the error over the object
        // grows) and the ringing fades (the error in the interior shrinks).
        if (w != RampWindow::RamLak) {
            EXPECT_GT(r.err, prev_err) << to_string(w);
            EXPECT_LT(r.interior, prev_interior) << to_string(w);
        }
        prev_err = r.err;
        prev_interior = r.interior;
    }
}

// A small disk off centre lands on its pixel: x along axis 0, y along axis 1, the coordinates' angle
// convention respected. Golden-angle spokes (over 2 pi, unsorted) and a non-square image.
TEST_P(RadialFbpTest, SmallDiskLandsAtItsPixel) {
    const int nx = 64, ny = 48;
    const PhantomSpec spec = spec2d(nx, ny, 1);
    const double cx = 40.0, cy = -24.0;  // mm; 4 mm pixels: pixel (32 + 10, 24 - 6)
    // The small bright disk gives the position; a large one (radius 7 pixels) the scale: its centre
    // is the object's intensity (the ringing of its edge has died down there).
    const double bx = -40.0, by = 28.0;
    const Phantom ph(spec, {phantom::Ellipsoid::ellipse(3.0, cx, cy, 5.0, 5.0, 0.0),
                            phantom::Ellipsoid::ellipse(1.0, bx, by, 28.0, 28.0, 0.0)});
    // An even and an odd readout (the centred FFT's origin at samples/2 in both).
    for (const size_t samples : {size_t(2 * nx), size_t(2 * nx + 1)}) {
        SCOPED_TRACE(std::to_string(samples) + " samples");
        const size_t spokes = 120;
        // dk is per FOV of each axis: 0.5 cycles/FOV along both, so the trajectory is the same in
        // normalised units even though the FOVs differ.
        const double golden = kPi * (std::sqrt(5.0) - 1.0);  // 222.5 degrees
        const RArray k = radial_coords(samples, spokes, 0.5, [&](size_t j) { return golden * double(j); });
        auto fbp = RadialFbp::create(be, {size_t(nx), size_t(ny)}, samples, spokes, 1, k);
        CArray img = be->zeros({size_t(nx), size_t(ny)});
        fbp->reconstruct(be->to_device(radial_data(ph, k)), img);
        const CArray h = be->to_host(img);
        size_t best = 0;
        for (size_t i = 0; i < h.size(); ++i)
            if (std::abs(h.data()[i]) > std::abs(h.data()[best])) best = i;
        EXPECT_EQ(best % size_t(nx), size_t(nx / 2 + 10));
        EXPECT_EQ(best / size_t(nx), size_t(ny / 2 - 6));
        // Real object: the reconstruction is real up to the unpaired first sample of each spoke (-M/2 dk
        // has no +M/2 dk twin, so Hermitian symmetry is not quite complete).
        double imag = 0.0;
        for (size_t i = 0; i < h.size(); ++i) imag = std::max(imag, double(std::abs(h.data()[i].imag())));
        EXPECT_LT(imag, 1e-2 * std::abs(h.data()[best]));
        double centre = 0.0;  // 3 x 3 pixels at the large disk's centre, pixel (32 - 10, 24 + 7)
        for (int dy = -1; dy <= 1; ++dy)
            for (int dx = -1; dx <= 1; ++dx) centre += h.data()[size_t(24 + 7 + dy) * size_t(nx) + size_t(32 - 10 + dx)].real() / 9.0;
        std::printf("[ radial FBP ] golden angle, 64x48, %zu samples: large disk's centre %.4f (object 1)\n", samples, centre);
        EXPECT_NEAR(centre, 1.0, 0.03);
    }
}

TEST_P(RadialFbpTest, RssEqualsRssOfCoilImages) {
    const Phantom ph(spec2d(32, 32, 3));
    const size_t samples = 64, spokes = 51;
    const RArray k = uniform_coords(samples, spokes, 0.5);
    auto fbp = RadialFbp::create(be, {32, 32}, samples, spokes, 3, k, {RampWindow::SheppLogan});
    const CArray data = be->to_device(radial_data(ph, k));
    CArray coils = be->zeros({32, 32, 3}), rss = be->zeros({32, 32});
    fbp->reconstruct(data, coils);
    fbp->reconstruct_rss(data, rss);
    fbp->reconstruct_rss(data, rss);  // the workspace is reused: same result
    const CArray hc = be->to_host(coils), hr = be->to_host(rss);
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < 32 * 32; ++i) {
        double s = 0.0;
        for (size_t c = 0; c < 3; ++c) s += std::norm(hc.data()[c * 32 * 32 + i]);
        num += std::pow(hr.data()[i].real() - std::sqrt(s), 2) + std::pow(hr.data()[i].imag(), 2);
        den += s;
    }
    EXPECT_LT(std::sqrt(num / den), 1e-5);
}

// RSS image of `k` with `data` (one spoke set's samples), real part.
std::vector<double> fbp_rss(const std::shared_ptr<Backend>& be, const Phantom& ph, const RArray& k, const CArray& data,
                            double* shift = nullptr, RampWindow w = RampWindow::RamLak) {
    const size_t nx = size_t(ph.spec().nx), ny = size_t(ph.spec().ny);
    auto fbp = RadialFbp::create(be, {nx, ny}, k.shape()[1], k.shape()[2], size_t(ph.spec().coils), k, {w});
    CArray img = be->zeros({nx, ny});
    fbp->reconstruct_rss(be->to_device(data), img);
    if (shift) *shift = fbp->max_spoke_shift();
    return real_part(*be, img);
}

double nrmse_all(const std::vector<double>& a, const std::vector<double>& b) {
    return nrmse(a, b, std::vector<bool>(b.size(), true));
}

// Issue 18's acceptance: spokes whose samples miss k = 0 the way real ones do reconstruct the phantom
// as centred spokes do. Each set has the analytic samples at its own (shifted) positions; the
// reference is the same phantom from centred spokes at the same angles and spacing. The shifts, in
// samples (dk = 0.5 cycles/FOV):
//  - BART's even sampling, (i - M/2 + 0.5) dk: every spoke 0.5 off;
//  - that plus a gradient delay along each spoke, 0.3 cos(2 theta) + 0.2 (from -0.1 to 0.5);
//  - anisotropic delays (0.45 along k0, -0.15 along k1, RING's model): along the spoke
//    0.45 cos^2 + -0.15 sin^2, across it (-0.6) sin cos, up to 0.3 samples beside k = 0.
// The same data read as if centred must be far off (the test can fail).
TEST_P(RadialFbpTest, OffsetSpokesMatchCentredSpokes) {
    const Phantom ph(spec2d(64, 64, 2));
    const Truth t = truth_of(ph);
    const size_t samples = 128, spokes = 101;
    const double dk = 0.5, h = 64.0;
    const auto theta = [&](size_t j) { return kPi * double(j) / double(spokes); };
    const auto none = [](size_t) { return 0.0; };
    const RArray centred = offset_coords(samples, spokes, dk, theta, [&](size_t) { return h; }, none);
    const std::vector<double> ref = fbp_rss(be, ph, centred, radial_data(ph, centred));
    std::printf("[ radial FBP ] centred spokes: NRMSE %.4f from the object\n", nrmse(ref, t.rss, t.object));

    struct Case {
        const char* name;
        std::function<double(size_t)> centre, across;
        double shift;  // the largest shift, samples
    };
    const double ax = 0.45, ay = -0.15;
    const std::vector<Case> cases = {
        {"BART half sample", [&](size_t) { return h - 0.5; }, none, 0.5},
        {"BART + delay 0.3 cos(2 theta) + 0.2", [&](size_t j) { return h - 0.5 - (0.3 * std::cos(2 * theta(j)) + 0.2); },
         none, 1.0},
        {"BART + anisotropic delay (0.45, -0.15)",
         [&](size_t j) {
             const double c = std::cos(theta(j)), sn = std::sin(theta(j));
             return h - 0.5 - (ax * c * c + ay * sn * sn);
         },
         [&](size_t j) { return dk * (ay - ax) * std::sin(theta(j)) * std::cos(theta(j)); }, 0.0},
    };
    for (const Case& c : cases) {
        const RArray k = offset_coords(samples, spokes, dk, theta, c.centre, c.across);
        const CArray data = radial_data(ph, k);
        double shift = 0.0;
        const std::vector<double> img = fbp_rss(be, ph, k, data, &shift);
        const double err = nrmse_all(img, ref);
        // The shifted data reconstructed as if they were centred: what FBP gave before.
        const double naive = nrmse_all(fbp_rss(be, ph, centred, data), ref);
        std::printf("[ radial FBP ] %s (largest shift %.3f samples): NRMSE %.5f from the centred spokes' image "
                    "(%.4f from the object); read as centred %.4f\n",
                    c.name, shift, err, nrmse(img, t.rss, t.object), naive);
        EXPECT_LT(err, 0.01) << c.name;
        EXPECT_GT(naive, 0.05) << c.name;
        if (c.shift > 0.0) {
            EXPECT_NEAR(shift, c.shift, 0.01) << c.name;
        }
    }
}

// Asymmetric echoes: k = 0 at sample 40 of 104 (the negative half reaches 20 cycles/FOV, the positive
// 31.5), 201 spokes over 2 pi so the long halves cover the outer k-space in every direction. The
// outer samples must get the long halves' whole wedge (twice a line's; with the line weights the
// outer k-space would come out at half its amplitude and the image blurred), and the FFT must be
// padded (an unpadded one of 104 samples resolves 26 cycles/FOV, the long half reaches 31.5). A
// centre at a fraction of a sample (a delay on top) is included. Hann window: the centred spokes
// also sample the ring at 32 cycles/FOV that these lack, which the Ram-Lak ramp weights most.
TEST_P(RadialFbpTest, AsymmetricEchoOverTwoPiMatchesCentredSpokes) {
    const Phantom ph(spec2d(64, 64, 1));
    const Truth t = truth_of(ph);
    const double dk = 0.5;
    const size_t spokes = 201;
    const auto theta = [&](size_t j) { return 2.0 * kPi * double(j) / double(spokes); };
    const auto none = [](size_t) { return 0.0; };
    const RArray centred = offset_coords(128, spokes, dk, theta, [](size_t) { return 64.0; }, none);
    const std::vector<double> ref = fbp_rss(be, ph, centred, radial_data(ph, centred), nullptr, RampWindow::Hann);
    for (const double centre : {40.0, 39.7}) {
        const RArray k = offset_coords(104, spokes, dk, theta, [&](size_t) { return centre; }, none);
        double shift = 0.0;
        const std::vector<double> img = fbp_rss(be, ph, k, radial_data(ph, k), &shift, RampWindow::Hann);
        const double err = nrmse_all(img, ref);
        std::printf("[ radial FBP ] asymmetric echo, k = 0 at sample %.1f of 104, 201 spokes over 2 pi, Hann: NRMSE %.5f "
                    "from the centred spokes' image (%.4f from the object, centred %.4f)\n",
                    centre, err, nrmse(img, t.rss, t.object), nrmse(ref, t.rss, t.object));
        EXPECT_LT(err, 0.015) << centre;  // the two sets end at different radii (20/31.5 against 32)
        EXPECT_NEAR(shift, 52.0 - centre, 1e-3) << centre;
    }
}

void expect_refused(const std::function<void()>& f, const std::vector<std::string>& words) {
    try {
        f();
        ADD_FAILURE() << "no exception; expected one naming " << words.front();
    } catch (const std::invalid_argument& e) {
        for (const std::string& w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
    }
}

TEST_P(RadialFbpTest, TrajectoryChecksNameTheSpoke) {
    const size_t samples = 32, spokes = 8;
    const auto make = [&](const RArray& k) { RadialFbp::create(be, {16, 16}, samples, spokes, 1, k); };
    const RArray good = uniform_coords(samples, spokes, 0.5);
    EXPECT_NO_THROW(make(good));

    // Spoke 3 (at 67.5 degrees) moved by 2 cycles/FOV along k1: 2 cos(67.5 deg) = 0.765 of that is
    // across the line, three times the half spacing (0.25) up to which a sample still covers k = 0.
    RArray shifted = uniform_coords(samples, spokes, 0.5);
    for (size_t m = 0; m < samples; ++m) shifted.data()[2 * (3 * samples + m) + 1] += 2.f;
    expect_refused([&] { make(shifted); }, {"spoke 3", "misses the k-space centre", "passes 0.765", "spacing 0.5"});

    // Spoke 4 moved 20 cycles/FOV along itself: its 32 samples span 15.5, so k = 0 is off its end.
    RArray away = uniform_coords(samples, spokes, 0.5);
    const float c4 = std::cos(float(kPi) * 4.f / 8.f), s4 = std::sin(float(kPi) * 4.f / 8.f);
    for (size_t m = 0; m < samples; ++m) {
        away.data()[2 * (4 * samples + m)] += 20.f * c4;
        away.data()[2 * (4 * samples + m) + 1] += 20.f * s4;
    }
    expect_refused([&] { make(away); }, {"spoke 4", "does not reach the k-space centre", "sample 0", "sample 31", "sample -24"});

    // What is reconstructable is accepted: the centre at a quarter sample along and 0.2 cycles/FOV
    // (0.4 samples) across, an asymmetric echo (k = 0 at sample 5), a centre-out half spoke.
    const auto theta = [&](size_t j) { return kPi * double(j) / double(spokes); };
    EXPECT_NO_THROW(make(offset_coords(samples, spokes, 0.5, theta, [](size_t) { return 15.75; }, [](size_t) { return 0.2; })));
    EXPECT_NO_THROW(make(offset_coords(samples, spokes, 0.5, theta, [](size_t) { return 5.0; }, [](size_t) { return 0.0; })));
    EXPECT_NO_THROW(make(offset_coords(samples, spokes, 0.5, theta, [](size_t) { return -0.3; }, [](size_t) { return 0.0; })));

    RArray bent = uniform_coords(samples, spokes, 0.5);  // one sample of spoke 5 off the line
    bent.data()[2 * (5 * samples + 25)] += 0.3f;
    bent.data()[2 * (5 * samples + 25) + 1] -= 0.2f;
    expect_refused([&] { make(bent); }, {"spoke 5", "not a straight line", "sample 25"});

    // A curved spoke (a gentle arc, as a trajectory with an uncorrected eddy current): refused even
    // though its end samples lie on a line through the centre.
    RArray curved = uniform_coords(samples, spokes, 0.5);
    for (size_t m = 0; m < samples; ++m) {
        const double t = (double(m) - 20.0) / 4.0;
        curved.data()[2 * (6 * samples + m)] += static_cast<float>(0.2 * std::exp(-t * t));
    }
    expect_refused([&] { make(curved); }, {"spoke 6", "not a straight line", "sample 20", "cycles/FOV off the line"});

    RArray uneven = uniform_coords(samples, spokes, 0.5);  // spoke 2: sample 20 pushed along the spoke
    const float c = std::cos(float(kPi) * 2.f / 8.f), s = std::sin(float(kPi) * 2.f / 8.f);
    uneven.data()[2 * (2 * samples + 20)] += 0.2f * c;
    uneven.data()[2 * (2 * samples + 20) + 1] += 0.2f * s;
    expect_refused([&] { make(uneven); }, {"spoke 2", "non-uniform spacing", "sample 20"});

    RArray mixed = uniform_coords(samples, spokes, 0.5);  // spoke 6 at spacing 0.25
    for (size_t m = 0; m < 2 * samples; ++m) mixed.data()[2 * 6 * samples + m] *= 0.5f;
    expect_refused([&] { make(mixed); }, {"spoke 6", "spacing"});

    expect_refused([&] { make(uniform_coords(samples, spokes, 1.5)); }, {"spacing 1.5", "exceeds 1"});
    expect_refused([&] { RadialFbp::create(be, {16, 16}, samples, spokes + 1, 1, good); }, {"coords", "[2x32x9]"});
    expect_refused([&] { RadialFbp::create(be, {16, 16, 2}, samples, spokes, 1, good); }, {"[16x16x2]"});

    auto fbp = RadialFbp::create(be, {16, 16}, samples, spokes, 2, good);
    CArray out = be->zeros({16, 16, 2}), data = be->zeros({samples, spokes, 3});
    expect_refused([&] { fbp->reconstruct(data, out); }, {"data", "[32x8x2]"});
    CArray ok = be->zeros({samples, spokes, 2}), small = be->zeros({16, 16});
    expect_refused([&] { fbp->reconstruct(ok, small); }, {"coil_images"});
    expect_refused([&] { fbp->reconstruct_rss(ok, out); }, {"image", "[16x16]"});
}

TEST_P(RadialFbpTest, CudaMatchesCpuTwin) {
    if (be->device() == Device::Cpu) GTEST_SKIP() << "compares a CUDA backend with its CPU twin";
    const Phantom ph(spec2d(48, 40, 5));  // 5 coils: the 8-coil register chunk with a partial pass
    const size_t samples = 100, spokes = 300;      // spokes over more than one shared-memory tile
    const auto golden = [](size_t j) { return 2.39996 * double(j); };
    // Centred spokes, and shifted ones: an asymmetric echo (k = 0 near sample 30) with an anisotropic
    // delay along and across, on two spokes in three; every third spoke centred, so the kernel's
    // phased and unphased spokes alternate within one tile.
    const RArray centred = radial_coords(samples, spokes, 0.48, golden);
    const RArray shifted = offset_coords(
        samples, spokes, 0.48, golden,
        [&](size_t j) { return j % 3 == 0 ? 50.0 : 30.0 - 0.4 * std::cos(golden(j)) * std::cos(golden(j)); },
        [&](size_t j) { return j % 3 == 0 ? 0.0 : -0.12 * std::sin(2.0 * golden(j)); });
    const auto cpu = make_cpu_backend();
    for (const RArray* k : {&centred, &shifted}) {
        const CArray host = radial_data(ph, *k);
        const char* which = k == &centred ? "centred" : "shifted";
        for (const bool rss : {false, true}) {
            std::vector<std::vector<cfloat>> out;
            for (const std::shared_ptr<Backend>& b : {be, cpu}) {
                auto fbp = RadialFbp::create(b, {48, 40}, samples, spokes, 5, *k, {RampWindow::Hann});
                CArray img = b->zeros(rss ? Shape{48, 40} : Shape{48, 40, 5});
                if (rss)
                    fbp->reconstruct_rss(b->to_device(host), img);
                else
                    fbp->reconstruct(b->to_device(host), img);
                const CArray h = b->to_host(img);
                out.emplace_back(h.data(), h.data() + h.size());
            }
            double num = 0.0, den = 0.0;
            for (size_t i = 0; i < out[0].size(); ++i) {
                num += std::norm(out[0][i] - out[1][i]);
                den += std::norm(out[1][i]);
            }
            EXPECT_LT(std::sqrt(num / den), 1e-4) << which << ", " << (rss ? "rss" : "coil images");
        }
    }
}

}  // namespace
}  // namespace larmor
