// Trajectories computed from the chain (accumulate_readouts { computed { ... } }) against the same
// larmor-phantom data carrying ISMRMRD traj: for every kind the coordinates handed on and the gridded
// images agree to float rounding. Then the choice between the stream's traj and the computed one
// (override_stream, readouts with and without), the refused inputs (no traj and no computed, a wrong
// center_sample, bad parameters, geometries a computed trajectory cannot have), the header-type
// warning, the cache, and the shipped chain.
#include <gtest/gtest.h>


#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/text_format.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "gadgets/chain_config.h"
#include "gadgets/factories.h"
#include "gadgets/noncart/computed_trajectory.h"
#include "tests/support/gadget_harness.h"
#include "tests/support/phantom_truth.h"
#include "tools/phantom/phantom.h"

namespace larmor {
namespace {

using phantom::Trajectory;

using test::phantom_dataset;

phantom::PhantomSpec spec_of(Trajectory t, int n, int readouts) {
    phantom::PhantomSpec s;
    s.nx = s.ny = n;
    s.coils = 2;
    s.fov_mm[0] = s.fov_mm[1] = 240.0;
    s.ro_oversampling = 2;
    s.trajectory = t;
    s.readouts = readouts;
    if (t == Trajectory::stack_of_stars || t == Trajectory::radial3d) {
        s.dims = 3;
        s.nz = t == Trajectory::radial3d ? n : 4;
        s.fov_mm[2] = 240.0 * s.nz / n;
    }
    return s;
}

config::ComputedTrajectory parse_computed(const std::string& text) {
    config::ComputedTrajectory c;
    if (!google::protobuf::TextFormat::ParseFromString(text, &c)) throw std::runtime_error("bad pbtxt: " + text);
    return c;
}

config::AccumulateReadouts accumulate(const std::string& computed = "") {
    config::AccumulateReadouts a;
    if (!computed.empty()) *a.mutable_computed() = parse_computed(computed);
    return a;
}

std::vector<std::unique_ptr<Gadget>> accumulate_only(const config::AccumulateReadouts& a) {
    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(make_accumulate_readouts(a));
    return g;
}

std::vector<std::unique_ptr<Gadget>> gridding_chain(const config::AccumulateReadouts& a) {
    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(make_accumulate_readouts(a));
    config::Gridding gr;
    gr.set_density(config::DENSITY_ANALYTIC);  // closed form: quick, and any weights serve a comparison
    g.push_back(make_gridding(gr));
    config::CoilCombine rss;
    rss.set_method(config::COMBINE_RSS);
    g.push_back(make_coil_combine(rss));
    g.push_back(make_image_finish(config::ImageFinish{}));
    return g;
}

std::vector<Message> run(std::vector<std::unique_ptr<Gadget>> chain, const test::Dataset& ds) {
    std::vector<Message> in(ds.acquisitions.begin(), ds.acquisitions.end());
    SessionContext ctx = test::make_session(ds.header_xml, make_cpu_backend());
    ctx.chain_name = "computed";
    return test::run_chain(std::move(chain), ctx, in);
}

template <class T>
std::vector<T*> all_of(std::vector<Message>& out) {
    std::vector<T*> r;
    for (Message& m : out)
        if (auto* t = std::get_if<T>(&m)) r.push_back(t);
    return r;
}

std::vector<std::vector<double>> images_of(std::vector<Message> out) {
    std::vector<std::vector<double>> r;
    for (Image* im : all_of<Image>(out)) r.push_back(test::float_pixels(*im));
    return r;
}

// max |a - b| / max |a| over two coordinate arrays of one shape.
double relative_difference(const RArray& a, const RArray& b) {
    EXPECT_EQ(a.shape(), b.shape());
    if (a.shape() != b.shape()) return 1.0;
    double diff = 0.0, peak = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, double(std::abs(a.data()[i] - b.data()[i])));
        peak = std::max(peak, double(std::abs(a.data()[i])));
    }
    return diff / peak;
}

double relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
    EXPECT_EQ(a.size(), b.size());
    if (a.size() != b.size() || a.empty()) return 1.0;
    double diff = 0.0, peak = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, std::abs(a[i] - b[i]));
        peak = std::max(peak, std::abs(a[i]));
    }
    return diff / peak;
}

// A phantom written twice, with traj and without, and what a chain computes for the latter.
struct Pair {
    test::Dataset with, without;
    std::string computed;  // the ComputedTrajectory text larmor-phantom names for the spec
};

