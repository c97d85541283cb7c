// Chain configuration (Protobuf text and Gadgetron XML) and the threaded chain runner.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "gadgets/bounded_queue.h"
#include "gadgets/chain.h"
#include "gadgets/chain_config.h"

using namespace larmor;

namespace {
const std::string kConfigDir = std::string(LARMOR_SOURCE_DIR) + "/config";

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

Acquisition make_acq(uint32_t scan, uint16_t samples = 4, uint16_t channels = 2) {
    Acquisition a;
    a.head.scan_counter = scan;
    a.head.number_of_samples = samples;
    a.head.active_channels = channels;
    a.data.assign(size_t{samples} * channels, cfloat(float(scan), 0));
    return a;
}

// Records what it sees, optionally throwing at a given scan counter.
class Probe final : public Gadget {
public:
    Probe(std::vector<uint32_t>* seen, int throw_at = -1) : seen_(seen), throw_at_(throw_at) {}
    void process(Message msg, Emitter& out) override {
        if (auto* a = std::get_if<Acquisition>(&msg)) {
            if (int(a->head.scan_counter) == throw_at_)
                throw std::runtime_error("probe refuses scan " + std::to_string(throw_at_));
            seen_->push_back(uint32_t{a->head.scan_counter});  // a copy: the header is packed
        }
        out.emit(std::move(msg));
    }
    void finish(Emitter& out) override { out.emit(Text{"probe finished"}); }

private:
    std::vector<uint32_t>* seen_;
    int throw_at_;
};
}  // namespace

TEST(ChainConfig, ParsesEveryShippedChain) {
    auto names = list_chains(kConfigDir);
    ASSERT_FALSE(names.empty());
    for (const auto& n : names) {
        SCOPED_TRACE(n);
        config::Chain c = load_chain_file(kConfigDir, n);
        EXPECT_GT(c.gadget_size(), 0);
    }
}

TEST(ChainConfig, CartesianChainHasTheAgreedOrder) {
    config::Chain c = load_chain_file(kConfigDir, "cartesian");
    ASSERT_EQ(c.gadget_size(), 6);
    EXPECT_TRUE(c.gadget(0).has_noise_adjust());
    EXPECT_TRUE(c.gadget(1).has_remove_ro_oversampling());
    EXPECT_TRUE(c.gadget(2).has_accumulate_trigger());
    EXPECT_TRUE(c.gadget(3).has_fft());
    EXPECT_TRUE(c.gadget(4).has_coil_combine());
    EXPECT_TRUE(c.gadget(5).has_image_finish());
}

TEST(ChainConfig, GadgetronDefaultXmlTranslatesToTheSameStages) {
    config::Chain c = load_chain_file(kConfigDir, "default.xml");
    ASSERT_EQ(c.gadget_size(), 6);  // BucketToBuffer merges into the accumulator, ImageFinish into Extract
    EXPECT_TRUE(c.gadget(0).has_noise_adjust());
    EXPECT_TRUE(c.gadget(2).has_accumulate_trigger());
    EXPECT_EQ(c.gadget(2).name(), "AccTrig");
    EXPECT_TRUE(c.gadget(5).has_image_finish());
}

TEST(ChainConfig, UnknownGadgetListsTheValidTypes) {
    std::string e = error_of([] { parse_chain("gadget { fancy_recon {} }"); });
    EXPECT_NE(e.find("unknown gadget type or field 'fancy_recon' in a gadget entry; valid: "), std::string::npos) << e;
    EXPECT_NE(e.find("noise_adjust"), std::string::npos) << e;
    EXPECT_NE(e.find("image_finish"), std::string::npos) << e;
}

TEST(ChainConfig, UnknownParameterListsTheValidOnes) {
    std::string e = error_of([] { parse_chain("gadget { coil_combine { methd: COMBINE_RSS } }"); });
    EXPECT_NE(e.find("unknown parameter 'methd' for CoilCombine; valid parameters: method, kernel_size"),
              std::string::npos) << e;
    e = error_of([] { parse_chain("gadget { coil_combine { method: COMBINE_MAGIC } }"); });
    EXPECT_NE(e.find("COMBINE_MAGIC"), std::string::npos) << e;
}

