// Plane-wave ultrasound by Stolt's f-k migration (core/recon/stolt_migration.h) on point targets
// simulated by larmor-phantom --ultrasound (tools/phantom/ultrasound.h): every target comes out at its
// true position (sub-pixel peak by parabolic fit, error < 0.5 wavelength), with axial and lateral
// widths near the diffraction limit, and the UltrasoundPlaneWave gadget gives the same image.
#include "core/recon/stolt_migration.h"

#include <gtest/gtest.h>
#include <ismrmrd/xml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <unistd.h>

#include "gadgets/chain_config.h"
#include "gadgets/factories.h"
#include "tests/support/backends.h"
#include "tests/support/gadget_harness.h"
#include "tests/support/ismrmrd_files.h"
#include "tests/support/server_process.h"
#include "tools/phantom/ultrasound.h"

namespace larmor {
namespace {

using phantom::PointTarget;
using phantom::UltrasoundSpec;

class PlaneWaveStolt : public test::BackendTest {};

// The RF of a spec as the migration takes it: [samples, elements], real data as complex.
CArray rf_of(Backend& be, const UltrasoundSpec& spec) {
    const std::vector<float> rf = phantom::simulate_plane_wave(spec);
    const size_t nt = size_t(phantom::ultrasound_samples(spec)), nx = size_t(spec.elements);
    CArray host = be.host_complex({nt, nx});
    for (size_t i = 0; i < rf.size(); ++i)
        host.data()[i] = cfloat(rf[i], 0.f);
    return host;
}

PlaneWaveGeometry geometry_of(const UltrasoundSpec& s) {
    PlaneWaveGeometry g;
    g.pitch_m = s.pitch_mm * 1e-3;
    g.sampling_hz = s.sampling_hz;
    g.sound_speed_m_s = s.sound_speed_m_s;
    return g;
}

// Vertex offset of the parabola through (-1, a), (0, b), (1, c), in [-0.5, 0.5] for a peak at 0.
double parabolic(double a, double b, double c) {
    const double d = a - 2 * b + c;
    return d < 0 ? 0.5 * (a - c) / d : 0.0;
}

// Full width at half maximum of a profile around its peak index p, by linear interpolation (samples).
double fwhm(const std::vector<double>& v, size_t p) {
    const double half = 0.5 * v[p];
    size_t l = p, r = p;
    while (l > 0 && v[l - 1] > half)
        --l;
    while (r + 1 < v.size() && v[r + 1] > half)
        ++r;
    if (l == 0 || r + 1 == v.size()) return INFINITY;
    const double left = double(l) - (v[l] - half) / (v[l] - v[l - 1]);
    const double right = double(r) + (v[r] - half) / (v[r] - v[r + 1]);
    return right - left;
}

struct Peak {
    double row = 0, col = 0;                  // sub-pixel
    double axial_fwhm = 0, lateral_fwhm = 0;  // pixels
    double value = 0;
};

// The envelope's largest value within +-rows, +-cols of the expected pixel, required to be a local
// maximum of the window's interior, refined by parabolic fits along each axis.
Peak find_peak(const RArray& env, double row, double col, long rows, long cols) {
    const long nz = long(env.shape()[0]), nx = long(env.shape()[1]);
    auto at = [&](long i, long j) { return double(env.data()[i + j * nz]); };
    long bi = -1, bj = -1;
    for (long j = std::max(0L, long(std::lround(col)) - cols); j <= std::min(nx - 1, long(std::lround(col)) + cols);
         ++j)
        for (long i = std::max(0L, long(std::lround(row)) - rows); i <= std::min(nz - 1, long(std::lround(row)) + rows);
             ++i)
            if (bi < 0 || at(i, j) > at(bi, bj)) bi = i, bj = j;
    Peak p;
    EXPECT_TRUE(bi > 0 && bi + 1 < nz && bj > 0 && bj + 1 < nx) << "peak on the image edge at " << bi << ", " << bj;
    if (!(bi > 0 && bi + 1 < nz && bj > 0 && bj + 1 < nx)) return p;
    EXPECT_GT(at(bi, bj), at(bi - 1, bj));
    EXPECT_GE(at(bi, bj), at(bi + 1, bj));
    EXPECT_GT(at(bi, bj), at(bi, bj - 1));
    EXPECT_GE(at(bi, bj), at(bi, bj + 1));
    p.row = double(bi) + parabolic(at(bi - 1, bj), at(bi, bj), at(bi + 1, bj));
    p.col = double(bj) + parabolic(at(bi, bj - 1), at(bi, bj), at(bi, bj + 1));
    p.value = at(bi, bj);
    std::vector<double> axial(static_cast<size_t>(nz)), lateral(static_cast<size_t>(nx));
    for (long i = 0; i < nz; ++i)
        axial[size_t(i)] = at(i, bj);
    for (long j = 0; j < nx; ++j)
        lateral[size_t(j)] = at(bi, j);
    p.axial_fwhm = fwhm(axial, size_t(bi));
    p.lateral_fwhm = fwhm(lateral, size_t(bj));
    return p;
}

// The standard probe of the issue (128 elements, 0.3 mm pitch, 5 MHz, fs 20 MHz) and targets across
// the field, on the axis and off it, shallow and deep.
UltrasoundSpec standard_probe() {
    UltrasoundSpec s;
    s.elements = 128;
    s.pitch_mm = 0.3;
    s.sampling_hz = 20e6;
    s.depth_mm = 20.0;
    s.targets = {{0.0, 5.0, 1.0}, {0.0, 12.0, 1.0}, {-7.0, 9.0, 1.0}, {5.0, 16.0, 1.0}, {10.3, 14.2, 1.0}};
    return s;
}

TEST_P(PlaneWaveStolt, TargetsLandAtTheirTruePositions) {
    for (StoltMapping mapping : {StoltMapping::ExplodingReflector, StoltMapping::Exact}) {
        SCOPED_TRACE(mapping == StoltMapping::Exact ? "exact mapping" : "exploding-reflector mapping");
        const UltrasoundSpec spec = standard_probe();
        StoltOptions opts;
        opts.mapping = mapping;
        const StoltImage img = stolt_migrate(be, be->to_device(rf_of(*be, spec)), geometry_of(spec), opts);
        const size_t nt = size_t(phantom::ultrasound_samples(spec));
        ASSERT_EQ(img.analytic.shape(), Shape({nt, size_t(spec.elements)}));
        EXPECT_DOUBLE_EQ(img.dz_m, spec.sound_speed_m_s / (2 * spec.sampling_hz));
        const RArray env = envelope(*be, img.analytic);
        const double lambda = phantom::wavelength_mm(spec);
        const double dz_mm = img.dz_m * 1e3, dx_mm = img.dx_m * 1e3;
        const long rows = long(std::ceil(2 * lambda / dz_mm)), cols = 3;
        double worst = 0;
        for (const PointTarget& t : spec.targets) {
            const double row = t.z_mm / dz_mm, col = t.x_mm / dx_mm + 0.5 * (spec.elements - 1);
            const Peak p = find_peak(env, row, col, rows, cols);
            const double ez = (p.row - row) * dz_mm / lambda, ex = (p.col - col) * dx_mm / lambda;
            std::printf(
                "target (%+.1f, %.1f) mm: error axial %+.3f, lateral %+.3f wavelengths; FWHM axial %.2f, "
                "lateral %.2f wavelengths; peak %.3f\n",
                t.x_mm, t.z_mm, ez, ex, p.axial_fwhm * dz_mm / lambda, p.lateral_fwhm * dx_mm / lambda, p.value);
            EXPECT_LT(std::hypot(ez, ex), 0.5) << "target at (" << t.x_mm << ", " << t.z_mm << ") mm";
            worst = std::max(worst, std::hypot(ez, ex));
            // The envelope of a unit-amplitude echo, doubled by the analytic filter and halved again by
            // its modulus: the collapsed hyperbola sums the aperture's contributions into one peak of the
            // order of the pulse's amplitude times the number of elements that see it.
            EXPECT_GT(p.value, 1.0);
        }
        std::printf("%s: largest position error %.3f wavelengths (lambda %.3f mm)\n",
                    mapping == StoltMapping::Exact ? "exact" : "exploding reflector", worst, lambda);
    }
}

// Widths at a half-wavelength pitch (the lateral profile is then sampled finely enough to measure):
// axially the pulse's own envelope width, c FWHM_t / 2 (the migration does not touch the kx = 0 line);
// laterally the diffraction limit of the aperture seen from the target, 0.603 lambda / sin(phi) for
// a flat band of lateral wavenumbers up to sin(phi) / lambda (a plane-wave transmit is unfocused, so
// only the receive aperture counts), phi the half-angle of the aperture.
TEST_P(PlaneWaveStolt, PeakWidthsAreNearTheDiffractionLimit) {
    UltrasoundSpec spec;
    spec.elements = 96;
    spec.pitch_mm = 0.154;
    spec.sampling_hz = 20e6;
    spec.depth_mm = 12.0;
    spec.targets = {{0.0, 7.0, 1.0}};
    // Garcia's hyperbola fit defocuses the widest angles (its phase error grows as (k_x / k)^4), so its
    // lateral width is allowed more above the limit than the exact mapping's.
    for (StoltMapping mapping : {StoltMapping::ExplodingReflector, StoltMapping::Exact}) {
        SCOPED_TRACE(mapping == StoltMapping::Exact ? "exact mapping" : "exploding-reflector mapping");
        StoltOptions opts;
        opts.mapping = mapping;
        const StoltImage img = stolt_migrate(be, be->to_device(rf_of(*be, spec)), geometry_of(spec), opts);
        const RArray env = envelope(*be, img.analytic);
        const double lambda = phantom::wavelength_mm(spec), dz_mm = img.dz_m * 1e3, dx_mm = img.dx_m * 1e3;
        const PointTarget& t = spec.targets[0];
        const Peak p = find_peak(env, t.z_mm / dz_mm, t.x_mm / dx_mm + 0.5 * (spec.elements - 1), 16, 3);

        const double f0 = spec.center_frequency_hz;
        const double sigma_t = 1.0 / (2 * M_PI * spec.fractional_bandwidth * f0 / (2 * std::sqrt(2 * std::log(2.0))));
        const double axial_mm = spec.sound_speed_m_s * 2 * std::sqrt(2 * std::log(2.0)) * sigma_t / 2 * 1e3;
        const double half_aperture = 0.5 * spec.elements * spec.pitch_mm;
        const double sin_phi = half_aperture / std::hypot(half_aperture, t.z_mm);
        const double lateral_mm = 0.603 * lambda / sin_phi;
        const double axial = p.axial_fwhm * dz_mm, lateral = p.lateral_fwhm * dx_mm;
        std::printf("%s: FWHM axial %.3f mm (limit %.3f), lateral %.3f mm (limit %.3f); lambda %.3f mm\n",
                    mapping == StoltMapping::Exact ? "exact" : "exploding reflector", axial, axial_mm, lateral,
                    lateral_mm, lambda);
        EXPECT_GT(axial, 0.8 * axial_mm);
        EXPECT_LT(axial, 1.25 * axial_mm);
        EXPECT_GT(lateral, 0.9 * lateral_mm);
        EXPECT_LT(lateral, (mapping == StoltMapping::Exact ? 1.5 : 2.5) * lateral_mm);
    }
}

TEST_P(PlaneWaveStolt, RefusesWhatItCannotImage) {
    const UltrasoundSpec spec = standard_probe();
    PlaneWaveGeometry g = geometry_of(spec);
    CArray rf = be->zeros({64, 16});
    g.angle_rad = 0.1;
    EXPECT_THROW(stolt_migrate(be, rf, g), std::invalid_argument);
    g = geometry_of(spec);
    g.sound_speed_m_s = -1;
    EXPECT_THROW(stolt_migrate(be, rf, g), std::invalid_argument);
    g = geometry_of(spec);
    g.pitch_m = std::nan("");
    EXPECT_THROW(stolt_migrate(be, rf, g), std::invalid_argument);
    EXPECT_THROW(stolt_migrate(be, be->zeros({64, 16, 2}), geometry_of(spec)), std::invalid_argument);
    EXPECT_THROW(stolt_migrate(be, be->zeros({64, 1}), geometry_of(spec)), std::invalid_argument);
    StoltMigration mig(be, 64, 16, geometry_of(spec));
    CArray image = be->empty({64, 16}), small = be->empty({32, 16});
    EXPECT_THROW(mig.migrate(be->zeros({32, 16}), image), std::invalid_argument);
    EXPECT_THROW(mig.migrate(rf, small), std::invalid_argument);
    EXPECT_NO_THROW(mig.migrate(rf, image));
}

// The stream form: one acquisition per element into UltrasoundPlaneWave -> ImageFinish (magnitude,
// float), as config/ultrasound_planewave.pbtxt chains them; the image is the envelope the migration
// gives directly, with the header describing it.
TEST_P(PlaneWaveStolt, GadgetChainGivesTheSameImage) {
    UltrasoundSpec spec = standard_probe();
    spec.elements = 64;
    spec.depth_mm = 14.0;
    spec.targets = {{0.0, 8.0, 1.0}, {-3.0, 11.0, 0.5}};
    const size_t nt = size_t(phantom::ultrasound_samples(spec)), nx = size_t(spec.elements);
    const std::vector<float> rf = phantom::simulate_plane_wave(spec);
    std::vector<Acquisition> acqs(nx);
    for (size_t e = 0; e < nx; ++e) {
        acqs[e].head = phantom::ultrasound_acquisition_header(spec, int(e));
        for (size_t n = 0; n < nt; ++n) acqs[e].data.emplace_back(rf[e * nt + n], 0.f);
    }
    // Two shots of the same scene: two images, the second from the reused migration plan.
    std::vector<Message> input(acqs.begin(), acqs.end());
    input.insert(input.end(), acqs.begin(), acqs.end());
    const config::Chain chain = load_chain_file(LARMOR_SOURCE_DIR "/config", "ultrasound_planewave");
    std::vector<std::unique_ptr<Gadget>> gadgets;
    for (const auto& g : chain.gadget())
        gadgets.push_back(make_gadget(g));
    auto out = test::run_chain(std::move(gadgets), test::make_session(phantom::ultrasound_header_xml(spec), be), input);
    std::vector<Image> images;
    for (Message& m : out)
        if (auto* im = std::get_if<Image>(&m)) images.push_back(std::move(*im));
    ASSERT_EQ(images.size(), 2u);
    EXPECT_EQ(images[0].pixels, images[1].pixels);
    EXPECT_EQ(images[1].head.image_index, images[0].head.image_index + 1);
    const Image& im = images[0];
    EXPECT_EQ(im.head.image_type, ISMRMRD::ISMRMRD_IMTYPE_MAGNITUDE);
    EXPECT_EQ(im.head.data_type, ISMRMRD::ISMRMRD_FLOAT);
    EXPECT_EQ(im.head.matrix_size[0], nt);
    EXPECT_EQ(im.head.matrix_size[1], nx);
    const double dz_mm = spec.sound_speed_m_s / (2 * spec.sampling_hz) * 1e3;
    EXPECT_NEAR(im.head.field_of_view[0], dz_mm * double(nt), 1e-3);
    EXPECT_NEAR(im.head.field_of_view[1], spec.pitch_mm * double(nx), 1e-4);
    ASSERT_EQ(im.pixels.size(), nt * nx * sizeof(float));

    StoltOptions opts;
    opts.tolerance = 1e-4;
    const RArray ref =
        envelope(*be, stolt_migrate(be, be->to_device(rf_of(*be, spec)), geometry_of(spec), opts).analytic);
    const float* px = reinterpret_cast<const float*>(im.pixels.data());
    double peak = 0, diff = 0;
    for (size_t i = 0; i < nt * nx; ++i) {
        peak = std::max(peak, double(ref.data()[i]));
        diff = std::max(diff, std::abs(double(px[i]) - double(ref.data()[i])));
    }
    EXPECT_GT(peak, 1.0);
    EXPECT_LE(diff, 1e-6 * peak);
}

// End to end: larmor-phantom's file through larmor-client to larmor-server's ultrasound_planewave
// chain; the envelope image written back shows every target at its true position.
TEST(UltrasoundServer, PhantomFileThroughClientAndServer) {
    if (::access(test::client_binary().c_str(), X_OK) != 0 || ::access(test::server_binary().c_str(), X_OK) != 0)
        GTEST_SKIP() << "larmor-server / larmor-client not built";
    UltrasoundSpec spec = standard_probe();
    spec.elements = 64;
    spec.depth_mm = 14.0;
    spec.targets = {{0.0, 6.0, 1.0}, {2.5, 11.0, 1.0}};
    const std::string stem = "/tmp/larmor-us-" + std::to_string(::getpid());
    const std::string in = stem + "-in.h5", out = stem + "-out.h5";
    phantom::write_ultrasound_dataset(spec, in);
    test::ServerProcess server({"--backend", "cpu"});
    const auto r = test::run_process({test::client_binary(), "-a", "127.0.0.1", "-p", std::to_string(server.port()),
                                      "-f", in, "-c", "ultrasound_planewave", "-o", out, "-G", "us"},
                                     std::chrono::seconds(300));
    ::unlink(in.c_str());
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const auto images = ::access(out.c_str(), F_OK) == 0 ? test::read_images(out, "us") : std::vector<test::FileImage>{};
    ::unlink(out.c_str());
    ASSERT_EQ(images.size(), 1u) << r.output;
    const size_t nt = size_t(phantom::ultrasound_samples(spec)), nx = size_t(spec.elements);
    ASSERT_EQ(images[0].matrix[0], nt);
    ASSERT_EQ(images[0].matrix[1], nx);
    ASSERT_EQ(images[0].values.size(), nt * nx);
    RArray env = RArray::host({nt, nx});
    for (size_t i = 0; i < nt * nx; ++i) env.data()[i] = float(images[0].values[i]);
    const double lambda = phantom::wavelength_mm(spec);
    const double dz_mm = spec.sound_speed_m_s / (2 * spec.sampling_hz) * 1e3;
    for (const PointTarget& t : spec.targets) {
        const double row = t.z_mm / dz_mm, col = t.x_mm / spec.pitch_mm + 0.5 * (spec.elements - 1);
        const Peak p = find_peak(env, row, col, long(std::ceil(2 * lambda / dz_mm)), 3);
        EXPECT_LT(std::hypot((p.row - row) * dz_mm, (p.col - col) * spec.pitch_mm) / lambda, 0.5)
            << "target at (" << t.x_mm << ", " << t.z_mm << ") mm";
    }
}

TEST(UltrasoundPhantom, HeaderCarriesTheGeometryAndTargets) {
    UltrasoundSpec spec;
    spec.elements = 32;
    spec.depth_mm = 10;
    spec.targets = {{1.25, 4.5, 1.0}, {-2.0, 7.0, 0.25}};
    ISMRMRD::IsmrmrdHeader h;
    ISMRMRD::deserialize(phantom::ultrasound_header_xml(spec).c_str(), h);
    ASSERT_EQ(h.encoding.size(), 1u);
    EXPECT_EQ(h.encoding[0].encodedSpace.matrixSize.x, phantom::ultrasound_samples(spec));
    EXPECT_EQ(h.encoding[0].encodedSpace.matrixSize.y, 32);
    ASSERT_TRUE(h.userParameters);
    std::string targets;
    for (const auto& p : h.userParameters->userParameterString)
        if (p.name == "larmor.us.targets") targets = p.value;
    const auto parsed = phantom::parse_targets(targets);
    ASSERT_EQ(parsed.size(), 2u);
    EXPECT_EQ(parsed[1].x_mm, -2.0);
    EXPECT_EQ(parsed[1].z_mm, 7.0);
    EXPECT_EQ(parsed[1].amplitude, 0.25);
    EXPECT_THROW(phantom::parse_targets("1;2"), std::invalid_argument);
    spec.sampling_hz = 8e6;  // below twice the pulse's upper band edge
    EXPECT_THROW(phantom::simulate_plane_wave(spec), std::invalid_argument);
}

LARMOR_INSTANTIATE_BACKEND_TEST(PlaneWaveStolt);

}  // namespace
}  // namespace larmor
