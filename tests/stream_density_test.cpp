// Density weights that come with the data (issue 18, item 4): accumulate_readouts { trajectory_weights:
// true } reads each sample's last traj component as its weight (ISMRMRD: 3 = (kx, ky, w), 4 = (kx, ky,
// kz, w)) and gridding / cg_sense with DENSITY_FROM_STREAM use it as sent.
//
// Acceptance: larmor-phantom writes the Pipe-Menon (or analytic) weights the chain would compute into
// the traj (--weights-in-traj); the chain with the stream's weights must give the image of the chain that
// computes them, to float tolerance; and, for weights the chain cannot compute (a sliding window's frames
// carry the whole set's weights), the image of the user's old workaround: samples pre-multiplied by the
// weights, DENSITY_NONE. Then what is refused: negative, NaN and all-zero weights, a readout without the
// component, a DENSITY_FROM_STREAM chain whose accumulator reads no weights; and that without the option
// a 3-component traj is still a 3D trajectory.
#include <gtest/gtest.h>


#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "gadgets/chain_config.h"
#include "gadgets/factories.h"
#include "gadgets/image_header.h"
#include "gadgets/noncart/density_weights.h"
#include "tests/support/gadget_harness.h"
#include "tests/support/phantom_truth.h"
#include "tools/phantom/phantom.h"