// protobuf's text parser would skip a reserved (retired) name without a word and run the default; the
// loader refuses it at its line and column and says where the parameter went.
TEST(ChainConfig, ParametersThatMovedAreRefusedWithTheirNewPlace) {
    const std::string e = error_of([] { parse_chain("gadget { cg_sense { iterations: 100 } }", "old.pbtxt"); });
    // (protobuf places the error on the token after the name: the colon.)
    EXPECT_EQ(e, "old.pbtxt: line 1, column 31: parameter 'iterations' of CgSense has moved: write solver { "
                 "iterations: ... } instead");
    EXPECT_NE(error_of([] { parse_chain("gadget {\n cg_sense {\n  map_stride: 2\n  nufft_tolerance: 1e-4\n }\n}"); })
                  .find("line 4, column 18: parameter 'nufft_tolerance' of CgSense has moved: write nufft { tolerance: "
                        "... } instead"),
              std::string::npos);
    for (const char* old : {"tolerance: 1e-5", "lambda: 0.1", "progress_interval: 5", "deadline_ms: 100"}) {
        SCOPED_TRACE(old);
        const std::string m = error_of([&] { parse_chain(std::string("gadget { cg_sense { ") + old + " } }"); });
        EXPECT_NE(m.find("has moved: write solver { "), std::string::npos) << m;
    }
    // A misspelt knob inside the settings lists the settings' own names.
    EXPECT_NE(error_of([] { parse_chain("gadget { cg_sense { solver { iteratons: 3 } } }"); })
                  .find("unknown parameter 'iteratons' for SolverSettings; valid parameters: iterations, tolerance"),
              std::string::npos);
    // The new form, and binary identity with the generated message (the strict schema is a copy).
    const config::Chain c = parse_chain(
        "gadget { cg_sense { solver { iterations: 12 tolerance: 0 lambda: 0.5 progress_interval: -1 deadline_ms: 80 } "
        "nufft { tolerance: 1e-4 upsampling: 1.5 } map_stride: 3 } }");
    const config::CgSense& cg = c.gadget(0).cg_sense();
    EXPECT_EQ(cg.solver().iterations(), 12);
    EXPECT_TRUE(cg.solver().has_tolerance());
    EXPECT_EQ(cg.solver().tolerance(), 0.f);
    EXPECT_FLOAT_EQ(cg.solver().lambda(), 0.5f);
    EXPECT_EQ(cg.solver().progress_interval(), -1);
    EXPECT_FLOAT_EQ(cg.solver().deadline_ms(), 80.f);
    EXPECT_FLOAT_EQ(cg.nufft().tolerance(), 1e-4f);
    EXPECT_FLOAT_EQ(cg.nufft().upsampling(), 1.5f);
    EXPECT_EQ(cg.map_stride(), 3);
}

TEST(ChainConfig, XmlCgSenseParametersReachTheSolverSettings) {
    auto xml = [](const std::string& props) {
        return "<gadgetronStreamConfiguration><gadget><name>CG</name><classname>gpuCgSenseGadget</classname>" + props +
               "</gadget></gadgetronStreamConfiguration>";
    };
    auto prop = [](const std::string& name, const std::string& value) {
        return "<property><name>" + name + "</name><value>" + value + "</value></property>";
    };
    const config::Chain c = parse_chain(xml(prop("number_of_iterations", "12") + prop("cg_limit", "1e-5") +
                                            prop("kappa", "0.03") + prop("solver.deadline_ms", "250") +
                                            prop("nufft.upsampling", "1.5") + prop("oversampling_factor", "1.5")));
    const config::CgSense& cg = c.gadget(0).cg_sense();
    EXPECT_EQ(cg.solver().iterations(), 12);
    EXPECT_FLOAT_EQ(cg.solver().tolerance(), 1e-5f);
    EXPECT_FLOAT_EQ(cg.solver().lambda(), 0.03f);
    EXPECT_FLOAT_EQ(cg.solver().deadline_ms(), 250.f);
    EXPECT_FLOAT_EQ(cg.nufft().upsampling(), 1.5f);
    // Bad values are refused by property and value; Larmor's old flat names by where they went.
    std::string e = error_of([&] { parse_chain(xml(prop("number_of_iterations", "many"))); });
    EXPECT_NE(e.find("property number_of_iterations = 'many' is not a valid int32"), std::string::npos) << e;
    e = error_of([&] { parse_chain(xml(prop("deadline_ms", "100"))); });
    EXPECT_NE(e.find("property deadline_ms has moved: name it solver.deadline_ms instead"), std::string::npos) << e;
    e = error_of([&] { parse_chain(xml(prop("nufft_tolerance", "1e-4"))); });
    EXPECT_NE(e.find("property nufft_tolerance has moved: name it nufft.tolerance instead"), std::string::npos) << e;
}

TEST(ChainConfig, EmptyChainAndEmptyGadgetAreRejected) {
    EXPECT_NE(error_of([] { parse_chain("name: \"x\""); }).find("no gadgets"), std::string::npos);
    EXPECT_NE(error_of([] { parse_chain("gadget { name: \"lonely\" }"); }).find("lonely"), std::string::npos);
}