Pair pair_of(phantom::PhantomSpec spec, const std::string& tag) {
    Pair p;
    p.with = phantom_dataset(spec, tag + "_traj");
    spec.write_traj = false;
    p.without = phantom_dataset(spec, tag + "_notraj");
    p.computed = phantom::computed_trajectory_pbtxt(spec);
    return p;
}

struct KindCase {
    const char* name;
    Trajectory trajectory;
    int matrix, readouts, repetitions;
    const char* expected_kind;  // what larmor-phantom's computed text must name
};

void PrintTo(const KindCase& c, std::ostream* os) { *os << c.name; }

class ComputedTrajectoryKinds : public ::testing::TestWithParam<KindCase> {};

TEST_P(ComputedTrajectoryKinds, CoordinatesAndImagesEqualThoseOfTheStreamsTraj) {
    const KindCase c = GetParam();
    auto spec = spec_of(c.trajectory, c.matrix, c.readouts);
    spec.repetitions = c.repetitions;
    const Pair p = pair_of(spec, c.name);
    EXPECT_NE(p.computed.find(c.expected_kind), std::string::npos) << p.computed;
    for (const Acquisition& a : p.without.acquisitions) {
        ASSERT_EQ(a.head.trajectory_dimensions, 0);
        ASSERT_TRUE(a.traj.empty());
    }

    // The coordinates accumulate_readouts hands on, buffer by buffer (one per repetition).
    std::vector<Message> ref = run(accumulate_only(accumulate()), p.with);
    std::vector<Message> cmp = run(accumulate_only(accumulate(p.computed)), p.without);
    const auto tr = all_of<TrajectoryBuffer>(ref), tc = all_of<TrajectoryBuffer>(cmp);
    ASSERT_EQ(tr.size(), size_t(c.repetitions));
    ASSERT_EQ(tc.size(), tr.size());
    double worst = 0.0;
    for (size_t i = 0; i < tr.size(); ++i) {
        EXPECT_EQ(tc[i]->image, tr[i]->image);
        EXPECT_EQ(tc[i]->partitions, tr[i]->partitions);
        worst = std::max(worst, relative_difference(tr[i]->coords, tc[i]->coords));
    }
    // The stream's traj went through Gadgetron's normalised units (k / N as float, times N back): with a
    // power-of-two N that is exact, so the two agree bit for bit; allow float rounding regardless.
    EXPECT_LE(worst, 1e-6) << c.name;

    // The images of a gridding chain.
    const auto ir = images_of(run(gridding_chain(accumulate()), p.with));
    const auto ic = images_of(run(gridding_chain(accumulate(p.computed)), p.without));
    ASSERT_EQ(ir.size(), size_t(c.repetitions));
    ASSERT_EQ(ic.size(), ir.size());
    double image_worst = 0.0;
    for (size_t i = 0; i < ir.size(); ++i) image_worst = std::max(image_worst, relative_difference(ir[i], ic[i]));
    std::printf("[%s %d^2, %d readouts x %d repetitions] computed vs stream traj: coordinates %.3g, images %.3g "
                "(max difference / max)\n",
                c.name, c.matrix, c.readouts, c.repetitions, worst, image_worst);
    EXPECT_LE(image_worst, 1e-5) << c.name;
    // And the reconstruction is an image of the object, not of nothing.
    const auto truth = test::rss_object(spec, 3);
    EXPECT_LT(test::scaled_nrmse(ic[0], truth), 0.45) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, ComputedTrajectoryKinds,
    ::testing::Values(KindCase{"radial", Trajectory::radial, 32, 51, 2, "TRAJECTORY_RADIAL"},
                      // Two repetitions: the golden sequences continue across them.
                      KindCase{"golden_angle", Trajectory::golden_angle, 32, 51, 2, "TRAJECTORY_GOLDEN_ANGLE"},
                      KindCase{"tiny_golden", Trajectory::tiny_golden, 32, 51, 2, "TRAJECTORY_TINY_GOLDEN_ANGLE"},
                      KindCase{"spiral", Trajectory::spiral, 32, 8, 1, "TRAJECTORY_SPIRAL"},
                      KindCase{"stack_of_stars", Trajectory::stack_of_stars, 16, 26, 1, "TRAJECTORY_STACK_OF_STARS"},
                      KindCase{"kooshball", Trajectory::radial3d, 10, 160, 2, "TRAJECTORY_KOOSHBALL"}),
    [](const ::testing::TestParamInfo<KindCase>& info) { return std::string(info.param.name); });

