// The compressed-sensing chains (config/pics_l1.pbtxt, config/spirit_2d.pbtxt, config/l1spirit_3d.pbtxt,
// config/l1spirit_fista.pbtxt) through their gadgets on larmor-phantom's Poisson-disc datasets, 2D and 3D, beside zero-filling and
// CG-SENSE; their configuration checks; and the real R=3 scan through SPIRiT and l1-wavelet SENSE,
// measured for fold-over as tests/cg_sense_chain_test.cpp measures CG-SENSE.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "gadgets/chain_config.h"
#include "gadgets/factories.h"
#include "gadgets/image_header.h"
#include "tests/support/cartesian_chains.h"
#include "tests/support/config_refusal.h"
#include "tests/support/gadget_harness.h"
#include "tests/support/image_masks.h"
#include "tests/support/phantom_truth.h"
#include "tests/support/server_process.h"
#include "tools/phantom/phantom.h"

namespace larmor {
namespace {

namespace fs = std::filesystem;
using test::float_pixels;
using Output = test::ChainOutput;

double nrmse(const std::vector<double>& x, const std::vector<double>& t) { return test::scaled_nrmse(x, t); }

test::Dataset phantom_dataset(const phantom::PhantomSpec& spec, const std::string& tag) {
    const fs::path path = fs::temp_directory_path() / ("larmor_sparse_" + std::to_string(::getpid()) + "_" + tag + ".h5");
    phantom::write_dataset(spec, path.string());
    test::Dataset ds = test::read_dataset(path.string());
    fs::remove(path);
    return ds;
}

// A shipped chain, gadget by gadget (load_chain_file applies what the chain implies, e.g. keeping ACS lines).
std::vector<std::unique_ptr<Gadget>> shipped(const std::string& name) {
    const config::Chain c = load_chain_file(LARMOR_SOURCE_DIR "/config", name);
    std::vector<std::unique_ptr<Gadget>> g;
    for (const auto& entry : c.gadget()) g.push_back(make_gadget(entry));
    return g;
}

// A 3D Poisson-disc scan, R = 2 x 2, with a 12 x 12 calibration block: n x n x nz, `coils` coils.
phantom::PhantomSpec poisson_3d(int n, int nz, int coils) {
    phantom::PhantomSpec s;
    s.dims = 3;
    s.nx = s.ny = n;
    s.nz = nz;
    s.coils = coils;
    s.fov_mm[2] = 120.0;
    s.ro_oversampling = 1;
    s.acs_lines = 12;
    s.sampling = phantom::Sampling::poisson;
    s.accel_y = s.accel_z = 2;
    return s;
}

std::vector<std::unique_ptr<Gadget>> chain_with(std::unique_ptr<Gadget> recon) {
    std::vector<std::unique_ptr<Gadget>> g = test::cartesian_front(true);
    g.push_back(std::move(recon));
    g.push_back(make_image_finish(config::ImageFinish{}));
    return g;
}

Output run(std::vector<std::unique_ptr<Gadget>> chain, const test::Dataset& ds, const std::string& name,
           std::shared_ptr<Backend> be = make_cpu_backend()) {
    return test::run_dataset(std::move(chain), ds, std::move(be), name);
}

std::vector<double> one_image(const Output& o) {
    EXPECT_EQ(o.images.size(), 1u);
    for (const std::string& t : o.texts) EXPECT_EQ(t.find("ERROR"), std::string::npos) << t;
    return o.images.empty() ? std::vector<double>{} : float_pixels(o.images[0]);
}

TEST(SparseChains, ShippedChainsParseAndKeepTheAcsLines) {
    for (const char* name : {"pics_l1", "spirit_2d", "l1spirit_3d", "l1spirit_fista"}) {
        const config::Chain c = load_chain_file(LARMOR_SOURCE_DIR "/config", name);
        bool keeps = false, recon = false;
        for (const auto& g : c.gadget()) {
            if (g.has_accumulate_trigger()) keeps = g.accumulate_trigger().emit_calibration();
            if (g.has_pics_l1() || g.has_spirit()) recon = true;
        }
        EXPECT_TRUE(keeps) << name;
        EXPECT_TRUE(recon) << name;
    }
}

TEST(SparseChains, SettingsOutsideTheirRangesAreRefusedByName) {
    auto pics = [](auto edit) {
        return test::refusal_of<config::PicsL1>([](const config::PicsL1& c) { return make_pics_l1(c); }, edit);
    };
    auto spirit = [](auto edit) {
        return test::refusal_of<config::Spirit>([](const config::Spirit& c) { return make_spirit(c); }, edit);
    };
    EXPECT_EQ(pics([](config::PicsL1&) {}), "accepted");
    EXPECT_NE(pics([](config::PicsL1& c) { c.mutable_solver()->set_lambda(0.1f); }).find("PicsL1: solver.lambda"),
              std::string::npos);
    EXPECT_NE(pics([](config::PicsL1& c) { c.set_lambda(-1.f); }).find("PicsL1: lambda -1"), std::string::npos);
    EXPECT_NE(pics([](config::PicsL1& c) { c.set_wavelet_levels(17); }).find("wavelet_levels 17"), std::string::npos);
    EXPECT_NE(pics([](config::PicsL1& c) { c.mutable_espirit()->set_sets(2); }).find("espirit.sets 2"),
              std::string::npos);
    EXPECT_EQ(spirit([](config::Spirit&) {}), "accepted");
    EXPECT_NE(spirit([](config::Spirit& c) { c.set_kernel(4); }).find("Spirit: kernel 4"), std::string::npos);
    EXPECT_NE(spirit([](config::Spirit& c) { c.set_calibration_lambda(2.f); }).find("calibration_lambda 2"),
              std::string::npos);
    EXPECT_NE(spirit([](config::Spirit& c) { c.set_l1_lambda(-0.5f); }).find("l1_lambda -0.5"), std::string::npos);
    EXPECT_NE(spirit([](config::Spirit& c) { c.mutable_solver()->set_lambda(1.f); }).find("Spirit: solver.lambda"),
              std::string::npos);
}

phantom::PhantomSpec spec_2d(bool undersampled) {
    phantom::PhantomSpec s;
    s.nx = s.ny = 128;
    s.coils = 8;
    s.fov_mm[0] = s.fov_mm[1] = 240.0;
    s.ro_oversampling = 2;
    s.acs_lines = 24;
    s.snr = 40;
    s.seed = 3;
    if (undersampled) {
        s.sampling = phantom::Sampling::poisson;
        s.accel_y = 3;
    }
    return s;
}

// 2D, 128^2, 8 coils, Poisson-disc along E1 at R = 3 with 24 ACS lines, SNR 40: every sparse chain
// against the noiseless fully sampled image.
TEST(SparseChains, TwoDimensionalPoissonPhantom) {
    phantom::PhantomSpec truth_spec = spec_2d(false);
    truth_spec.snr = 0;
    const std::vector<double> truth = one_image(run(test::rss_chain(), phantom_dataset(truth_spec, "2d_truth"), "zf"));
    const test::Dataset ds = phantom_dataset(spec_2d(true), "2d_poisson");
    const double zf = nrmse(one_image(run(test::rss_chain(), ds, "zf")), truth);
    const double cg = nrmse(one_image(run(chain_with(make_cg_sense({})), ds, "cg_sense")), truth);
    const double pics = nrmse(one_image(run(shipped("pics_l1"), ds, "pics_l1")), truth);
    const double l1s = nrmse(one_image(run(shipped("spirit_2d"), ds, "spirit_2d")), truth);
    config::Spirit cg_cfg;
    cg_cfg.set_method(config::Spirit::METHOD_CG);
    cg_cfg.mutable_solver()->set_iterations(30);
    const double cgs = nrmse(one_image(run(chain_with(make_spirit(cg_cfg)), ds, "cg_spirit")), truth);
    const double l1f = nrmse(one_image(run(shipped("l1spirit_fista"), ds, "l1spirit_fista")), truth);
    std::printf("[ sparse ] 2D 128^2, 8 coils, Poisson R=3 + 24 ACS, SNR 40: NRMSE zero-filled %.4f, CG-SENSE %.4f, "
                "CG-SPIRiT %.4f, l1-SPIRiT POCS %.4f, l1-SPIRiT FISTA %.4f, l1-wavelet SENSE %.4f\n",
                zf, cg, cgs, l1s, l1f, pics);
    EXPECT_LT(pics, 0.5 * zf);
    EXPECT_LT(l1s, 0.5 * zf);
    EXPECT_LT(l1f, 0.5 * zf);
    EXPECT_LT(cgs, 0.5 * zf);
    EXPECT_LT(pics, cg);
    EXPECT_LT(l1s, cg);
    EXPECT_LT(l1f, std::min(cgs, l1s));
}

// 3D, 64 x 64 x 32, 8 coils, Poisson disc over (E1, E2) at R = 2 x 2 with a 16 x 16 calibration block:
// l1-SPIRiT per readout position and l1-wavelet SENSE (3D wavelet) against CG-SENSE and zero-filling.
TEST(SparseChains, ThreeDimensionalPoissonPhantom) {
    phantom::PhantomSpec s;
    s.dims = 3;
    s.nx = s.ny = 64;
    s.nz = 32;
    s.coils = 8;
    s.fov_mm[0] = s.fov_mm[1] = 240.0;
    s.fov_mm[2] = 120.0;
    s.ro_oversampling = 1;
    s.acs_lines = 16;
    const std::vector<double> truth = one_image(run(test::rss_chain(), phantom_dataset(s, "3d_truth"), "zf"));
    phantom::PhantomSpec under = s;
    under.sampling = phantom::Sampling::poisson;
    under.accel_y = under.accel_z = 2;
    under.snr = 40;
    const test::Dataset ds = phantom_dataset(under, "3d_poisson");
    const double zf = nrmse(one_image(run(test::rss_chain(), ds, "zf")), truth);
    const double cg = nrmse(one_image(run(chain_with(make_cg_sense({})), ds, "cg_sense")), truth);
    const double pics = nrmse(one_image(run(shipped("pics_l1"), ds, "pics_l1")), truth);
    const double l1s = nrmse(one_image(run(shipped("l1spirit_3d"), ds, "l1spirit_3d")), truth);
    const double l1f = nrmse(one_image(run(shipped("l1spirit_fista"), ds, "l1spirit_fista")), truth);
    config::Spirit cg_cfg;  // CG-SPIRiT with l1spirit_3d's light calibration weight
    cg_cfg.set_method(config::Spirit::METHOD_CG);
    cg_cfg.set_calibration_lambda(0.0003f);
    cg_cfg.mutable_solver()->set_iterations(30);
    const double cgs = nrmse(one_image(run(chain_with(make_spirit(cg_cfg)), ds, "cg_spirit")), truth);
    std::printf("[ sparse ] 3D 64x64x32, 8 coils, Poisson R=2x2 + 16x16 ACS, SNR 40: NRMSE zero-filled %.4f, "
                "CG-SENSE %.4f, CG-SPIRiT %.4f, l1-SPIRiT POCS %.4f, l1-SPIRiT FISTA %.4f, l1-wavelet SENSE %.4f\n",
                zf, cg, cgs, l1s, l1f, pics);
    EXPECT_LT(pics, 0.5 * zf);
    EXPECT_LT(l1s, 0.5 * zf);
    EXPECT_LT(l1f, 0.5 * zf);
    EXPECT_LT(pics, cg);
    EXPECT_LT(l1s, std::min(cg, cgs));
    EXPECT_LT(l1f, std::min(cg, cgs));
    if (!cuda_available()) return;
    // The same chains on the GPU: per-position calibration by cuSOLVER, batched FFTs and wavelets there.
    const double pics_gpu = nrmse(one_image(run(shipped("pics_l1"), ds, "pics_l1", make_cuda_backend(0))), truth);
    const double l1s_gpu = nrmse(one_image(run(shipped("l1spirit_3d"), ds, "l1spirit_3d", make_cuda_backend(0))), truth);
    const double l1f_gpu =
        nrmse(one_image(run(shipped("l1spirit_fista"), ds, "l1spirit_fista", make_cuda_backend(0))), truth);
    std::printf("[ sparse ] 3D on CUDA: l1-SPIRiT POCS %.4f, l1-SPIRiT FISTA %.4f, l1-wavelet SENSE %.4f\n", l1s_gpu,
                l1f_gpu, pics_gpu);
    EXPECT_NEAR(pics_gpu, pics, 2e-3);
    EXPECT_NEAR(l1s_gpu, l1s, 2e-3);
    EXPECT_NEAR(l1f_gpu, l1f, 2e-3);
}

// 3D l1-SPIRiT through the gadget with the device count forced (SessionContext::peers: further backends
// of one kind, as the server gives a session on a multi-GPU host): 2 backends, one slab each, and 3
// backends with 5-position slabs dealt in turn give the image of one backend, on the CPU and on one GPU.
TEST(SparseChains, ThreeDimensionalSplitOverForcedDevicesGivesTheSameImage) {
    const test::Dataset ds = phantom_dataset(poisson_3d(32, 16, 4), "3d_split");
    auto chain = [](uint32_t slab_slices) {
        config::Chain c = load_chain_file(LARMOR_SOURCE_DIR "/config", "l1spirit_3d");
        std::vector<std::unique_ptr<Gadget>> g;
        for (auto& entry : *c.mutable_gadget()) {
            if (entry.has_spirit()) {
                entry.mutable_spirit()->mutable_solver()->set_iterations(10);
                entry.mutable_spirit()->set_slab_slices(slab_slices);
            }
            g.push_back(make_gadget(entry));
        }
        return g;
    };
    for (const Device d : {Device::Cpu, Device::Cuda}) {
        if (d == Device::Cuda && !cuda_available()) continue;
        auto backend = [d] { return d == Device::Cpu ? make_cpu_backend() : make_cuda_backend(0); };
        const std::vector<double> one = one_image(test::run_dataset(chain(0), ds, backend(), "one"));
        const std::vector<double> two =
            one_image(test::run_dataset(chain(0), ds, backend(), "two", {backend()}));
        const std::vector<double> three =
            one_image(test::run_dataset(chain(5), ds, backend(), "three", {backend(), backend()}));
        ASSERT_EQ(two.size(), one.size());
        ASSERT_EQ(three.size(), one.size());
        double n2 = 0, n3 = 0, den = 0;
        for (size_t i = 0; i < one.size(); ++i)
            n2 += (two[i] - one[i]) * (two[i] - one[i]), n3 += (three[i] - one[i]) * (three[i] - one[i]),
                den += one[i] * one[i];
        std::printf("[ sparse ] 3D l1-SPIRiT on %s: 2 backends %.2e, 3 backends in 7 slabs %.2e from one backend\n",
                    device_name(d), std::sqrt(n2 / den), std::sqrt(n3 / den));
        EXPECT_GT(den, 0);
        EXPECT_LT(std::sqrt(n2 / den), 1e-4);
        EXPECT_LT(std::sqrt(n3 / den), 1e-4);
    }
}

// ---- The real R=3 scan: 14 coils, 48 embedded ACS lines, a noise scan.
TEST(SparseChains, RealR3ScanShowsNoFoldOver) {
    const std::string path = LARMOR_SHARED_DATA_DIR "/gadgetron-grappa-r3/meas_MID00349_FID09273_SNR_R3.h5";
    if (!fs::exists(path)) GTEST_SKIP() << path << " absent";
    const test::Dataset ds = test::read_dataset(path);
    const Output fft = run(test::rss_chain(true), ds, "zf");
    ASSERT_EQ(fft.images.size(), 2u);  // ACS image first, then the zero-filled R=3 image
    const std::vector<double> acs = float_pixels(fft.images[0]), zf = float_pixels(fft.images[1]);
    const test::Aliasing a_zf = test::aliasing(zf, acs, 192, 144);
    for (const char* chain : {"spirit_2d", "l1spirit_fista", "pics_l1"}) {
        const Output o = run(shipped(chain), ds, chain);
        ASSERT_EQ(o.images.size(), 1u) << chain;
        EXPECT_EQ(o.images[0].head.matrix_size[0], 192);
        EXPECT_EQ(o.images[0].head.matrix_size[1], 144);
        const test::Aliasing a = test::aliasing(float_pixels(o.images[0]), acs, 192, 144);
        std::printf("[ sparse ] real R=3 scan, %s: ghost ratio %.4f (zero-filled %.4f), background %.4f (zero-filled "
                    "%.4f)\n",
                    chain, a.ghost, a_zf.ghost, a.background, a_zf.background);
        EXPECT_LT(a.ghost, 0.2 * a_zf.ghost) << chain;
        EXPECT_LT(a.ghost, 3 * a.background + 0.01) << chain;
    }
}

// Every sparse chain through larmor-server and larmor-client, on a 2D and a 3D Poisson-disc phantom file:
// each run exits cleanly, reports the solver's progress and writes its image.
TEST(SparseChains, EveryChainRunsThroughTheServerIn2DAnd3D) {
    using namespace std::chrono_literals;
    if (!fs::exists(test::client_binary())) GTEST_SKIP() << "larmor-client not built";
    const std::string stem = "/tmp/larmor-sparse-" + std::to_string(::getpid());
    phantom::PhantomSpec two = spec_2d(true);
    two.nx = two.ny = 96;
    const phantom::PhantomSpec three = poisson_3d(48, 24, 8);
    phantom::write_dataset(two, stem + "-2d.h5");
    phantom::write_dataset(three, stem + "-3d.h5");
    test::ServerProcess server({"--backend", "cpu"});
    for (const char* data : {"2d", "3d"})
        for (const char* chain : {"pics_l1", "spirit_2d", "l1spirit_3d", "l1spirit_fista"}) {
            const std::string in = stem + "-" + data + ".h5", out = stem + "-" + data + "-" + chain + "-out.h5";
            const auto r = test::run_process({test::client_binary(), "-a", "127.0.0.1", "-p", std::to_string(server.port()),
                                              "-f", in, "-c", chain, "-o", out},
                                             300s);
            const std::string stage = std::string("progress ") + (std::string(chain) == "pics_l1" ? "pics_l1" : "spirit");
            EXPECT_EQ(r.exit_code, 0) << data << " " << chain << "\n" << r.output;
            EXPECT_EQ(r.output.find("ERROR"), std::string::npos) << data << " " << chain << "\n" << r.output;
            EXPECT_NE(r.output.find(stage), std::string::npos) << data << " " << chain << "\n" << r.output;
            EXPECT_TRUE(fs::exists(out)) << data << " " << chain << "\n" << r.output;
            fs::remove(out);
        }
    fs::remove(stem + "-2d.h5");
    fs::remove(stem + "-3d.h5");
}

}  // namespace
}  // namespace larmor
