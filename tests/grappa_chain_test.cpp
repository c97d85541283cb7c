// The grappa chain (noise prewhitening, RO oversampling removal, accumulation with the ACS lines,
// GRAPPA, magnitude) on larmor-phantom datasets (2D and 3D) and on the real R=3 scan, against
// zero-filled root-sum-of-squares and the fully sampled image; weights kept across frames; provenance;
// errors; the shipped chain and Gadgetron's Generic_Cartesian_Grappa.xml classnames.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "gadgets/chain_config.h"
#include "gadgets/factories.h"
#include "gadgets/image_header.h"
#include "tests/support/cartesian_chains.h"
#include "tests/support/gadget_harness.h"
#include "tests/support/image_masks.h"
#include "tests/support/phantom_truth.h"
#include "tools/phantom/phantom.h"

namespace larmor {
namespace {

namespace fs = std::filesystem;
using test::float_pixels;

double nrmse(const std::vector<double>& x, const std::vector<double>& t) { return test::scaled_nrmse(x, t); }

using test::phantom_dataset;

// The pixels of an unsigned-short magnitude image (Gadgetron's FloatToUShort output).
std::vector<double> ushort_pixels(const Image& img) {
    EXPECT_EQ(img.head.data_type, ISMRMRD::ISMRMRD_USHORT);
    std::vector<uint16_t> v(img.pixels.size() / sizeof(uint16_t));
    std::memcpy(v.data(), img.pixels.data(), img.pixels.size());
    return std::vector<double>(v.begin(), v.end());
}

phantom::PhantomSpec spec_2d(int accel, int repetitions = 1) {
    phantom::PhantomSpec s;
    s.nx = s.ny = 128;
    s.coils = 8;
    s.fov_mm[0] = s.fov_mm[1] = 240.0;
    s.ro_oversampling = 2;
    s.sampling = accel > 1 ? phantom::Sampling::uniform : phantom::Sampling::full;
    s.accel_y = accel;
    s.acs_lines = 24;
    s.repetitions = repetitions;
    return s;
}

std::vector<std::unique_ptr<Gadget>> grappa_chain(const config::Grappa& cfg = {}) {
    std::vector<std::unique_ptr<Gadget>> g = test::cartesian_front(true);
    g.push_back(make_grappa(cfg));
    g.push_back(make_image_finish(config::ImageFinish{}));
    return g;
}

using test::rss_chain;
using Output = test::ChainOutput;

Output run(std::vector<std::unique_ptr<Gadget>> chain, const test::Dataset& ds, std::shared_ptr<Backend> be) {
    return test::run_dataset(std::move(chain), ds, std::move(be), "grappa");
}

std::shared_ptr<Backend> gpu_or_null() { return cuda_available() ? make_cuda_backend(0) : nullptr; }

// 128^2, 8 coils, uniform R = 2 and 3 with 24 ACS lines: GRAPPA against the fully sampled RSS image,
// zero-filled RSS beside it.
TEST(GrappaChain, PhantomBeatsZeroFilledRss) {
    auto cpu = make_cpu_backend();
    const std::vector<double> full = float_pixels(run(rss_chain(), phantom_dataset(spec_2d(1), "full"), cpu).images.at(0));
    for (int accel : {2, 3}) {
        const test::Dataset ds = phantom_dataset(spec_2d(accel), "r" + std::to_string(accel));
        const Output g = run(grappa_chain(), ds, cpu), zf = run(rss_chain(), ds, cpu);
        ASSERT_EQ(g.images.size(), 1u);
        const std::vector<double> gi = float_pixels(g.images[0]), zi = float_pixels(zf.images.at(0));
        ASSERT_EQ(gi.size(), full.size());
        const double eg = nrmse(gi, full), ez = nrmse(zi, full);
        std::printf("[ grappa ] 8 coils R=%d + 24 ACS: NRMSE vs fully sampled RSS: GRAPPA %.4f, zero-filled RSS %.4f\n",
                    accel, eg, ez);
        EXPECT_LT(eg, 0.2 * ez) << "R=" << accel;
        EXPECT_LT(eg, 0.06) << "R=" << accel;
    }
}

// 3D: 64 x 64 x 32, 8 coils, R = 2 x 2 with a 24 x 24 calibration block (2 x 2 lattice in E1 and E2).
TEST(GrappaChain, ThreeDimensionalTwoByTwo) {
    phantom::PhantomSpec s;
    s.dims = 3;
    s.nx = s.ny = 64;
    s.nz = 32;
    s.coils = 8;
    s.fov_mm[0] = s.fov_mm[1] = 240.0;
    s.fov_mm[2] = 120.0;
    s.ro_oversampling = 1;
    s.acs_lines = 16;
    phantom::PhantomSpec under = s;
    under.sampling = phantom::Sampling::uniform;
    under.accel_y = under.accel_z = 2;
    auto cpu = make_cpu_backend();
    const std::vector<double> full = float_pixels(run(rss_chain(), phantom_dataset(s, "3d_full"), cpu).images.at(0));
    const test::Dataset ds = phantom_dataset(under, "3d_r4");
    config::Grappa cfg;
    cfg.set_kernel_e1(3);
    cfg.set_kernel_e2(3);
    const Output g = run(grappa_chain(cfg), ds, cpu), zf = run(rss_chain(), ds, cpu);
    ASSERT_EQ(g.images.size(), 1u);
    const double eg = nrmse(float_pixels(g.images[0]), full), ez = nrmse(float_pixels(zf.images.at(0)), full);
    std::printf("[ grappa ] 3D 64x64x32, 8 coils, R=2x2: NRMSE vs fully sampled RSS: GRAPPA %.4f, zero-filled %.4f\n",
                eg, ez);
    EXPECT_LT(eg, 0.25 * ez);
    EXPECT_EQ(std::string(parse_meta(g.images[0].meta).as_str("LarmorAcceleration")), "R=2x2");
}

// Repetitions after the first without ACS lines of their own (the pure calibration lines dropped, the
// lattice lines among them sent as plain imaging lines): their frames reuse the first frame's weights
// and come out as the first (the phantom does not move).
TEST(GrappaChain, LaterFramesReuseTheWeights) {
    auto cpu = make_cpu_backend();
    test::Dataset ds = phantom_dataset(spec_2d(3, 3), "reps");
    std::vector<Acquisition> kept;
    for (Acquisition& a : ds.acquisitions) {
        if (a.head.idx.repetition > 0) {
            if (a.flag(ISMRMRD::ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION)) continue;
            a.head.flags &= ~(uint64_t{1} << (ISMRMRD::ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION_AND_IMAGING - 1));
        }
        kept.push_back(std::move(a));
    }
    ds.acquisitions = std::move(kept);
    const Output g = run(grappa_chain(), ds, cpu);
    ASSERT_EQ(g.images.size(), 3u);
    const std::vector<double> first = float_pixels(g.images[0]);
    for (size_t r = 0; r < 3; ++r) {
        EXPECT_EQ(parse_meta(g.images[r].meta).as_long("GrappaCalibratedOnImage"), 1) << "repetition " << r;
        EXPECT_LT(nrmse(float_pixels(g.images[r]), first), 1e-5) << "repetition " << r;
    }
    // With their ACS lines, every repetition calibrates anew.
    const Output fresh = run(grappa_chain(), phantom_dataset(spec_2d(3, 2), "reps_acs"), cpu);
    ASSERT_EQ(fresh.images.size(), 2u);
    EXPECT_EQ(parse_meta(fresh.images[1].meta).as_long("GrappaCalibratedOnImage"), 2);
}

TEST(GrappaChain, CudaMatchesCpu) {
    auto gpu = gpu_or_null();
    if (!gpu) GTEST_SKIP() << "no usable CUDA device";
    const test::Dataset ds = phantom_dataset(spec_2d(3), "cuda");
    const Output c = run(grappa_chain(), ds, make_cpu_backend()), g = run(grappa_chain(), ds, gpu);
    ASSERT_EQ(g.images.size(), 1u);
    EXPECT_LT(nrmse(float_pixels(g.images[0]), float_pixels(c.images.at(0))), 1e-4);
}

TEST(GrappaChain, ImagesCarryTheProvenanceBlock) {
    const Output g = run(grappa_chain(), phantom_dataset(spec_2d(3), "meta"), make_cpu_backend());
    ASSERT_EQ(g.images.size(), 1u);
    const ISMRMRD::MetaContainer m = parse_meta(g.images[0].meta);
    EXPECT_EQ(std::string(m.as_str("LarmorMethod")), "GRAPPA");
    EXPECT_EQ(std::string(m.as_str("LarmorKernel")), "5x4 (RO x E1)");
    EXPECT_NEAR(m.as_double("LarmorLambda"), 5e-4, 1e-9);
    EXPECT_EQ(std::string(m.as_str("LarmorCalibrationRegion")), "e1 [52, 76) x e2 [0, 1)");
    EXPECT_NE(std::string(m.as_str("LarmorCoilMaps")).find("Walsh"), std::string::npos);
    EXPECT_EQ(std::string(m.as_str("LarmorAcceleration")), "R=3");
    EXPECT_EQ(std::string(m.as_str("ImageComment")), "GRAPPA");
    EXPECT_LT(m.as_double("GrappaFitResidual"), 0.05);
}

TEST(GrappaChain, TooFewCalibrationLinesAreAClearError) {
    phantom::PhantomSpec s = spec_2d(4);
    s.acs_lines = 8;
    try {
        run(grappa_chain(), phantom_dataset(s, "few_acs"), make_cpu_backend());
        FAIL() << "8 ACS lines were accepted for a 4-line kernel at R=4";
    } catch (const std::exception& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("Grappa: the calibration region"), std::string::npos) << what;
        EXPECT_NE(what.find("too small"), std::string::npos) << what;
    }
}

TEST(GrappaChain, InvalidSettingsAreRefusedByName) {
    auto refused = [](auto set) {
        config::Grappa c;
        set(c);
        try {
            make_grappa(c);
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    EXPECT_NE(refused([](config::Grappa& c) { c.set_kernel_ro(4); }).find("kernel_ro 4"), std::string::npos);
    EXPECT_NE(refused([](config::Grappa& c) { c.set_kernel_e1(9); }).find("kernel_e1 9"), std::string::npos);
    EXPECT_NE(refused([](config::Grappa& c) { c.set_lambda(-1.f); }).find("lambda"), std::string::npos);
    EXPECT_NE(refused([](config::Grappa& c) { c.set_map_stride(65); }).find("map_stride 65"), std::string::npos);
    EXPECT_EQ(refused([](config::Grappa& c) { c.set_kernel_e1(2); }), "accepted");
}

// The shipped chain and Gadgetron's classnames (config/Generic_Cartesian_Grappa.xml) load to the same
// reconstruction, with the ACS lines kept by the accumulator.
TEST(GrappaChain, ShippedChainAndGadgetronXmlAgree) {
    const config::Chain pb = load_chain_file(LARMOR_SOURCE_DIR "/config", "grappa");
    const config::Chain xml = load_chain_file(LARMOR_SOURCE_DIR "/config", "Generic_Cartesian_Grappa.xml");
    for (const config::Chain* c : {&pb, &xml}) {
        bool keeps_acs = false, has_grappa = false;
        for (const auto& g : c->gadget()) {
            if (g.has_accumulate_trigger()) keeps_acs = g.accumulate_trigger().emit_calibration();
            if (g.has_grappa()) {
                has_grappa = true;
                EXPECT_EQ(g.grappa().kernel_ro(), 5);
                EXPECT_EQ(g.grappa().kernel_e1(), 4);
                EXPECT_FLOAT_EQ(g.grappa().lambda(), 5e-4f);
            }
        }
        EXPECT_TRUE(keeps_acs);
        EXPECT_TRUE(has_grappa);
    }
    EXPECT_EQ(xml.gadget(xml.gadget_size() - 1).image_finish().pixel_type(), config::PIXEL_USHORT);
}

// ---- The real R=3 scan: 14 coils, 48 embedded ACS lines, a noise scan.

std::string real_dataset_path() { return LARMOR_SHARED_DATA_DIR "/gadgetron-grappa-r3/meas_MID00349_FID09273_SNR_R3.h5"; }

TEST(GrappaChain, RealR3ScanShowsNoFoldOver) {
    const std::string path = real_dataset_path();
    if (!fs::exists(path)) GTEST_SKIP() << path << " absent";
    const test::Dataset ds = test::read_dataset(path);
    auto cpu = make_cpu_backend();
    const Output g = run(grappa_chain(), ds, cpu);
    const Output fft = run(rss_chain(true), ds, cpu);
    ASSERT_EQ(g.images.size(), 1u);
    ASSERT_EQ(fft.images.size(), 2u);  // ACS image first, then the zero-filled R=3 image
    EXPECT_EQ(g.images[0].head.matrix_size[0], 192);
    EXPECT_EQ(g.images[0].head.matrix_size[1], 144);
    const std::vector<double> acs = float_pixels(fft.images[0]), zf = float_pixels(fft.images[1]);
    const test::Aliasing a_zf = test::aliasing(zf, acs, 192, 144);
    const test::Aliasing a_g = test::aliasing(float_pixels(g.images[0]), acs, 192, 144);
    std::printf("[ grappa ] real R=3 scan: ghost ratio zero-filled RSS %.4f, GRAPPA %.4f; background ratio "
                "zero-filled %.4f, GRAPPA %.4f; fit residual %.4f\n",
                a_zf.ghost, a_g.ghost, a_zf.background, a_g.background, parse_meta(g.images[0].meta).as_double("GrappaFitResidual"));
    EXPECT_GT(a_zf.ghost, 0.1);               // the negative control is aliased
    EXPECT_LT(a_g.ghost, 0.2 * a_zf.ghost);   // GRAPPA removes the fold-over
    EXPECT_LT(a_g.ghost, 3 * a_g.background + 0.01);

    // The Gadgetron XML chain gives the same image (as unsigned short, so to its rounding).
    const config::Chain xml = load_chain_file(LARMOR_SOURCE_DIR "/config", "Generic_Cartesian_Grappa.xml");
    std::vector<std::unique_ptr<Gadget>> chain;
    for (const auto& gc : xml.gadget()) chain.push_back(make_gadget(gc));
    const Output x = run(std::move(chain), ds, cpu);
    ASSERT_EQ(x.images.size(), 1u);
    EXPECT_LT(nrmse(ushort_pixels(x.images[0]), float_pixels(g.images[0])), 2e-3);
}

}  // namespace
}  // namespace larmor