TEST(ComputedTrajectory, InterleavedRadialIsUniformInGroups) {
    // larmor-phantom writes no interleaved radial data: its spokes are the uniform ones reordered, so
    // uniform data reordered into the groups' sequence must reconstruct to the same image.
    const int spokes = 48, groups = 4;
    const Pair p = pair_of(spec_of(Trajectory::radial, 32, spokes), "interleaved");
    test::Dataset reordered = p.without;
    // Interleaved readout i = (group g, step j) sits at uniform angle j x groups + g (proto comment).
    const size_t per_group = spokes / groups;
    for (size_t i = 0; i < size_t(spokes); ++i) {
        const size_t g = i / per_group, j = i % per_group;
        reordered.acquisitions[i] = p.without.acquisitions[j * groups + g];
        reordered.acquisitions[i].head.idx.kspace_encode_step_1 = uint16_t(i);
        reordered.acquisitions[i].head.flags = p.without.acquisitions[i].head.flags;
    }
    const std::string interleaved =
        "kind: TRAJECTORY_INTERLEAVED_RADIAL spokes: " + std::to_string(spokes) +
        " interleaves: " + std::to_string(groups);
    const auto ref = images_of(run(gridding_chain(accumulate(p.computed)), p.without));
    const auto got = images_of(run(gridding_chain(accumulate(interleaved)), reordered));
    ASSERT_EQ(ref.size(), 1u);
    ASSERT_EQ(got.size(), 1u);
    // The same samples at the same positions, gridded in another order: equal to float rounding.
    EXPECT_LE(relative_difference(ref[0], got[0]), 1e-4);
    // Taken as uniform instead, the reordered spokes land at the wrong angles.
    const auto wrong = images_of(run(gridding_chain(accumulate(p.computed)), reordered));
    EXPECT_GT(relative_difference(ref[0], wrong.at(0)), 0.1);
}

TEST(ComputedTrajectory, StreamTrajWinsUnlessOverridden) {
    const Pair p = pair_of(spec_of(Trajectory::golden_angle, 32, 51), "override");
    const auto ref = images_of(run(gridding_chain(accumulate()), p.with));
    ASSERT_EQ(ref.size(), 1u);
    // A computed trajectory that is wrong for these data is not used while every readout carries traj.
    const auto kept = images_of(run(gridding_chain(accumulate("kind: TRAJECTORY_RADIAL spokes: 51")), p.with));
    EXPECT_EQ(kept.at(0), ref[0]);
    // Readouts without traj among readouts with: the missing ones are computed.
    test::Dataset mixed = p.with;
    for (size_t i = 0; i < mixed.acquisitions.size(); i += 2) {
        mixed.acquisitions[i].head.trajectory_dimensions = 0;
        mixed.acquisitions[i].traj.clear();
    }
    const auto filled = images_of(run(gridding_chain(accumulate(p.computed)), mixed));
    EXPECT_LE(relative_difference(ref[0], filled.at(0)), 1e-5);
    // override_stream: the stream's traj is ignored, however wrong (here each readout carries the next
    // one's spoke).
    test::Dataset scrambled = p.with;
    for (size_t i = 0; i < scrambled.acquisitions.size(); ++i)
        scrambled.acquisitions[i].traj = p.with.acquisitions[(i + 1) % p.with.acquisitions.size()].traj;
    const auto overridden =
        images_of(run(gridding_chain(accumulate(p.computed + " override_stream: true")), scrambled));
    EXPECT_LE(relative_difference(ref[0], overridden.at(0)), 1e-5);
    const auto scrambled_image = images_of(run(gridding_chain(accumulate(p.computed)), scrambled));
    EXPECT_GT(relative_difference(ref[0], scrambled_image.at(0)), 0.1);
}

