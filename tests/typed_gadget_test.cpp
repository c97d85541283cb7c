// The typed gadget base: messages reach the handler of their type, everything else passes on
// unchanged, and pending line operations are materialised exactly for the gadgets that take plain
// acquisitions only (and by nothing else: not the chain runner, not the wire).
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "gadgets/chain.h"
#include "gadgets/line_ops.h"
#include "gadgets/typed_gadget.h"
#include "tests/support/gadget_harness.h"
#include "wire/codec.h"

namespace larmor {
namespace {

// Line operations cannot reach the wire: a PendingAcquisition is no wire message, and the wire
// acquisition has no field to carry them.
template <class T, class = void>
struct has_line_ops_field : std::false_type {};
template <class T>
struct has_line_ops_field<T, std::void_t<decltype(&T::pending)>> : std::true_type {};
template <class T>
struct has_line_ops_field<T, std::void_t<decltype(&T::ops)>> : std::true_type {};
static_assert(!std::is_constructible_v<wire::WireMessage, PendingAcquisition>);
static_assert(!has_line_ops_field<wire::Acquisition>::value);
static_assert(has_line_ops_field<PendingAcquisition>::value, "the detector detects");

Acquisition readout(uint32_t scan, uint16_t samples = 8, uint16_t channels = 2) {
    Acquisition a;
    a.head.scan_counter = scan;
    a.head.number_of_samples = samples;
    a.head.center_sample = uint16_t(samples / 2);
    a.head.active_channels = channels;
    for (size_t i = 0; i < size_t{samples} * channels; ++i) a.data.emplace_back(float(i % 5), float(scan) - float(i));
    return a;
}

// Readout oversampling removal plus a 1 x 2 coil mix: 8 samples x 2 channels become 4 x 1.
LineOps both_ops() {
    LineOps ops;
    ops.remove_ro_oversampling = true;
    ops.coil_mix = std::make_shared<std::vector<cfloat>>(std::vector<cfloat>{{0.5f, 0.25f}, {-1.0f, 2.0f}});
    return ops;
}

uint32_t scan_of(const Acquisition& a) { return a.head.scan_counter; }  // a copy: the header is packed

class TakesKSpace final : public TypedGadget<ReconBuffer> {
public:
    using Gadget::process;  // the typed overloads below do not hide the Message one
    void process(ReconBuffer& kb, Emitter& out) override {
        ++taken;
        kb.calibration_mode = "handled";  // visible downstream: the handler ran
        out.emit(std::move(kb));
    }
    int taken = 0;
};

class TakesAcquisitions final : public TypedGadget<Acquisition> {
public:
    using Gadget::process;  // the typed overloads below do not hide the Message one
    void process(Acquisition& acq, Emitter& out) override {
        seen.push_back(acq);
        out.emit(std::move(acq));
    }
    std::vector<Acquisition> seen;
};

class TakesBoth final : public TypedGadget<Acquisition, PendingAcquisition> {
public:
    using Gadget::process;  // the typed overloads below do not hide the Message one
    void process(Acquisition& acq, Emitter& out) override {
        calls.push_back("plain " + std::to_string(scan_of(acq)));
        out.emit(std::move(acq));
    }
    void process(PendingAcquisition& p, Emitter& out) override {
        calls.push_back("pending " + std::to_string(scan_of(p.acq)));
        out.emit(std::move(p));
    }
    std::vector<std::string> calls;
};

class CountsTheRest final : public TypedGadget<Waveform> {
public:
    void process(Waveform&, Emitter&) override { ++waveforms; }  // dropped
    int waveforms = 0, others = 0;

private:
    void pass_on(Message&, Emitter&) override { ++others; }  // dropped too
};

std::vector<std::unique_ptr<Gadget>> one(std::unique_ptr<Gadget> gadget) {
    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(std::move(gadget));
    return g;
}

TEST(TypedGadget, TakenTypeReachesTheHandlerEverythingElsePassesUnchanged) {
    auto owned = std::make_unique<TakesKSpace>();
    TakesKSpace& gadget = *owned;
    test::GadgetHarness h(one(std::move(owned)));
    h.start(SessionContext{});
    h.push(readout(7));
    h.push(Text{"hello"});
    h.push(ReconBuffer{});
    h.push(PendingAcquisition{readout(8), both_ops()});
    h.finish();

    EXPECT_EQ(gadget.taken, 1);
    const std::vector<Message>& out = h.output();
    ASSERT_EQ(out.size(), 4u);
    EXPECT_EQ(scan_of(std::get<Acquisition>(out[0])), 7u);
    EXPECT_EQ(std::get<Acquisition>(out[0]).data, readout(7).data);
    EXPECT_EQ(std::get<Text>(out[1]).text, "hello");
    EXPECT_EQ(std::get<ReconBuffer>(out[2]).calibration_mode, "handled");
    // A gadget that takes no acquisitions leaves the operations to whoever comes next.
    const auto& pending = std::get<PendingAcquisition>(out[3]);
    EXPECT_EQ(pending.acq.data, readout(8).data);
    EXPECT_TRUE(pending.ops.remove_ro_oversampling);
    ASSERT_TRUE(pending.ops.coil_mix);
    EXPECT_EQ(pending.ops.coil_mix->size(), 2u);
}

TEST(TypedGadget, PendingAcquisitionIsMaterialisedForAGadgetTakingOnlyAcquisitions) {
    auto owned = std::make_unique<TakesAcquisitions>();
    TakesAcquisitions& gadget = *owned;
    test::GadgetHarness h(one(std::move(owned)));
    h.start(SessionContext{});
    h.push(PendingAcquisition{readout(3), both_ops()});
    h.push(readout(4));

    ASSERT_EQ(gadget.seen.size(), 2u);
    const Acquisition& got = gadget.seen[0];
    const Acquisition expected = materialize(PendingAcquisition{readout(3), both_ops()});
    EXPECT_EQ(got.head.number_of_samples, 4u);  // oversampling removed
    EXPECT_EQ(got.head.center_sample, 2u);
    EXPECT_EQ(got.head.active_channels, 1u);    // mixed down to one channel
    EXPECT_EQ(got.data, expected.data);
    EXPECT_EQ(gadget.seen[1].data, readout(4).data);  // a plain acquisition is left alone
    ASSERT_EQ(h.output().size(), 2u);
    EXPECT_TRUE(std::holds_alternative<Acquisition>(h.output()[0]));
}

TEST(TypedGadget, GadgetTakingPendingAcquisitionsGetsThemAsTheyAre) {
    auto owned = std::make_unique<TakesBoth>();
    TakesBoth& gadget = *owned;
    test::GadgetHarness h(one(std::move(owned)));
    h.start(SessionContext{});
    h.push(PendingAcquisition{readout(1), both_ops()});
    h.push(readout(2));
    EXPECT_EQ(gadget.calls, (std::vector<std::string>{"pending 1", "plain 2"}));
    const auto& pending = std::get<PendingAcquisition>(h.output()[0]);
    EXPECT_EQ(pending.acq.data.size(), 16u);  // not materialised
    EXPECT_EQ(pending.acq.head.number_of_samples, 8u);
}

TEST(TypedGadget, PassOnSeesEveryMessageNotTaken) {
    auto owned = std::make_unique<CountsTheRest>();
    CountsTheRest& gadget = *owned;
    test::GadgetHarness h(one(std::move(owned)));
    h.start(SessionContext{});
    h.push(Waveform{});
    h.push(Text{"x"});
    h.push(readout(1));
    h.push(PendingAcquisition{readout(2), both_ops()});
    EXPECT_EQ(gadget.waveforms, 1);
    EXPECT_EQ(gadget.others, 3);
    EXPECT_TRUE(h.output().empty());
}

// The threaded runner adds no materialisation of its own: an untyped gadget sees (and passes) the
// pending acquisition; a typed one taking acquisitions gets it applied.
TEST(TypedGadget, ChainRunnerLeavesLineOperationsToTheGadgets) {
    for (bool typed : {false, true}) {
        SCOPED_TRACE(typed ? "typed" : "untyped");
        std::vector<std::unique_ptr<Gadget>> g;
        if (typed)
            g.push_back(std::make_unique<TakesAcquisitions>());
        else
            g.push_back(std::make_unique<Gadget>());
        ChainRunner chain(std::move(g), {"probe"});
        std::vector<Message> out;
        chain.start(SessionContext{}, [&](Message m) { out.push_back(std::move(m)); });
        chain.push(PendingAcquisition{readout(5), both_ops()});
        chain.close_and_wait();
        ASSERT_FALSE(chain.failed()) << chain.errors()[0];
        ASSERT_EQ(out.size(), 1u);
        if (typed) {
            ASSERT_TRUE(std::holds_alternative<Acquisition>(out[0]));
            EXPECT_EQ(std::get<Acquisition>(out[0]).head.number_of_samples, 4u);
        } else {
            ASSERT_TRUE(std::holds_alternative<PendingAcquisition>(out[0]));
            EXPECT_EQ(std::get<PendingAcquisition>(out[0]).acq.head.number_of_samples, 8u);
        }
    }
}

TEST(TypedGadget, MaterialisingABadMixFailsNamingTheSizes) {
    LineOps ops;
    ops.coil_mix = std::make_shared<std::vector<cfloat>>(3, cfloat(1));  // 3 entries cannot mix 2 channels
    test::GadgetHarness h(one(std::make_unique<TakesAcquisitions>()));
    h.start(SessionContext{});
    try {
        h.push(PendingAcquisition{readout(9), ops});
        ADD_FAILURE() << "no error";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("3 entries"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("2 channels"), std::string::npos) << e.what();
    }
}

TEST(MessageKind, NamesEveryAlternative) {
    EXPECT_STREQ(message_kind(Acquisition{}), "acquisition");
    EXPECT_STREQ(message_kind(PendingAcquisition{}), "pending acquisition");
    EXPECT_STREQ(message_kind(Waveform{}), "waveform");
    EXPECT_STREQ(message_kind(ReconBuffer{}), "recon buffer");
    EXPECT_STREQ(message_kind(ImageArray{}), "image array");
    EXPECT_STREQ(message_kind(Image{}), "image");
    EXPECT_STREQ(message_kind(Text{}), "text");
}

}  // namespace
}  // namespace larmor