namespace larmor {
namespace {

using phantom::StreamWeights;
using phantom::Trajectory;

std::shared_ptr<Backend> cpu() { return make_cpu_backend(); }

phantom::PhantomSpec spec_of(Trajectory t, int n, int coils, int readouts, StreamWeights w = StreamWeights::none) {
    phantom::PhantomSpec s;
    s.nx = s.ny = n;
    s.coils = coils;
    s.fov_mm[0] = s.fov_mm[1] = 240.0;
    s.ro_oversampling = 2;
    s.trajectory = t;
    s.readouts = readouts;
    s.weights_in_traj = w;
    if (t == Trajectory::stack_of_stars || t == Trajectory::radial3d) s.dims = 3;
    return s;
}

using test::phantom_dataset;

struct ChainOptions {
    ChainOptions(config::DensityCompensation d, bool weights = false, int w = 0, int s = 0)
        : density(d), trajectory_weights(weights), window(w), stride(s) {}
    config::DensityCompensation density;
    bool trajectory_weights;
    int window, stride;
    bool cg_sense = false;
};

config::AccumulateReadouts accumulate(const ChainOptions& o) {
    config::AccumulateReadouts a;
    a.set_trajectory_weights(o.trajectory_weights);
    a.set_window(o.window);
    a.set_stride(o.stride);
    return a;
}

std::vector<std::unique_ptr<Gadget>> chain(const ChainOptions& o, const config::AccumulateReadouts& acc) {
    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(make_accumulate_readouts(acc));
    if (o.cg_sense) {
        config::CgSense cg;
        cg.mutable_solver()->set_iterations(20);
        cg.mutable_solver()->set_tolerance(1e-5f);
        cg.mutable_solver()->set_lambda(0.01f);
        cg.mutable_solver()->set_progress_interval(-1);
        cg.set_density(o.density);
        // The weights are the subject here: one F^H W F for both runs (AUTO may choose differently for
        // weights that are equal in value but not in bits, as their Q keys then differ).
        cg.set_normal(config::CgSense::NORMAL_NUFFT_PAIR);
        g.push_back(make_cg_sense(cg));
    } else {
        config::Gridding gr;
        gr.set_density(o.density);
        g.push_back(make_gridding(gr));
        config::CoilCombine rss;
        rss.set_method(config::COMBINE_RSS);
        g.push_back(make_coil_combine(rss));
    }
    g.push_back(make_image_finish(config::ImageFinish{}));  // float magnitude, unscaled
    return g;
}
std::vector<std::unique_ptr<Gadget>> chain(const ChainOptions& o) { return chain(o, accumulate(o)); }

std::vector<Image> run(std::vector<std::unique_ptr<Gadget>> gadgets, const test::Dataset& ds,
                       std::shared_ptr<Backend> be = cpu()) {
    std::vector<Message> in(ds.acquisitions.begin(), ds.acquisitions.end());
    SessionContext ctx = test::make_session(ds.header_xml, std::move(be));
    ctx.chain_name = "stream_density";
    std::vector<Image> images;
    for (Message& m : test::run_chain(std::move(gadgets), ctx, in))
        if (auto* im = std::get_if<Image>(&m)) images.push_back(std::move(*im));
    return images;
}

// ||x - t|| / ||t|| with no rescaling: stream weights are used as sent, so a wrong scale must show.
double nrmse(const Image& x, const Image& t) {
    const auto a = test::float_pixels(x), b = test::float_pixels(t);
    EXPECT_EQ(a.size(), b.size());
    double num = 0, den = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return den > 0 ? std::sqrt(num / den) : 1.0;
}

// The first image of each run, compared; printed with `what`.
double compare(const char* what, const std::vector<Image>& x, const std::vector<Image>& t) {
    EXPECT_FALSE(x.empty());
    EXPECT_EQ(x.size(), t.size());
    if (x.empty() || t.empty()) return 1.0;
    const double e = nrmse(x[0], t[0]);
    std::printf("[%s] NRMSE stream weights vs computed: %.3g\n", what, e);
    return e;
}

// The weights dataset's traj without its weights (the same coordinates, trajectory_dimensions - 1) and,
// with premultiply, each sample multiplied by its weight: how users fed such data before.
test::Dataset strip_weights(const test::Dataset& ds, bool premultiply) {
    test::Dataset out = ds;
    for (Acquisition& a : out.acquisitions) {
        const size_t td = a.head.trajectory_dimensions, ns = a.head.number_of_samples;
        if (td == 0) continue;
        std::vector<float> traj;
        for (size_t s = 0; s < ns; ++s) {
            traj.insert(traj.end(), a.traj.begin() + long(s * td), a.traj.begin() + long(s * td + td - 1));
            if (premultiply)
                for (size_t c = 0; c < a.head.active_channels; ++c) a.data[c * ns + s] *= a.traj[s * td + td - 1];
        }
        a.traj = std::move(traj);
        a.head.trajectory_dimensions = static_cast<uint16_t>(td - 1);
    }
    return out;
}

// The error that stopped the chain (printed, for the log), or "" when it ran through.
std::string error_of(std::vector<std::unique_ptr<Gadget>> gadgets, const test::Dataset& ds) {
    try {
        run(std::move(gadgets), ds);
    } catch (const std::exception& e) {
        std::printf("refused: %s\n", e.what());
        return e.what();
    }
    return "";
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << "'" << (part) << "' not in: " << (text)

constexpr double kFloatTolerance = 1e-6;

TEST(StreamDensity, PhantomWritesTheWeightsAsTheLastTrajComponent) {
    const auto spec = spec_of(Trajectory::golden_angle, 32, 2, 24, StreamWeights::pipe_menon);
    const auto ds = phantom_dataset(spec, "layout");
    ASSERT_FALSE(ds.acquisitions.empty());
    const Acquisition& a = ds.acquisitions[5];
    ASSERT_EQ(a.head.trajectory_dimensions, 3);
    const RArray coords = phantom::trajectory_coords(spec, 0);
    const RArray w = phantom::stream_density_weights(spec, coords);
    const size_t ns = a.head.number_of_samples;
    for (size_t s = 0; s < ns; ++s) ASSERT_EQ(a.traj[s * 3 + 2], w.data()[5 * ns + s]) << "sample " << s;
    EXPECT_HAS(ds.header_xml, "larmor.trajectory.weights");
    EXPECT_THROW(phantom::validate(spec_of(Trajectory::cartesian, 32, 2, 0, StreamWeights::analytic)),
                 std::invalid_argument);
}

TEST(StreamDensity, RadialGriddingWithStreamWeightsEqualsPipeMenon) {
    const auto with_w = phantom_dataset(spec_of(Trajectory::golden_angle, 64, 4, 64, StreamWeights::pipe_menon), "radial_w");
    const auto plain = strip_weights(with_w, false);
    const auto computed = run(chain({config::DENSITY_PIPE_MENON}), plain);
    const auto streamed = run(chain({config::DENSITY_FROM_STREAM, true}), with_w);
    EXPECT_LT(compare("radial 64^2, 64 golden-angle spokes, 4 coils, gridding, Pipe-Menon", streamed, computed),
              kFloatTolerance);
    ASSERT_FALSE(streamed.empty());
    const auto meta = parse_meta(streamed[0].meta);
    EXPECT_EQ(std::string(meta.as_str("LarmorDensityCompensation")), "from the stream");

    // Used as sent, not normalised: twice the weights, twice the image.
    test::Dataset doubled = with_w;
    for (Acquisition& a : doubled.acquisitions)
        for (size_t s = 0; s < a.head.number_of_samples; ++s) a.traj[s * 3 + 2] *= 2.f;
    const auto twice = run(chain({config::DENSITY_FROM_STREAM, true}), doubled);
    ASSERT_FALSE(twice.empty());
    EXPECT_NEAR(nrmse(twice[0], computed[0]), 1.0, 1e-6);

    // The analytic weights too, and the weights read while the coordinates are computed by the chain.
    const auto with_a =
        phantom_dataset(spec_of(Trajectory::golden_angle, 64, 4, 64, StreamWeights::analytic), "radial_a");
    EXPECT_LT(compare("radial, analytic", run(chain({config::DENSITY_FROM_STREAM, true}), with_a),
                      run(chain({config::DENSITY_ANALYTIC}), plain)),
              kFloatTolerance);
    const ChainOptions o(config::DENSITY_FROM_STREAM, true);
    config::AccumulateReadouts acc = accumulate(o);
    acc.mutable_computed()->set_kind(config::TRAJECTORY_GOLDEN_ANGLE);
    acc.mutable_computed()->set_override_stream(true);
    EXPECT_LT(compare("radial, coordinates computed, weights streamed", run(chain(o, acc), with_w), computed), 1e-4);
}

TEST(StreamDensity, SpiralGriddingWithStreamWeightsEqualsPipeMenonAndHoge) {
    const auto with_w = phantom_dataset(spec_of(Trajectory::spiral, 64, 4, 16, StreamWeights::pipe_menon), "spiral_w");
    const auto plain = strip_weights(with_w, false);
    const auto with_a = phantom_dataset(spec_of(Trajectory::spiral, 64, 4, 16, StreamWeights::analytic), "spiral_a");
    EXPECT_LT(compare("spiral 64^2, 16 interleaves, 4 coils, gridding, Pipe-Menon",
                      run(chain({config::DENSITY_FROM_STREAM, true}), with_w),
                      run(chain({config::DENSITY_PIPE_MENON}), plain)),
              kFloatTolerance);
    EXPECT_LT(compare("spiral, Hoge", run(chain({config::DENSITY_FROM_STREAM, true}), with_a),
                      run(chain({config::DENSITY_ANALYTIC}), plain)),
              kFloatTolerance);
}

TEST(StreamDensity, CgSenseWithStreamWeightsEqualsPipeMenon) {
    const auto with_w = phantom_dataset(spec_of(Trajectory::golden_angle, 64, 4, 64, StreamWeights::pipe_menon), "cg_w");
    const auto plain = strip_weights(with_w, false);
    ChainOptions computed(config::DENSITY_PIPE_MENON), streamed(config::DENSITY_FROM_STREAM, true);
    computed.cg_sense = streamed.cg_sense = true;
    EXPECT_LT(compare("radial 64^2, 64 spokes, 4 coils, CG-SENSE 20 iterations, Pipe-Menon", run(chain(streamed), with_w),
                      run(chain(computed), plain)),
              kFloatTolerance);
}

TEST(StreamDensity, StackOfStarsAndKooshballCarryAFourthComponent) {
    auto stack = spec_of(Trajectory::stack_of_stars, 32, 2, 40);
    stack.nz = 8;
    stack.fov_mm[2] = 80.0;
    stack.weights_in_traj = StreamWeights::pipe_menon;
    const auto sw = phantom_dataset(stack, "stack_w");
    ASSERT_EQ(sw.acquisitions.at(0).head.trajectory_dimensions, 4);
    EXPECT_LT(compare("stack of stars 32^2 x 8, 40 spokes, Pipe-Menon", run(chain({config::DENSITY_FROM_STREAM, true}), sw),
                      run(chain({config::DENSITY_PIPE_MENON}), strip_weights(sw, false))),
              kFloatTolerance);

    auto koosh = spec_of(Trajectory::radial3d, 16, 2, 300);
    koosh.nz = 16;
    koosh.fov_mm[2] = 240.0;
    koosh.weights_in_traj = StreamWeights::analytic;
    const auto kw = phantom_dataset(koosh, "koosh_w");
    EXPECT_LT(compare("kooshball 16^3, 300 spokes, analytic", run(chain({config::DENSITY_FROM_STREAM, true}), kw),
                      run(chain({config::DENSITY_ANALYTIC}), strip_weights(kw, false))),
              kFloatTolerance);
}

// A sliding window's frames carry the whole set's weights (which no per-frame computation gives): each
// frame must equal the old workaround, samples pre-multiplied by the same weights and DENSITY_NONE.
TEST(StreamDensity, RealtimeFramesCarryTheWeightsOfTheirReadouts) {
    const auto with_w = phantom_dataset(spec_of(Trajectory::golden_angle, 64, 4, 96, StreamWeights::pipe_menon), "rt");
    const ChainOptions streamed(config::DENSITY_FROM_STREAM, true, 32, 16);
    const ChainOptions premultiplied(config::DENSITY_NONE, false, 32, 16);
    const auto a = run(chain(streamed), with_w);
    const auto b = run(chain(premultiplied), strip_weights(with_w, true));
    ASSERT_EQ(a.size(), size_t((96 - 32) / 16 + 1));
    ASSERT_EQ(a.size(), b.size());
    double worst = 0;
    for (size_t f = 0; f < a.size(); ++f) worst = std::max(worst, nrmse(a[f], b[f]));
    std::printf("[real-time 64^2, 32-spoke windows every 16, %zu frames] worst NRMSE stream weights vs "
                "pre-multiplied samples: %.3g\n",
                a.size(), worst);
    EXPECT_LT(worst, kFloatTolerance);
}

TEST(StreamDensity, BadWeightsAreRefusedByReadoutSampleAndValue) {
    const auto ds = phantom_dataset(spec_of(Trajectory::radial, 32, 2, 24, StreamWeights::pipe_menon), "bad");
    const ChainOptions o(config::DENSITY_FROM_STREAM, true);
    const uint32_t scan = ds.acquisitions[3].head.scan_counter;
    {
        test::Dataset bad = ds;
        bad.acquisitions[3].traj[7 * 3 + 2] = -0.25f;
        const std::string e = error_of(chain(o), bad);
        EXPECT_HAS(e, "density weight -0.25 at sample 7");
        EXPECT_HAS(e, "negative");
        EXPECT_HAS(e, "scan_counter " + std::to_string(scan));
    }
    {
        test::Dataset bad = ds;
        bad.acquisitions[3].traj[9 * 3 + 2] = std::numeric_limits<float>::quiet_NaN();
        const std::string e = error_of(chain(o), bad);
        EXPECT_HAS(e, "at sample 9");
        EXPECT_HAS(e, "nan");
        EXPECT_HAS(e, "not finite");
        EXPECT_HAS(e, "scan_counter " + std::to_string(scan));
    }
    {
        test::Dataset bad = ds;
        for (Acquisition& a : bad.acquisitions)
            for (size_t s = 0; s < a.head.number_of_samples; ++s) a.traj[s * 3 + 2] = 0.f;
        const std::string e = error_of(chain(o), bad);
        EXPECT_HAS(e, "every density weight");
        EXPECT_HAS(e, "is zero");
        EXPECT_HAS(e, "24 readouts of frame 0");
    }
    {
        // Weights asked for, readouts without the component: refused by the accumulator, naming them.
        const auto plain = strip_weights(ds, false);
        const std::string e = error_of(chain(o), plain);
        EXPECT_HAS(e, "trajectory_weights is set");
        EXPECT_HAS(e, "trajectory_dimensions 2");
        EXPECT_HAS(e, "scan_counter " + std::to_string(plain.acquisitions[0].head.scan_counter));
    }
    {
        // DENSITY_FROM_STREAM without trajectory_weights: the buffer has none; the error says how to read them.
        const auto plain = strip_weights(ds, false);
        const std::string e = error_of(chain({config::DENSITY_FROM_STREAM, false}), plain);
        EXPECT_HAS(e, "DENSITY_FROM_STREAM");
        EXPECT_HAS(e, "trajectory_dimensions 2");
        EXPECT_HAS(e, "trajectory_weights: true");
        EXPECT_HAS(e, "scan_counter " + std::to_string(plain.acquisitions.back().head.scan_counter));
        ChainOptions cg(config::DENSITY_FROM_STREAM, false);
        cg.cg_sense = true;
        EXPECT_HAS(error_of(chain(cg), plain), "DENSITY_FROM_STREAM");
    }
}

// Without trajectory_weights nothing changes: a 3-component traj is a 3D trajectory (on this 2D encoding
// its third axis has one pixel, so weights beyond +-0.5 are refused as coordinates), and 4 components
// are refused with a pointer to trajectory_weights.
TEST(StreamDensity, WithoutTheOptionThreeComponentsAreStill3D) {
    const auto ds = phantom_dataset(spec_of(Trajectory::radial, 32, 2, 24, StreamWeights::pipe_menon), "legacy");
    const std::string e = error_of(chain({config::DENSITY_PIPE_MENON}), ds);
    EXPECT_HAS(e, "axis 2 is outside the k-space of a 1-pixel axis");
    EXPECT_HAS(e, "trajectory_weights: true");  // the likely cause, named

    test::Dataset four = ds;
    for (Acquisition& a : four.acquisitions) {
        std::vector<float> t;
        for (size_t s = 0; s < a.head.number_of_samples; ++s) {
            t.insert(t.end(), {a.traj[s * 3], a.traj[s * 3 + 1], 0.f, a.traj[s * 3 + 2]});
        }
        a.traj = t;
        a.head.trajectory_dimensions = 4;
    }
    EXPECT_HAS(error_of(chain({config::DENSITY_PIPE_MENON}), four), "trajectory_weights: true");
}

TEST(StreamDensity, CudaMatchesCpu) {
    if (!cuda_available()) GTEST_SKIP() << "no usable CUDA device";
    const auto with_w = phantom_dataset(spec_of(Trajectory::golden_angle, 64, 4, 64, StreamWeights::pipe_menon), "cuda");
    const ChainOptions o(config::DENSITY_FROM_STREAM, true);
    const auto gpu = run(chain(o), with_w, make_cuda_backend(0));
    EXPECT_LT(compare("CUDA vs CPU, gridding", gpu, run(chain(o), with_w)), 1e-4);
    // On the device itself, the stream's weights and the same weights pre-multiplied agree to float.
    EXPECT_LT(compare("CUDA, stream weights vs pre-multiplied", gpu,
                      run(chain({config::DENSITY_NONE}), strip_weights(with_w, true), make_cuda_backend(0))),
              kFloatTolerance);
    ChainOptions cg = o;
    cg.cg_sense = true;
    EXPECT_LT(compare("CUDA vs CPU, CG-SENSE", run(chain(cg), with_w, make_cuda_backend(0)), run(chain(cg), with_w)),
              1e-3);
}

}  // namespace
}  // namespace larmor
