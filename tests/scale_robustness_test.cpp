// Every shipped reconstruction chain gives the same image, up to the input's scale, for k-space scaled
// from 1e-12 to 1e14 (issue 18): real exports range from floats near 1e-9 (Siemens twix in volts) to
// integer-scaled data peaking at 5e13 (GE), and none of the chains' maths depends on that scale. Each
// chain is fed the same larmor-phantom scan, its samples (noise scan included) multiplied by a factor,
// and its images divided by that factor must match those of the unscaled scan; on CPU and, where a
// device is usable, CUDA. A scale float cannot hold through the reconstruction is refused with a
// message, never answered with an all-zero or non-finite image.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "gadgets/chain_config.h"
#include "gadgets/factories.h"
#include "gadgets/image_header.h"
#include "tests/support/backends.h"
#include "tests/support/gadget_harness.h"
#include "tests/support/phantom_truth.h"
#include "tools/phantom/phantom.h"
#include "tools/phantom/ultrasound.h"

namespace larmor {
namespace {

namespace fs = std::filesystem;
using phantom::Trajectory;

enum class Scan { Cartesian, CartesianNoise, CartesianR2, CartesianR2Noise, Radial, RadialNoTraj, Spiral, Radial3d, Ultrasound };

const char* scan_name(Scan s) {
    switch (s) {
        case Scan::Cartesian: return "Cartesian";
        case Scan::CartesianNoise: return "Cartesian with noise scan";
        case Scan::CartesianR2: return "Cartesian R=2 + ACS";
        case Scan::CartesianR2Noise: return "Cartesian R=2 + ACS with noise scan";
        case Scan::Radial: return "golden-angle radial";
        case Scan::RadialNoTraj: return "golden-angle radial without traj";
        case Scan::Spiral: return "spiral";
        case Scan::Radial3d: return "3D radial";
        case Scan::Ultrasound: return "plane-wave ultrasound";
    }
    return "?";
}

phantom::PhantomSpec spec_of(Scan s) {
    phantom::PhantomSpec p;
    p.nx = p.ny = 48;
    p.coils = 4;
    p.fov_mm[0] = p.fov_mm[1] = 240.0;
    p.snr = 40.0;
    switch (s) {
        case Scan::CartesianNoise: p.noise_scan = true; break;
        case Scan::CartesianR2Noise: p.noise_scan = true; [[fallthrough]];
        case Scan::CartesianR2:
            p.sampling = phantom::Sampling::uniform;
            p.accel_y = 2;
            p.acs_lines = 16;
            break;
        case Scan::Radial: p.trajectory = Trajectory::golden_angle; p.readouts = 64; break;
        case Scan::RadialNoTraj:
            p.trajectory = Trajectory::golden_angle;
            p.readouts = 64;
            p.write_traj = false;
            break;
        case Scan::Spiral: p.trajectory = Trajectory::spiral; p.readouts = 16; break;
        case Scan::Radial3d:
            p.dims = 3;
            p.nx = p.ny = p.nz = 16;
            p.fov_mm[2] = 240.0;
            p.coils = 2;
            p.trajectory = Trajectory::radial3d;
            break;
        default: break;
    }
    return p;
}

test::Dataset dataset_of(Scan s) {
    if (s == Scan::Ultrasound) {
        phantom::UltrasoundSpec u;
        u.elements = 32;
        u.depth_mm = 12.0;
        u.targets = {{0.0, 5.0, 1.0}, {-2.0, 9.0, 0.5}};
        const size_t nt = size_t(phantom::ultrasound_samples(u));
        const std::vector<float> rf = phantom::simulate_plane_wave(u);
        test::Dataset ds;
        ds.header_xml = phantom::ultrasound_header_xml(u);
        for (int e = 0; e < u.elements; ++e) {
            Acquisition a;
            a.head = phantom::ultrasound_acquisition_header(u, e);
            for (size_t n = 0; n < nt; ++n) a.data.emplace_back(rf[size_t(e) * nt + n], 0.f);
            ds.acquisitions.push_back(std::move(a));
        }
        return ds;
    }
    return test::phantom_dataset(spec_of(s), "scale_" + std::to_string(int(s)));
}

// The scan with every sample (noise readouts included) multiplied by `scale`, rounded to float as an
// export at that scale would hold it.
test::Dataset scaled(const test::Dataset& ds, double scale) {
    test::Dataset out = ds;
    for (Acquisition& a : out.acquisitions)
        for (cfloat& v : a.data) v = cfloat(float(double(v.real()) * scale), float(double(v.imag()) * scale));
    return out;
}

struct Output {
    std::vector<Image> images;
    std::vector<std::string> texts;
    uint64_t used = 0, noise = 0, imaged = 0;  // the session's ledger
};

Output run(const std::string& chain_name, const test::Dataset& ds, std::shared_ptr<Backend> be) {
    const config::Chain chain = load_chain_file(LARMOR_SOURCE_DIR "/config", chain_name);
    std::vector<std::unique_ptr<Gadget>> gadgets;
    for (const auto& g : chain.gadget()) gadgets.push_back(make_gadget(g));
    SessionContext ctx = test::make_session(ds.header_xml, std::move(be));
    ctx.chain_name = chain_name;
    std::vector<Message> in(ds.acquisitions.begin(), ds.acquisitions.end());
    Output out;
    for (Message& m : test::run_chain(std::move(gadgets), ctx, in)) {
        if (auto* im = std::get_if<Image>(&m)) out.images.push_back(std::move(*im));
        if (auto* t = std::get_if<Text>(&m)) out.texts.push_back(t->text);
    }
    out.used = ctx.ledger->used_count();
    out.noise = ctx.ledger->used_count("noise (prewhitening)");
    out.imaged = ctx.ledger->imaged_count();
    return out;
}

// ||got / scale - ref|| / ||ref|| over the float pixels; 1 when either is unusable.
double relative_error(const Image& got, const Image& ref, double scale) {
    const std::vector<double> g = test::float_pixels(got), r = test::float_pixels(ref);
    if (g.size() != r.size() || r.empty()) return 1.0;
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < r.size(); ++i) {
        const double d = g[i] / scale - r[i];
        num += d * d;
        den += r[i] * r[i];
    }
    return den > 0.0 && std::isfinite(num) ? std::sqrt(num / den) : 1.0;
}

struct ChainCase {
    const char* chain;
    Scan scan;
    // The FHd chains run 60 unpreconditioned CG iterations, which amplify float rounding (which differs
    // with a scale that is not a power of two) to 1.4e-4 .. 2.1e-4 on one scan and 6.6e-4 .. 3.2e-3 on
    // another, with no trend in the scale (1e8 worst, measured 2026-11-28); on the H100 with the tuned
    // FHd launch shape (16 voxels per thread) up to 5.9e-3 on the 3D scan (at 1e12; the CG stops at a
    // residual of 3e-4, unconverged, so rounding shows): a looser bound, still far below a wrong image
    // (0.7 to 1.0).
    double tolerance = 1e-4;
};

// Every shipped chain that makes images, on the scans it is for.
const ChainCase kCases[] = {
    {"cartesian", Scan::Cartesian},           {"cartesian", Scan::CartesianNoise},
    {"cartesian-rss", Scan::Cartesian},       {"cartesian-rss", Scan::CartesianNoise},
    {"default.xml", Scan::Cartesian},         {"default.xml", Scan::CartesianNoise},
    {"cg_sense", Scan::CartesianR2},          {"cg_sense", Scan::CartesianR2Noise},
    {"cg_sense.xml", Scan::CartesianR2},      {"radial_gridding", Scan::Radial},
    {"grappa", Scan::CartesianR2},            {"grappa", Scan::CartesianR2Noise},
    // The compressed-sensing chains: relative thresholds and a scale-free calibration, but FISTA and POCS
    // stop on a relative change of 1e-4, which rounding at another scale may cross an iteration apart.
    {"pics_l1", Scan::CartesianR2, 1e-3},     {"spirit_2d", Scan::CartesianR2Noise, 1e-3},
    {"l1spirit_fista", Scan::CartesianR2, 1e-3}, {"l1spirit_fista", Scan::CartesianR2Noise, 1e-3},
    // cg_sense_radial takes the Toeplitz normal where it is faster (CgSense.normal AUTO): its float
    // rounding on the 2N grid moves the image by up to 1.03e-4 between scales (CPU, 2026-11-28; no scale
    // trend), as the fhd chains' below.
    {"radial_fbp", Scan::Radial},             {"cg_sense_radial", Scan::Radial, 5e-4},
    {"cg_sense_radial", Scan::Spiral, 5e-4},  {"radial_realtime", Scan::Radial},
    {"radial_golden_computed", Scan::RadialNoTraj}, {"spiral_gridding", Scan::Spiral},
    {"radial3d_gridding", Scan::Radial3d},    {"ultrasound_planewave", Scan::Ultrasound},
    {"fhd_cg_2d", Scan::Radial, 1e-2},        {"fhd_cg_2d", Scan::Spiral, 1e-2},
    {"fhd_cg_3d", Scan::Radial3d, 1e-2},
};

constexpr double kScales[] = {1e-12, 1e8, 1e12, 1e14};

class ScaleRobustness : public test::BackendTest {};

TEST_P(ScaleRobustness, EveryChainGivesTheSameImageAtEveryScale) {
    for (const ChainCase& c : kCases) {
        SCOPED_TRACE(std::string(c.chain) + " on " + scan_name(c.scan));
        const test::Dataset ds = dataset_of(c.scan);
        const Output ref = run(c.chain, ds, be);
        ASSERT_FALSE(ref.images.empty());
        // Every acquisition used for imaging reached an image (the [Summary]'s "reached an image").
        EXPECT_GT(ref.imaged, 0u);
        EXPECT_EQ(ref.imaged, ref.used - ref.noise);
        for (const Image& im : ref.images) {
            double peak = 0.0;
            for (double v : test::float_pixels(im)) peak = std::max(peak, std::abs(v));
            ASSERT_GT(peak, 0.0) << "the unscaled scan gave an all-zero image";
            // The provenance block of every chain's images (gadgets/image_header.h, set_provenance).
            const ISMRMRD::MetaContainer meta = parse_meta(im.meta);
            EXPECT_STREQ(meta.as_str("LarmorChain"), c.chain);
            EXPECT_STREQ(meta.as_str("LarmorVersion"), LARMOR_VERSION);
            EXPECT_STREQ(meta.as_str("LarmorBackend"), be->device() == Device::Cuda ? "cuda" : "cpu");
            EXPECT_EQ(std::string(meta.as_str("LarmorDevice")), be->describe());
            EXPECT_STREQ(meta.as_str("LarmorStatus"), "ok");
            EXPECT_GT(meta.length("ImageProcessingHistory"), 0u);
        }
        // Prewhitened images are in units of the noise's standard deviation (README, "Scale"), which
        // scales with the data: they do not change at all.
        const bool prewhitened = c.scan == Scan::CartesianNoise || c.scan == Scan::CartesianR2Noise;
        for (double scale : kScales) {
            SCOPED_TRACE("k-space scaled by " + std::to_string(scale));
            Output got;
            ASSERT_NO_THROW(got = run(c.chain, scaled(ds, scale), be));
            ASSERT_EQ(got.images.size(), ref.images.size());
            for (size_t i = 0; i < ref.images.size(); ++i)
                EXPECT_LT(relative_error(got.images[i], ref.images[i], prewhitened ? 1.0 : scale), c.tolerance) << "image " << i;
        }
    }
}

// The real Siemens R=3 phantom scan without its noise scan (most exported data have none), through the
// Cartesian chains: k-space at 1e12 or 1e-12 gave images 0.74 to 1.0 away, or all zero, without a word.
TEST_P(ScaleRobustness, RealScanWithoutNoiseScanAtEveryScale) {
    const std::string path = LARMOR_SHARED_DATA_DIR "/gadgetron-grappa-r3/meas_MID00349_FID09273_SNR_R3.h5";
    if (!fs::exists(path)) GTEST_SKIP() << path << " is absent";
    test::Dataset ds = test::read_dataset(path);
    std::vector<Acquisition> imaging;
    for (Acquisition& a : ds.acquisitions)
        if (!(a.head.flags & (1ull << (ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT - 1)))) imaging.push_back(std::move(a));
    ds.acquisitions = std::move(imaging);
    for (const char* chain : {"cartesian", "cg_sense", "grappa", "pics_l1", "spirit_2d", "l1spirit_fista"}) {
        SCOPED_TRACE(chain);
        const Output ref = run(chain, ds, be);
        ASSERT_FALSE(ref.images.empty());
        for (double scale : {1e-12, 1e12, 1e14}) {
            SCOPED_TRACE("k-space scaled by " + std::to_string(scale));
            Output got;
            ASSERT_NO_THROW(got = run(chain, scaled(ds, scale), be));
            ASSERT_EQ(got.images.size(), ref.images.size());
            for (size_t i = 0; i < ref.images.size(); ++i)
                EXPECT_LT(relative_error(got.images[i], ref.images[i], scale), 1e-4) << "image " << i;
        }
    }
}

// Far beyond float's range for the coil images' energies (without a noise scan, which would bring the
// data back to units of its noise): the chain either still gets it right or says so; it never sends an
// image of zeros or infinities. (The CPU's FFT overflows on such data, since FFTW sums before the
// orthonormal 1/sqrt(N) is applied; cuFFT applies it as the samples load, so on CUDA the Cartesian
// chains still reconstruct 1e36 correctly.)
TEST_P(ScaleRobustness, AScaleFloatCannotHoldIsRightOrRefusedWithAMessage) {
    constexpr double kHuge = 1e36;
    for (const char* chain : {"cartesian", "cartesian-rss", "cg_sense"}) {
        SCOPED_TRACE(chain);
        const test::Dataset ds = dataset_of(std::string(chain) == "cg_sense" ? Scan::CartesianR2 : Scan::Cartesian);
        const Output ref = run(chain, ds, be);
        try {
            const Output out = run(chain, scaled(ds, kHuge), be);
            ASSERT_EQ(out.images.size(), ref.images.size());
            for (size_t i = 0; i < out.images.size(); ++i) {
                for (double v : test::float_pixels(out.images[i])) ASSERT_TRUE(std::isfinite(v)) << "a non-finite pixel was sent";
                EXPECT_LT(relative_error(out.images[i], ref.images[i], kHuge), 1e-4) << "a wrong image was sent";
            }
        } catch (const std::exception& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find("overflow"), std::string::npos) << what;
            // The step that found it: the coil maps or the solver (CgSense), or the finished image.
            EXPECT_TRUE(what.find("CgSense: the coil maps") == 0 || what.find("CG-SENSE diverged") == 0 ||
                        what.find("image 1 ") == 0)
                << what;
        }
    }
}

LARMOR_INSTANTIATE_BACKEND_TEST(ScaleRobustness);

}  // namespace
}  // namespace larmor