std::string error_of(std::vector<std::unique_ptr<Gadget>> chain, const test::Dataset& ds) {
    try {
        run(std::move(chain), ds);
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

TEST(ComputedTrajectory, ReadoutsItCannotDescribeAreRefusedByName) {
    const Pair p = pair_of(spec_of(Trajectory::golden_angle, 32, 20), "refused");
    {
        // No traj and nothing to compute it from: the error says how to set `computed`.
        const std::string e = error_of(accumulate_only(accumulate()), p.without);
        EXPECT_NE(e.find("trajectory_dimensions 0"), std::string::npos) << e;
        EXPECT_NE(e.find("computed { kind:"), std::string::npos) << e;
        EXPECT_NE(e.find("scan_counter 1"), std::string::npos) << e;
    }
    {
        test::Dataset bad = p.without;
        bad.acquisitions[3].head.center_sample = 5;  // 64 samples: k = 0 is sample 32
        const std::string e = error_of(accumulate_only(accumulate(p.computed)), bad);
        EXPECT_NE(e.find("center_sample 5"), std::string::npos) << e;
        EXPECT_NE(e.find("k = 0 at sample 32 of 64"), std::string::npos) << e;
        EXPECT_NE(e.find("scan_counter 4"), std::string::npos) << e;
    }
    {
        // A spiral starts at the centre: a spoke's centre sample is wrong for it.
        auto spec = spec_of(Trajectory::spiral, 16, 4);
        spec.write_traj = false;
        test::Dataset spiral = phantom_dataset(spec, "spiral_centre");
        for (Acquisition& a : spiral.acquisitions) a.head.center_sample = a.head.number_of_samples / 2;
        const std::string e = error_of(accumulate_only(accumulate(phantom::computed_trajectory_pbtxt(spec))), spiral);
        EXPECT_NE(e.find("k = 0 at sample 0"), std::string::npos) << e;
    }
    {
        // Golden angles continue across repetitions by the header's kspace_encoding_step_1 maximum; an
        // index beyond it in a later repetition makes that ambiguous.
        auto spec = spec_of(Trajectory::golden_angle, 32, 20);
        spec.repetitions = 2;
        spec.write_traj = false;
        test::Dataset two = phantom_dataset(spec, "golden_reps");
        two.acquisitions[25].head.idx.kspace_encode_step_1 = 300;
        const std::string e = error_of(accumulate_only(accumulate(p.computed)), two);
        EXPECT_NE(e.find("kspace_encode_step_1 300"), std::string::npos) << e;
        EXPECT_NE(e.find("maximum 19"), std::string::npos) << e;
        EXPECT_NE(e.find("restart_each_repetition"), std::string::npos) << e;
        // With restart_each_repetition both repetitions get the same spokes (index = kspace_encode_step_1).
        two.acquisitions[25].head.idx.kspace_encode_step_1 = 5;
        std::vector<Message> out =
            run(accumulate_only(accumulate(p.computed + " restart_each_repetition: true")), two);
        const auto tb = all_of<TrajectoryBuffer>(out);
        ASSERT_EQ(tb.size(), 2u);
        EXPECT_EQ(relative_difference(tb[0]->coords, tb[1]->coords), 0.0);
    }
    {
        // A computed trajectory has one k range for all axes: a rectangular matrix is refused.
        test::Dataset rect = p.without;
        ISMRMRD::IsmrmrdHeader h;
        ISMRMRD::deserialize(rect.header_xml.c_str(), h);
        h.encoding[0].reconSpace.matrixSize.y = 24;
        std::ostringstream xml;
        ISMRMRD::serialize(h, xml);
        rect.header_xml = xml.str();
        const std::string e = error_of(accumulate_only(accumulate(p.computed)), rect);
        EXPECT_NE(e.find("32 x 24"), std::string::npos) << e;
    }
    {
        // A stack of stars needs partitions.
        const std::string e =
            error_of(accumulate_only(accumulate("kind: TRAJECTORY_STACK_OF_STARS spokes: 20")), p.without);
        EXPECT_NE(e.find("z = 1"), std::string::npos) << e;
    }
    {
        // A 2D computed trajectory among 3D streamed ones.
        auto spec = spec_of(Trajectory::radial3d, 8, 30);
        test::Dataset koosh = phantom_dataset(spec, "koosh_mixed");
        koosh.acquisitions[2].head.trajectory_dimensions = 0;
        koosh.acquisitions[2].traj.clear();
        const std::string e = error_of(accumulate_only(accumulate("kind: TRAJECTORY_GOLDEN_ANGLE")), koosh);
        EXPECT_NE(e.find("trajectory_dimensions 2 (computed TRAJECTORY_GOLDEN_ANGLE), earlier readouts had 3"),
                  std::string::npos)
            << e;
    }
}

TEST(ComputedTrajectory, BadParametersAreConfigErrorsNamingFieldAndValue) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"", "computed.kind 0 (unset)"},
        {"kind: TRAJECTORY_RADIAL", "computed.spokes 0 for TRAJECTORY_RADIAL"},
        {"kind: TRAJECTORY_RADIAL spokes: -3", "computed.spokes -3"},
        {"kind: TRAJECTORY_STACK_OF_STARS spokes: 70000", "computed.spokes 70000"},
        {"kind: TRAJECTORY_INTERLEAVED_RADIAL spokes: 12", "computed.interleaves 0"},
        {"kind: TRAJECTORY_INTERLEAVED_RADIAL spokes: 12 interleaves: 5",
         "computed.interleaves 5 does not divide computed.spokes 12"},
        {"kind: TRAJECTORY_SPIRAL spiral_density: 2", "computed.interleaves 0"},
        {"kind: TRAJECTORY_SPIRAL interleaves: 8", "computed.spiral_density 0"},
        {"kind: TRAJECTORY_SPIRAL interleaves: 8 spiral_density: 0.5", "computed.spiral_density 0.5"},
        {"kind: TRAJECTORY_TINY_GOLDEN_ANGLE", "computed.tiny_golden_n 0"},
        {"kind: TRAJECTORY_GOLDEN_ANGLE tiny_golden_n: 7",
         "computed.tiny_golden_n 7 does not apply to TRAJECTORY_GOLDEN_ANGLE"},
        {"kind: TRAJECTORY_GOLDEN_ANGLE spokes: 100", "computed.spokes 100 does not apply"},
        {"kind: TRAJECTORY_RADIAL spokes: 10 rotate_partitions: true",
         "computed.rotate_partitions true does not apply"},
        {"kind: TRAJECTORY_RADIAL spokes: 10 restart_each_repetition: true", "computed.restart_each_repetition true"},
        {"kind: TRAJECTORY_KOOSHBALL full_circle: true", "computed.full_circle true does not apply"},
        {"kind: TRAJECTORY_SPIRAL interleaves: 8 spiral_density: 2 spokes: 8", "computed.spokes 8 does not apply"},
    };
    for (const auto& [text, expected] : cases) {
        SCOPED_TRACE(text);
        config::AccumulateReadouts a;
        *a.mutable_computed() = parse_computed(text);
        try {
            make_accumulate_readouts(a);
            ADD_FAILURE() << "accepted";
        } catch (const ConfigError& e) {
            EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
        }
    }
    // And what is valid is accepted.
    for (const char* ok : {"kind: TRAJECTORY_RADIAL spokes: 10 full_circle: true", "kind: TRAJECTORY_GOLDEN_ANGLE",
                           "kind: TRAJECTORY_TINY_GOLDEN_ANGLE tiny_golden_n: 7 restart_each_repetition: true",
                           "kind: TRAJECTORY_INTERLEAVED_RADIAL spokes: 12 interleaves: 4",
                           "kind: TRAJECTORY_KOOSHBALL override_stream: true",
                           "kind: TRAJECTORY_STACK_OF_STARS spokes: 10 rotate_partitions: true",
                           "kind: TRAJECTORY_SPIRAL interleaves: 8 spiral_density: 1"}) {
        EXPECT_NO_THROW(make_accumulate_readouts(accumulate(ok))) << ok;
    }
}