// Found by fuzz_chain_config: protobuf's text parser takes a string that is not UTF-8 (it only logs it),
// the strict-schema round trip then cannot read it back; the user gets a ConfigError saying why.
TEST(ChainConfig, AStringThatIsNotUtf8IsRefusedAsSuch) {
    const std::string text = "description: \"caf\xc3\x28\" gadget { pass_through {} }";
    try {
        parse_chain(text, "inline");
        FAIL() << "a chain with invalid UTF-8 was accepted";
    } catch (const ConfigError& e) {
        EXPECT_NE(std::string(e.what()).find("UTF-8"), std::string::npos) << e.what();
    }
}

TEST(ChainConfig, ConfigNamesStayInsideTheConfigDirectory) {
    for (const std::string bad : {"../etc/passwd", "a/b", "/etc/passwd", "..", ".hidden", "x\\y"}) {
        SCOPED_TRACE(bad);
        std::string e = error_of([&] { load_chain_file(kConfigDir, bad); });
        EXPECT_FALSE(e.empty());
        EXPECT_NE(e.find(bad), std::string::npos) << e;
    }
    std::string e = error_of([] { load_chain_file(kConfigDir, "no_such_chain"); });
    EXPECT_NE(e.find("no_such_chain"), std::string::npos);
    EXPECT_NE(e.find("cartesian"), std::string::npos) << "lists the available chains: " << e;
}

TEST(ChainConfig, GadgetronV2XmlWithAttributeProperties) {
    const char* xml = R"(<?xml version="1.0"?>
<configuration><version>2</version>
 <readers><reader><dll>gadgetron_core_readers</dll><classname>AcquisitionReader</classname></reader></readers>
 <writers><writer><dll>gadgetron_core_writers</dll><classname>ImageWriter</classname></writer></writers>
 <stream>
  <gadget><name>Acc</name><dll>gadgetron_mricore</dll><classname>AcquisitionAccumulateTriggerGadget</classname>
    <property name="trigger_dimension" value="repetition"/></gadget>
  <gadget><dll>gadgetron_mricore</dll><classname>BucketToBufferGadget</classname></gadget>
  <gadget><dll>gadgetron_mricore</dll><classname>SimpleReconGadget</classname></gadget>
  <gadget><dll>gadgetron_mricore</dll><classname>ImageArraySplitGadget</classname></gadget>
  <gadget><dll>gadgetron_mricore</dll><classname>ExtractGadget</classname><property name="extract_mask" value="8"/></gadget>
 </stream></configuration>)";
    config::Chain c = parse_chain(xml);
    ASSERT_EQ(c.gadget_size(), 4);
    EXPECT_EQ(c.gadget(0).accumulate_trigger().trigger(), config::TRIGGER_REPETITION);
    EXPECT_TRUE(c.gadget(1).has_fft());
    EXPECT_TRUE(c.gadget(2).has_coil_combine());
    EXPECT_EQ(c.gadget(3).image_finish().output(), config::OUTPUT_PHASE);
}

TEST(ChainConfig, XmlErrorsNameTheOffendingValue) {
    EXPECT_NE(error_of([] { parse_chain("<gadgetronStreamConfiguration><gadget><name>G</name><classname>GrappaGadget</classname></gadget></gadgetronStreamConfiguration>"); })
                  .find("GrappaGadget"), std::string::npos);
    EXPECT_NE(error_of([] { parse_chain("<configuration><version>7</version></configuration>"); }).find("'7'"),
              std::string::npos);
    EXPECT_NE(error_of([] { parse_chain("<gadgetronStreamConfiguration><gadget>"); }).find("XML parse error"),
              std::string::npos);
    EXPECT_NE(error_of([] { parse_chain("<gadgetronStreamConfiguration><gadget><classname>AcquisitionAccumulateTriggerGadget</classname><property><name>trigger_dimension</name><value>sideways</value></property></gadget></gadgetronStreamConfiguration>"); })
                  .find("sideways"), std::string::npos);
    EXPECT_NE(error_of([] { parse_chain("<gadgetronStreamConfiguration><gadget><classname>BucketToBufferGadget</classname></gadget></gadgetronStreamConfiguration>"); })
                  .find("must follow"), std::string::npos);
}

