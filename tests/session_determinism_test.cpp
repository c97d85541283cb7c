// The same scan sent in two sessions gives bit-identical images on the CPU backend (issue 23): each
// session has its own backend, and before the plans were shared process-wide each one measured its
// own FFTW plans, which may pick another algorithm with other rounding, so images of the same data
// differed in the last digits from session to session. A physicist comparing two reconstructions of
// one scan (or a regression test at a site) must see no difference that the data do not make.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/backend.h"
#include "gadgets/chain_config.h"
#include "gadgets/factories.h"
#include "tests/support/gadget_harness.h"
#include "tests/support/phantom_truth.h"
#include "tools/phantom/phantom.h"

namespace larmor {
namespace {

std::vector<Image> reconstruct(const std::string& chain_name, const test::Dataset& ds) {
    const config::Chain chain = load_chain_file(LARMOR_SOURCE_DIR "/config", chain_name);
    std::vector<std::unique_ptr<Gadget>> gadgets;
    for (const auto& g : chain.gadget()) gadgets.push_back(make_gadget(g));
    SessionContext ctx = test::make_session(ds.header_xml, make_cpu_backend());  // a new session's backend
    ctx.chain_name = chain_name;
    std::vector<Message> in(ds.acquisitions.begin(), ds.acquisitions.end());
    std::vector<Image> out;
    for (Message& m : test::run_chain(std::move(gadgets), ctx, in))
        if (auto* im = std::get_if<Image>(&m)) out.push_back(std::move(*im));
    return out;
}

// 192 x 192 readouts (after oversampling removal) with 8 coils: FFTs large enough to be measured.
test::Dataset scan(bool undersampled) {
    phantom::PhantomSpec p;
    p.nx = p.ny = 192;
    p.coils = 8;
    p.fov_mm[0] = p.fov_mm[1] = 240.0;
    p.snr = 40.0;
    if (undersampled) {
        p.sampling = phantom::Sampling::uniform;
        p.accel_y = 2;
        p.acs_lines = 24;
    }
    return test::phantom_dataset(p, undersampled ? "determinism_r2" : "determinism");
}

TEST(SessionDeterminism, TheSameScanGivesBitIdenticalImagesInEverySession) {
    struct Case {
        const char* chain;
        bool undersampled;
    };
    for (const Case& c : {Case{"cartesian", false}, Case{"cg_sense", true}, Case{"grappa", true}, Case{"pics_l1", true}}) {
        SCOPED_TRACE(c.chain);
        const test::Dataset ds = scan(c.undersampled);
        const std::vector<Image> first = reconstruct(c.chain, ds);
        ASSERT_FALSE(first.empty());
        for (int session = 1; session < 3; ++session) {
            const std::vector<Image> again = reconstruct(c.chain, ds);
            ASSERT_EQ(again.size(), first.size());
            for (size_t i = 0; i < first.size(); ++i) {
                ASSERT_EQ(again[i].pixels.size(), first[i].pixels.size());
                EXPECT_EQ(std::memcmp(again[i].pixels.data(), first[i].pixels.data(), first[i].pixels.size()), 0)
                    << "session " << session << " image " << i << " differs from the first session's";
            }
        }
    }
}

}  // namespace
}  // namespace larmor
