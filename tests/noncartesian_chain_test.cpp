// The non-Cartesian chains (accumulate_readouts -> gridding / radial_fbp / cg_sense -> coil combine ->
// finish) on larmor-phantom radial, spiral, stack-of-stars and 3D radial datasets (exact analytic
// samples at each trajectory point): image error against the true object for each density
// compensation, FBP against gridding, CG-SENSE against gridding at 64 spokes, real-time frames, the
// shipped chains, refused inputs, and CUDA against CPU.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>
#include <vector>

#include "core/trajectory/density.h"
#include "core/trajectory/trajectory.h"
#include "gadgets/chain_config.h"
#include "gadgets/factories.h"
#include "gadgets/image_header.h"
#include "gadgets/precompute_cache.h"
#include "gadgets/noncart/density_weights.h"
#include "gadgets/noncart/nufft_bins.h"
#include "tests/support/gadget_harness.h"
#include "tests/support/phantom_truth.h"
#include "tools/phantom/phantom.h"

namespace larmor {
namespace {

using phantom::Trajectory;

std::vector<double> pixels(const Image& img) { return test::float_pixels(img); }
double nrmse(const std::vector<double>& x, const std::vector<double>& t) { return test::scaled_nrmse(x, t); }
// The object RSS sees, each pixel averaged over 3 x 3 sub-points (the object's edges are not on the grid).
std::vector<double> true_object(const phantom::PhantomSpec& spec) { return test::rss_object(spec, 3); }

using test::phantom_dataset;

phantom::PhantomSpec spec_of(Trajectory t, int n, int coils, int readouts = 0) {
    phantom::PhantomSpec s;
    s.nx = s.ny = n;
    s.coils = coils;
    s.fov_mm[0] = s.fov_mm[1] = 240.0;
    s.ro_oversampling = 2;
    s.trajectory = t;
    s.readouts = readouts;
    return s;
}

config::AccumulateReadouts accumulate(int window = 0, int stride = 0) {
    config::AccumulateReadouts a;
    a.set_window(window);
    a.set_stride(stride);
    return a;
}

config::CoilCombine rss() {
    config::CoilCombine c;
    c.set_method(config::COMBINE_RSS);
    return c;
}

std::vector<std::unique_ptr<Gadget>> gridding_chain(config::DensityCompensation d, int window = 0, int stride = 0) {
    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(make_accumulate_readouts(accumulate(window, stride)));
    config::Gridding gr;
    gr.set_density(d);
    g.push_back(make_gridding(gr));
    g.push_back(make_coil_combine(rss()));
    g.push_back(make_image_finish(config::ImageFinish{}));
    return g;
}

std::vector<std::unique_ptr<Gadget>> fbp_chain() {
    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(make_accumulate_readouts(accumulate()));
    g.push_back(make_radial_fbp(config::RadialFbp{}));
    g.push_back(make_coil_combine(rss()));
    g.push_back(make_image_finish(config::ImageFinish{}));
    return g;
}

std::vector<std::unique_ptr<Gadget>> cg_sense_chain(
    config::CgSense::NormalOperator normal = config::CgSense::NORMAL_NUFFT_PAIR,
    config::CgSense::CoilMaps maps = config::CgSense::MAPS_DEFAULT) {
    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(make_accumulate_readouts(accumulate()));
    config::CgSense cg;
    cg.set_normal(normal);
    cg.set_maps(maps);
    cg.mutable_solver()->set_iterations(30);
    cg.mutable_solver()->set_tolerance(1e-4f);
    cg.mutable_solver()->set_lambda(0.01f);
    cg.mutable_solver()->set_progress_interval(-1);
    g.push_back(make_cg_sense(cg));
    g.push_back(make_image_finish(config::ImageFinish{}));
    return g;
}

struct Output {
    std::vector<Image> images;
    std::vector<std::string> texts;
};

Output run(std::vector<std::unique_ptr<Gadget>> chain, const test::Dataset& ds, std::shared_ptr<Backend> be,
           std::shared_ptr<PrecomputeCache> cache = nullptr) {
    std::vector<Message> in(ds.acquisitions.begin(), ds.acquisitions.end());
    SessionContext ctx = test::make_session(ds.header_xml, std::move(be));
    ctx.chain_name = "noncartesian";
    ctx.precompute = std::move(cache);
    Output out;
    for (Message& m : test::run_chain(std::move(chain), ctx, in)) {
        if (auto* im = std::get_if<Image>(&m)) out.images.push_back(std::move(*im));
        if (auto* t = std::get_if<Text>(&m)) out.texts.push_back(t->text);
    }
    return out;
}

double error_of(const Output& o, const std::vector<double>& truth, size_t image = 0) {
    EXPECT_GT(o.images.size(), image);
    if (o.images.size() <= image) return 1.0;
    return nrmse(pixels(o.images[image]), truth);
}

std::shared_ptr<Backend> cpu() { return make_cpu_backend(); }

TEST(NoncartesianChain, RadialGriddingPipeMenonBeatsAnalyticAndBothBeatNoWeights) {
    const auto spec = spec_of(Trajectory::golden_angle, 96, 4);  // ceil(pi/2 96) = 151 spokes of 192 samples
    const auto ds = phantom_dataset(spec, "radial");
    const auto truth = true_object(spec);
    const double pm = error_of(run(gridding_chain(config::DENSITY_PIPE_MENON), ds, cpu()), truth);
    const double an = error_of(run(gridding_chain(config::DENSITY_ANALYTIC), ds, cpu()), truth);
    const double vo = error_of(run(gridding_chain(config::DENSITY_VORONOI), ds, cpu()), truth);
    const double no = error_of(run(gridding_chain(config::DENSITY_NONE), ds, cpu()), truth);
    std::printf("[radial 96^2, 151 golden-angle spokes, 4 coils] NRMSE: Pipe-Menon %.4f, analytic %.4f, Voronoi %.4f, "
                "none %.4f\n",
                pm, an, vo, no);
    EXPECT_LT(pm, an);
    EXPECT_LT(an, 0.5 * no);
    EXPECT_LT(vo, 0.5 * no);
    EXPECT_LT(pm, 0.2);
}

// Since Hoge's weights keep the centre (README, "Density compensation: which method, measured") the
// three weightings agree on the spiral within a few per cent.
TEST(NoncartesianChain, SpiralGriddingWeightsAgreeAndAllBeatNoWeights) {
    const auto spec = spec_of(Trajectory::spiral, 96, 4);
    const auto ds = phantom_dataset(spec, "spiral");
    const auto truth = true_object(spec);
    const double pm = error_of(run(gridding_chain(config::DENSITY_PIPE_MENON), ds, cpu()), truth);
    const double an = error_of(run(gridding_chain(config::DENSITY_ANALYTIC), ds, cpu()), truth);
    const double vo = error_of(run(gridding_chain(config::DENSITY_VORONOI), ds, cpu()), truth);
    const double no = error_of(run(gridding_chain(config::DENSITY_NONE), ds, cpu()), truth);
    std::printf("[spiral 96^2, 4 coils] NRMSE: Pipe-Menon %.4f, analytic (Hoge) %.4f, Voronoi %.4f, none %.4f\n", pm,
                an, vo, no);
    EXPECT_LT(std::abs(pm - an), 0.05 * pm);
    EXPECT_LT(std::abs(pm - vo), 0.05 * pm);
    EXPECT_LT(an, 0.5 * no);
    EXPECT_LT(vo, 0.5 * no);
    EXPECT_LT(pm, 0.2);
}

TEST(NoncartesianChain, FbpAndGriddingAgreeOnAFullySampledRadialPhantom) {
    const auto spec = spec_of(Trajectory::radial, 96, 4);
    const auto ds = phantom_dataset(spec, "radial_full");
    const auto truth = true_object(spec);
    const Output grid = run(gridding_chain(config::DENSITY_PIPE_MENON), ds, cpu());
    const Output fbp = run(fbp_chain(), ds, cpu());
    ASSERT_EQ(grid.images.size(), 1u);
    ASSERT_EQ(fbp.images.size(), 1u);
    // Away from the object's edges (pixels whose 5 x 5 neighbourhood has one intensity): there the two
    // differ only by how they interpolate (FBP linearly between projection samples one pixel apart,
    // gridding with the NUFFT's kernel), which blurs edges differently.
    const phantom::Phantom ph(spec);
    const auto object = ph.image(0, 1);
    std::vector<double> f, g, t;
    const auto pf = pixels(fbp.images[0]), pg = pixels(grid.images[0]);
    for (int y = 2; y + 2 < spec.ny; ++y)
        for (int x = 2; x + 2 < spec.nx; ++x) {
            bool flat = true;
            for (int dy = -2; dy <= 2; ++dy)
                for (int dx = -2; dx <= 2; ++dx) flat = flat && object[size_t((y + dy) * spec.nx + x + dx)] == object[size_t(y * spec.nx + x)];
            if (flat && object[size_t(y * spec.nx + x)] != 0) {
                f.push_back(pf[size_t(y * spec.nx + x)]);
                g.push_back(pg[size_t(y * spec.nx + x)]);
                t.push_back(truth[size_t(y * spec.nx + x)]);
            }
        }
    const double between = nrmse(f, g), between_all = nrmse(pf, pg);
    const double e_grid = nrmse(pixels(grid.images[0]), truth), e_fbp = nrmse(pixels(fbp.images[0]), truth);
    std::printf("[radial 96^2, 151 uniform spokes, 4 coils] NRMSE gridding %.4f, FBP %.4f; FBP vs gridding %.4f "
                "(whole image), %.4f (%zu pixels away from edges, where gridding is %.4f and FBP %.4f from the object)\n",
                e_grid, e_fbp, between_all, between, f.size(), nrmse(g, t), nrmse(f, t));
    // Shepp-Logan's bright rim rings through the whole image in any reconstruction that stops sharply at
    // |k| = N/2 (gridding); FBP's linear interpolation smooths that ringing away. So the two agree to
    // better than gridding's own ringing, and FBP is the closer of the two to the object there.
    EXPECT_LT(between, 0.08);
    EXPECT_LT(between, nrmse(g, t));
    EXPECT_LT(between_all, 0.15);
    EXPECT_LT(e_fbp, 0.25);
}

TEST(NoncartesianChain, RadialCgSenseAt64SpokesBeatsGridding) {
    const auto spec = spec_of(Trajectory::golden_angle, 96, 8, 64);
    const auto ds = phantom_dataset(spec, "radial64");
    const auto truth = true_object(spec);
    const double grid = error_of(run(gridding_chain(config::DENSITY_PIPE_MENON), ds, cpu()), truth);
    const Output cg = run(cg_sense_chain(), ds, cpu());
    const double sense = error_of(cg, truth);
    const Output es = run(cg_sense_chain(config::CgSense::NORMAL_NUFFT_PAIR, config::CgSense::MAPS_ESPIRIT), ds, cpu());
    const double espirit = error_of(es, truth);
    std::printf("[radial 96^2, 64 golden-angle spokes (R = 2.4), 8 coils] NRMSE gridding %.4f, CG-SENSE %.4f (Walsh "
                "maps), %.4f (ESPIRiT maps)\n",
                grid, sense, espirit);
    EXPECT_LT(sense, grid);
    EXPECT_LT(espirit, grid);
    EXPECT_NE(std::string(parse_meta(es.images.at(0).meta).as_str("CgSenseCoilMaps")).find("ESPIRiT"), std::string::npos);
}

// F^H W F as the Toeplitz embedding or as the NUFFT pair: one solution, to the NUFFT's tolerance (1e-3);
// AUTO takes one of the two, says which in the meta with the times it chose by, and decides the same
// for a second session of the same size (server-wide, without measuring again).
TEST(NoncartesianChain, RadialCgSenseToeplitzAndNufftPairAgree) {
    const auto spec = spec_of(Trajectory::golden_angle, 64, 4, 48);
    const auto ds = phantom_dataset(spec, "normals");
    const Output pair = run(cg_sense_chain(config::CgSense::NORMAL_NUFFT_PAIR), ds, cpu());
    const Output toeplitz = run(cg_sense_chain(config::CgSense::NORMAL_TOEPLITZ), ds, cpu());
    const auto p = pixels(pair.images.at(0)), t = pixels(toeplitz.images.at(0));
    const double between = nrmse(t, p);
    EXPECT_LT(between, 3e-3);
    EXPECT_EQ(std::string(parse_meta(toeplitz.images[0].meta).as_str("CgSenseNormal")).rfind("Toeplitz, Q ", 0), 0u);
    EXPECT_STREQ(parse_meta(pair.images[0].meta).as_str("CgSenseNormal"), "NUFFT pair");
    std::string first;
    for (int session = 0; session < 2; ++session) {
        const Output a = run(cg_sense_chain(config::CgSense::NORMAL_AUTO), ds, cpu());
        const std::string how = parse_meta(a.images.at(0).meta).as_str("CgSenseNormal");
        std::printf("  Toeplitz vs pair NRMSE %.2e; auto: %s\n", between, how.c_str());
        EXPECT_NE(how.find("(auto: "), std::string::npos) << how;
        const auto x = pixels(a.images[0]);
        EXPECT_LT(std::min(nrmse(x, p), nrmse(x, t)), 1e-6) << how;
        const std::string choice = how.substr(0, how.find(" (auto"));
        if (session == 0) first = choice;
        EXPECT_EQ(choice, first);
    }
}

// Q is computed by the first session and taken from the server's cache by the next (same trajectory),
// which then gets the same image; with a cache directory a new server (a new cache on the same
// directory) reads it from disk instead of computing it.
TEST(NoncartesianChain, ToeplitzKernelIsComputedOncePerServer) {
    const auto spec = spec_of(Trajectory::golden_angle, 48, 2, 40);
    const auto ds = phantom_dataset(spec, "qcache");
    const std::string dir = ::testing::TempDir() + "larmor-qcache-" + std::to_string(::getpid());
    PrecomputeCache::Options o;
    o.directory = dir;
    auto server = std::make_shared<PrecomputeCache>(o);
    auto source = [](const Output& out) {
        return std::string(parse_meta(out.images.at(0).meta).as_str("CgSenseNormal"));
    };
    const Output first = run(cg_sense_chain(config::CgSense::NORMAL_TOEPLITZ), ds, cpu(), server);
    const Output second = run(cg_sense_chain(config::CgSense::NORMAL_TOEPLITZ), ds, cpu(), server);
    EXPECT_EQ(source(first), "Toeplitz, Q computed");
    EXPECT_EQ(source(second), "Toeplitz, Q cached (memory)");
    EXPECT_EQ(pixels(first.images.at(0)), pixels(second.images.at(0)));
    EXPECT_EQ(server->stats().computed, 3u);  // Q, the Pipe-Menon weights and the NUFFT's bins, once each
    EXPECT_EQ(server->stats().memory_hits, 3u);
    auto restarted = std::make_shared<PrecomputeCache>(o);
    const Output third = run(cg_sense_chain(config::CgSense::NORMAL_TOEPLITZ), ds, cpu(), restarted);
    EXPECT_EQ(source(third), "Toeplitz, Q cached (disk)");
    EXPECT_EQ(pixels(first.images.at(0)), pixels(third.images.at(0)));
    std::filesystem::remove_all(dir);
}

TEST(NoncartesianChain, RealtimeWindowEmitsAFrameEveryStride) {
    const auto spec = spec_of(Trajectory::golden_angle, 64, 4, 128);
    const auto ds = phantom_dataset(spec, "realtime");
    const auto truth = true_object(spec);
    const Output o = run(gridding_chain(config::DENSITY_ANALYTIC, 32, 8), ds, cpu());
    ASSERT_EQ(o.images.size(), size_t((128 - 32) / 8 + 1));
    double worst = 0;
    for (size_t f = 0; f < o.images.size(); ++f) {
        const auto meta = parse_meta(o.images[f].meta);
        EXPECT_EQ(meta.as_long("LarmorFrame"), long(f));
        worst = std::max(worst, nrmse(pixels(o.images[f]), truth));
    }
    std::printf("[real-time 64^2, 32-spoke windows every 8 spokes, 4 coils] %zu frames, worst NRMSE %.4f\n",
                o.images.size(), worst);
    EXPECT_LT(worst, 0.5);
}

TEST(NoncartesianChain, StackOfStarsAndKooshballGrid) {
    {
        auto spec = spec_of(Trajectory::stack_of_stars, 32, 2, 50);
        spec.dims = 3;
        spec.nz = 8;
        spec.fov_mm[2] = 80.0;
        const auto ds = phantom_dataset(spec, "stack");
        const auto truth = true_object(spec);
        const double e = error_of(run(gridding_chain(config::DENSITY_PIPE_MENON), ds, cpu()), truth);
        const double a = error_of(run(gridding_chain(config::DENSITY_ANALYTIC), ds, cpu()), truth);
        std::printf("[stack of stars 32^2 x 8, 50 spokes, 2 coils] NRMSE Pipe-Menon %.4f, analytic %.4f\n", e, a);
        EXPECT_LT(e, 0.3);
        EXPECT_LT(a, 0.3);
    }
    {
        auto spec = spec_of(Trajectory::radial3d, 16, 2, 300);
        spec.dims = 3;
        spec.nz = 16;
        spec.fov_mm[2] = 240.0;
        const auto ds = phantom_dataset(spec, "kooshball");
        const auto truth = true_object(spec);
        const double e = error_of(run(gridding_chain(config::DENSITY_PIPE_MENON), ds, cpu()), truth);
        const double a = error_of(run(gridding_chain(config::DENSITY_ANALYTIC), ds, cpu()), truth);
        std::printf("[kooshball 16^3, 300 spokes, 2 coils] NRMSE Pipe-Menon %.4f, analytic %.4f\n", e, a);
        EXPECT_LT(e, 0.35);
        EXPECT_LT(a, 0.35);
    }
}

// Density weights live in the server's precompute cache: a protocol's repetitions and a later
// session with the same trajectory take them from there (charged to the cache, not to the session);
// Pipe-Menon weights are also written to the cache's directory and read back by a restarted server,
// while the closed forms, cheaper to compute than to read, stay in memory.
TEST(NoncartesianChain, DensityWeightsAreComputedOncePerServer) {
    auto spec = spec_of(Trajectory::radial, 48, 2);
    spec.repetitions = 3;  // the same spokes three times
    const auto ds = phantom_dataset(spec, "repeat");
    const std::string dir = ::testing::TempDir() + "larmor-dcache-" + std::to_string(::getpid());
    PrecomputeCache::Options opts;
    opts.directory = dir;
    auto server = std::make_shared<PrecomputeCache>(opts);
    // Each session's first buffer also takes the NUFFT's binned points from the cache (one more entry
    // per trajectory, memory only; gadgets/noncart/nufft_bins.h).
    const Output analytic = run(gridding_chain(config::DENSITY_ANALYTIC), ds, cpu(), server);
    ASSERT_EQ(analytic.images.size(), 3u);
    EXPECT_EQ(server->stats().computed, 2u);     // the ramp and the bins
    EXPECT_EQ(server->stats().memory_hits, 2u);  // the ramp, for repetitions 2 and 3
    EXPECT_EQ(pixels(analytic.images[0]), pixels(analytic.images[2]));
    EXPECT_GE(server->stats().bytes, 48u * 2 * 48 * sizeof(float));  // charged to the cache
    const Output pm = run(gridding_chain(config::DENSITY_PIPE_MENON), ds, cpu(), server);
    EXPECT_EQ(server->stats().computed, 3u);  // the Pipe-Menon weights; the bins were there
    EXPECT_EQ(server->stats().entries, 3u);
    const Output again = run(gridding_chain(config::DENSITY_PIPE_MENON), ds, cpu(), server);
    EXPECT_EQ(server->stats().computed, 3u);
    EXPECT_EQ(pixels(pm.images[0]), pixels(again.images[0]));
    // A restarted server: Pipe-Menon from the directory, the analytic ramp (and the bins) computed again.
    auto restarted = std::make_shared<PrecomputeCache>(opts);
    const Output from_disk = run(gridding_chain(config::DENSITY_PIPE_MENON), ds, cpu(), restarted);
    EXPECT_EQ(restarted->stats().disk_hits, 1u);
    EXPECT_EQ(restarted->stats().computed, 1u);  // the bins
    EXPECT_EQ(pixels(pm.images[0]), pixels(from_disk.images[0]));
    run(gridding_chain(config::DENSITY_ANALYTIC), ds, cpu(), restarted);
    EXPECT_EQ(restarted->stats().computed, 2u);
    // Another trajectory (one spoke turned, in the first repetition) is another entry of each.
    test::Dataset turned = ds;
    turned.acquisitions[1].traj[80] += 0.01f;  // near the centre: stays inside the range
    run(gridding_chain(config::DENSITY_ANALYTIC), turned, cpu(), restarted);
    EXPECT_EQ(restarted->stats().computed, 4u);
    std::filesystem::remove_all(dir);
}

TEST(NoncartesianChain, BadTrajectoriesAreRefusedByName) {
    const auto spec = spec_of(Trajectory::radial, 32, 2);
    test::Dataset ds = phantom_dataset(spec, "bad");
    {
        test::Dataset bad = ds;
        bad.acquisitions[3].traj[5] = 0.75f;  // beyond the normalised range
        try {
            run(gridding_chain(config::DENSITY_ANALYTIC), bad, cpu());
            FAIL() << "an out-of-range trajectory was accepted";
        } catch (const std::exception& e) {
            EXPECT_NE(std::string(e.what()).find("0.75"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("scan_counter"), std::string::npos) << e.what();
        }
    }
    {
        test::Dataset bad = ds;
        bad.acquisitions[0].head.trajectory_dimensions = 0;
        bad.acquisitions[0].traj.clear();
        try {
            run(gridding_chain(config::DENSITY_ANALYTIC), bad, cpu());
            FAIL() << "a readout without a trajectory was accepted";
        } catch (const std::exception& e) {
            EXPECT_NE(std::string(e.what()).find("trajectory_dimensions 0"), std::string::npos) << e.what();
        }
    }
    {
        std::vector<std::unique_ptr<Gadget>> g;
        g.push_back(make_remove_ro_oversampling(config::RemoveROOversampling{}));
        g.push_back(make_accumulate_readouts(accumulate()));
        try {
            run(std::move(g), ds, cpu());
            FAIL() << "readout oversampling removal before a non-Cartesian accumulator was accepted";
        } catch (const std::exception& e) {
            EXPECT_NE(std::string(e.what()).find("remove_ro_oversampling"), std::string::npos) << e.what();
        }
    }
    EXPECT_THROW(make_accumulate_readouts(accumulate(0, 4)), ConfigError);
    EXPECT_THROW(make_accumulate_readouts(accumulate(8, 9)), ConfigError);
}

TEST(NoncartesianChain, ShippedChainsParse) {
    for (const char* name : {"radial_gridding", "spiral_gridding", "radial_fbp", "radial3d_gridding",
                             "cg_sense_radial", "radial_realtime", "radial_golden_computed"}) {
        SCOPED_TRACE(name);
        const config::Chain chain = load_chain_file(LARMOR_SOURCE_DIR "/config", name);
        EXPECT_EQ(chain.name(), name);
        for (const auto& g : chain.gadget()) EXPECT_NO_THROW(make_gadget(g)) << gadget_display_name(g);
    }
}

// Plans of two sessions (two backends) for one trajectory share the binned points the cache keeps:
// the second does not sort again, both give the adjoint of a plan that binned its own, they can run at
// once (the point set is only read), and an evicted set stays valid for the plans holding it.
void check_shared_bins(const std::function<std::shared_ptr<Backend>()>& make, int device) {
    const Shape image{40, 40};
    const size_t coils = 3, m = 64 * 30;
    trajectory::RadialSpec spec;
    spec.spokes = 30;
    spec.samples = 64;
    spec.kmax = 20.0;
    const RArray k = trajectory::radial_2d(spec).reshaped({2, m});
    PrecomputeCache cache(PrecomputeCache::Options{});
    CachedNufftBins source(cache), again(cache);
    auto be1 = make(), be2 = make();
    auto a = Nufft::create(be1, image, coils, k, {}, &source);
    EXPECT_EQ(source.last_source(), PrecomputeCache::Source::Computed);
    auto b = Nufft::create(be2, image, coils, k, {}, &again);
    EXPECT_EQ(again.last_source(), PrecomputeCache::Source::Memory);
    EXPECT_TRUE(a->shared_bins() && b->shared_bins());
    auto own = Nufft::create(be1, image, coils, k, {});
    EXPECT_FALSE(own->shared_bins());
    const PrecomputeCache::Stats st = cache.stats();
    EXPECT_EQ(st.entries, 1u);
    if (device < 0) EXPECT_GT(st.bytes, m * sizeof(float));  // host vectors, charged to the cache
    else EXPECT_GT(st.device_bytes, m * sizeof(float));       // the cache's own backend's arrays

    CArray y = CArray::host({m, coils});
    for (size_t i = 0; i < y.size(); ++i) y.data()[i] = cfloat(std::sin(0.37f * i), std::cos(0.11f * i));
    auto adjoint = [&](Nufft& op, Backend& be) {
        CArray x = be.empty(op.ishape());
        op.adjoint(be.to_device(y), x);
        const CArray h = be.to_host(x);
        return std::vector<cfloat>(h.data(), h.data() + h.size());
    };
    const auto ref = adjoint(*own, *be1);
    auto max_diff = [](const std::vector<cfloat>& u, const std::vector<cfloat>& v) {
        double d = 0;
        for (size_t i = 0; i < u.size(); ++i) d = std::max(d, double(std::abs(u[i] - v[i])));
        return d;
    };
    std::vector<cfloat> ra, rb;
    std::thread t1([&] { for (int i = 0; i < 20; ++i) ra = adjoint(*a, *be1); });
    std::thread t2([&] { for (int i = 0; i < 20; ++i) rb = adjoint(*b, *be2); });
    t1.join();
    t2.join();
    double norm = 0;
    for (const cfloat& v : ref) norm = std::max(norm, double(std::abs(v)));
    // CUDA spreads with atomics: equal up to the order of the sums.
    EXPECT_LT(max_diff(ra, ref) + max_diff(rb, ref), 1e-5 * norm);

    EXPECT_GT(cache.shrink(uint64_t(1) << 40, device), 0u);
    EXPECT_EQ(cache.stats().entries, 0u);
    EXPECT_LT(max_diff(adjoint(*b, *be2), ref), 1e-5 * norm);  // b still holds the evicted set
    a.reset();
    b.reset();
    // Freed with its last plan: nothing left on the host; on a GPU only the cache backend's own scratch
    // (16 KiB on the H200), not the set's blocks.
    if (device < 0) EXPECT_EQ(cache.stats().bytes, 0u);
    else EXPECT_LT(cache.stats().device_bytes, std::min<uint64_t>(st.device_bytes, 64 * 1024));
}

TEST(NoncartesianChain, NufftBinsAreSharedThroughThePrecomputeCacheOnCpu) {
    check_shared_bins([] { return make_cpu_backend(2); }, -1);
}

TEST(NoncartesianChain, NufftBinsAreSharedThroughThePrecomputeCacheOnCuda) {
    if (!cuda_available()) GTEST_SKIP() << "no usable CUDA device";
    check_shared_bins([] { return make_cuda_backend(0); }, 0);
}

TEST(NoncartesianChain, CudaMatchesCpu) {
    if (!cuda_available()) GTEST_SKIP() << "no usable CUDA device";
    const auto spec = spec_of(Trajectory::golden_angle, 64, 4, 64);
    const auto ds = phantom_dataset(spec, "cuda");
    for (auto d : {config::DENSITY_PIPE_MENON, config::DENSITY_ANALYTIC}) {
        const auto a = pixels(run(gridding_chain(d), ds, cpu()).images.at(0));
        const auto b = pixels(run(gridding_chain(d), ds, make_cuda_backend(0)).images.at(0));
        EXPECT_LT(nrmse(b, a), 1e-4) << density_name(d);
    }
    const auto a = pixels(run(fbp_chain(), ds, cpu()).images.at(0));
    const auto b = pixels(run(fbp_chain(), ds, make_cuda_backend(0)).images.at(0));
    EXPECT_LT(nrmse(b, a), 1e-4) << "FBP";
    for (auto n : {config::CgSense::NORMAL_NUFFT_PAIR, config::CgSense::NORMAL_TOEPLITZ}) {
        const auto c = pixels(run(cg_sense_chain(n), ds, cpu()).images.at(0));
        const auto g = pixels(run(cg_sense_chain(n), ds, make_cuda_backend(0)).images.at(0));
        EXPECT_LT(nrmse(g, c), 1e-3) << "CG-SENSE, normal " << config::CgSense::NormalOperator_Name(n);
    }
}

}  // namespace
}  // namespace larmor