TEST(ChainRunner, DeliversInOrderAndDrainsOnClose) {
    std::vector<uint32_t> a, b;
    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(std::make_unique<Probe>(&a));
    g.push_back(std::make_unique<Probe>(&b));
    ChainRunner chain(std::move(g), {"first", "second"}, 2);  // tiny queues: exercises blocking
    std::vector<std::string> texts;
    size_t acquisitions = 0;
    chain.start(SessionContext{}, [&](Message m) {
        if (auto* t = std::get_if<Text>(&m)) texts.push_back(t->text);
        if (std::holds_alternative<Acquisition>(m)) ++acquisitions;
    });
    for (uint32_t i = 0; i < 500; ++i) chain.push(make_acq(i));
    chain.close_and_wait();
    ASSERT_EQ(a.size(), 500u);
    ASSERT_EQ(b.size(), 500u);
    for (uint32_t i = 0; i < 500; ++i) ASSERT_EQ(b[i], i);
    EXPECT_EQ(acquisitions, 500u);
    // Both finish() calls ran, in chain order: the first's text passed through the second.
    ASSERT_EQ(texts.size(), 2u);
    EXPECT_FALSE(chain.failed());
}

TEST(ChainRunner, GadgetExceptionIsReportedAndTheChainStillDrains) {
    std::vector<uint32_t> a, b;
    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(std::make_unique<Probe>(&a, 7));
    g.push_back(std::make_unique<Probe>(&b));
    ChainRunner chain(std::move(g), {"Picky", "After"});
    chain.start(SessionContext{}, [](Message) {});
    for (uint32_t i = 0; i < 100; ++i) chain.push(make_acq(i));
    chain.close_and_wait();
    EXPECT_TRUE(chain.failed());
    auto errors = chain.errors();
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors[0], "[Picky] ERROR: probe refuses scan 7");
    EXPECT_EQ(a.size(), 7u);
    EXPECT_EQ(b.size(), 7u);  // nothing after the failure reached the next gadget
}

TEST(ChainRunner, DestroyingAnUnclosedChainDoesNotHang) {
    std::vector<uint32_t> a;
    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(std::make_unique<Probe>(&a));
    auto chain = std::make_unique<ChainRunner>(std::move(g), std::vector<std::string>{"only"}, 4);
    chain->start(SessionContext{}, [](Message) {});
    for (uint32_t i = 0; i < 10; ++i) chain->push(make_acq(i));
    chain.reset();  // joins without close_and_wait
    SUCCEED();
}

TEST(ChainRunner, BuildsFromConfigAndCounts) {
    config::Chain c = load_chain_file(kConfigDir, "counter");
    ChainRunner chain(c);
    std::string report;
    chain.start(SessionContext{}, [&](Message m) {
        if (auto* t = std::get_if<Text>(&m)) report = t->text;
    });
    for (uint32_t i = 0; i < 42; ++i) {
        Acquisition acq = make_acq(i);
        if (i == 0) acq.head.flags |= uint64_t{1} << 18;  // noise scan, flag 19
        chain.push(std::move(acq));
    }
    chain.push(Waveform{});
    chain.close_and_wait();
    EXPECT_NE(report.find("42 acquisitions (1 noise), 1 waveforms"), std::string::npos) << report;
}

TEST(BoundedQueue, PushBlocksWhenFullUntilAPop) {
    BoundedQueue<int> q(2);
    ASSERT_TRUE(q.push(1));
    ASSERT_TRUE(q.push(2));
    std::atomic<bool> third_done{false};
    std::thread producer([&] {
        q.push(3);
        third_done = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(third_done.load()) << "a full queue must block the producer";
    EXPECT_EQ(q.pop().value(), 1);
    producer.join();
    EXPECT_TRUE(third_done.load());
    EXPECT_EQ(q.size(), 2u);
    q.abort();
    EXPECT_FALSE(q.pop().has_value());
    EXPECT_FALSE(q.push(4));
}

// A reconstruction that takes the stream's density weights makes the accumulator before it read them:
// one option for the user (README, "Density weights that come with the data").
TEST(ChainConfig, StreamDensityWeightsImplyTheAccumulatorReadsThem) {
    const config::Chain c = parse_chain(
        "gadget { accumulate_readouts {} } gadget { cg_sense { density: DENSITY_FROM_STREAM } }");
    EXPECT_TRUE(c.gadget(0).accumulate_readouts().trajectory_weights());
    const config::Chain g = parse_chain("gadget { accumulate_readouts {} } gadget { gridding { density: DENSITY_FROM_STREAM } }");
    EXPECT_TRUE(g.gadget(0).accumulate_readouts().trajectory_weights());
    const config::Chain p = parse_chain("gadget { accumulate_readouts {} } gadget { gridding { density: DENSITY_PIPE_MENON } }");
    EXPECT_FALSE(p.gadget(0).accumulate_readouts().trajectory_weights());
}