TEST(ComputedTrajectory, HeaderTypeThatDisagreesIsWarnedOnce) {
    // Golden-angle data (header trajectory "goldenangle") reconstructed as uniform radial: allowed (the
    // chain says so), one warning for the session.
    const Pair p = pair_of(spec_of(Trajectory::golden_angle, 16, 10), "warn");
    std::ostringstream log;
    auto previous = spdlog::default_logger();
    auto capture = std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
    spdlog::set_default_logger(capture);
    std::vector<Message> out;
    try {
        out = run(accumulate_only(accumulate("kind: TRAJECTORY_RADIAL spokes: 10")), p.without);
        out = run(accumulate_only(accumulate(p.computed)), p.without);
    } catch (...) {
        spdlog::set_default_logger(previous);
        throw;
    }
    spdlog::set_default_logger(previous);
    const std::string text = log.str();
    const std::string warning =
        "the header's encoding trajectory is 'goldenangle' but the chain computes TRAJECTORY_RADIAL";
    const size_t first = text.find(warning);
    EXPECT_NE(first, std::string::npos) << text;
    EXPECT_EQ(text.find(warning, first + 1), std::string::npos) << "warned more than once:\n" << text;
    EXPECT_EQ(text.find("but the chain computes TRAJECTORY_GOLDEN_ANGLE"), std::string::npos) << text;
    EXPECT_EQ(all_of<TrajectoryBuffer>(out).size(), 1u);
}

ISMRMRD::ISMRMRD_AcquisitionHeader readout(uint16_t e1, uint16_t repetition, uint16_t samples) {
    ISMRMRD::ISMRMRD_AcquisitionHeader h{};
    h.idx.kspace_encode_step_1 = e1;
    h.idx.repetition = repetition;
    h.number_of_samples = samples;
    h.center_sample = samples / 2;
    return h;
}

TEST(ComputedTrajectory, ARepeatedSetIsGeneratedOnceAndEqualsTheGenerator) {
    EncodingGeometry g;
    g.recon_matrix[0] = g.recon_matrix[1] = 256;
    g.encoded_matrix[0] = 512;
    g.encoded_matrix[1] = 256;
    g.e1_max = 499;
    ComputedTrajectory uniform(parse_computed("kind: TRAJECTORY_RADIAL spokes: 500"));
    uniform.bind(g, 512);
    std::vector<float> out(512 * 2);
    for (uint16_t rep = 0; rep < 3; ++rep)
        for (uint16_t e1 = 0; e1 < 500; ++e1) uniform.fill(readout(e1, rep, 512), 0, out.data(), 2);
    EXPECT_EQ(uniform.sets_generated(), 1u);  // 1500 readouts, one generation
    // The last readout is spoke 499 of the core generator (256-matrix, 2x oversampled readout).
    trajectory::RadialSpec s;
    s.spokes = 500;
    s.samples = 256;
    s.oversampling = 2;
    s.kmax = 128;
    const RArray set = trajectory::radial_2d(s);
    EXPECT_TRUE(std::equal(out.begin(), out.end(), set.data() + size_t(499) * 512 * 2));

    // Golden angles never repeat: each readout is computed alone, no set, and readout 7 of repetition 1 is
    // spoke 507 of the continuing sequence.
    ComputedTrajectory golden(parse_computed("kind: TRAJECTORY_GOLDEN_ANGLE"));
    golden.bind(g, 512);
    golden.fill(readout(7, 1, 512), 0, out.data(), 2);
    EXPECT_EQ(golden.sets_generated(), 0u);
    s.spokes = 1;
    s.order = trajectory::RadialOrder::golden;
    s.first_readout = 507;
    const RArray spoke = trajectory::radial_2d(s);
    EXPECT_TRUE(std::equal(out.begin(), out.end(), spoke.data()));
    // A readout the size of neither the matrix nor twice it: oversampling 1, the same +-N/2 range.
    ComputedTrajectory odd(parse_computed("kind: TRAJECTORY_RADIAL spokes: 500"));
    odd.bind(g, 300);
    std::vector<float> o(300 * 2);
    odd.fill(readout(0, 0, 300), 0, o.data(), 2);  // angle 0: along kx
    EXPECT_FLOAT_EQ(o[0], -128.0f);
    EXPECT_FLOAT_EQ(o[150 * 2], 0.0f);
    EXPECT_NEAR(o[299 * 2], 128.0f * 149 / 150, 1e-4);
}

TEST(ComputedTrajectory, ShippedChainReconstructsDataWithoutTraj) {
    const config::Chain chain = load_chain_file(LARMOR_SOURCE_DIR "/config", "radial_golden_computed");
    ASSERT_EQ(chain.gadget(1).kind_case(), config::Gadget::kAccumulateReadouts);
    const auto& computed = chain.gadget(1).accumulate_readouts().computed();
    EXPECT_EQ(computed.kind(), config::TRAJECTORY_GOLDEN_ANGLE);
    const Pair p = pair_of(spec_of(Trajectory::golden_angle, 32, 51), "shipped");
    const auto ref = images_of(run(gridding_chain(accumulate()), p.with));
    const auto got = images_of(run(gridding_chain(chain.gadget(1).accumulate_readouts()), p.without));
    EXPECT_LE(relative_difference(ref.at(0), got.at(0)), 1e-5);
}

}  // namespace
}  // namespace larmor
