// Progress lines (wire/progress.h): the exact text a stock client shows, the round trip through
// parse_progress, and that nothing else is taken for progress.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "wire/progress.h"

namespace larmor::wire {
namespace {

TEST(Progress, FormatIsTheDocumentedLine) {
    EXPECT_EQ(format_progress({"cg_sense", 5, 30, 3.2e-4}), "progress cg_sense: iteration 5/30, residual 3.20e-04\n");
    EXPECT_EQ(format_progress({"spirit-pocs.2/l1", 0, 1, 1.0}),
              "progress spirit-pocs.2/l1: iteration 0/1, residual 1.00e+00\n");
}

TEST(Progress, RoundTrip) {
    const Progress cases[] = {{"cg_sense", 5, 30, 3.2e-4},
                              {"a", 0, 0, 0.0},
                              {"nufft_cg", 4294967295u, 4294967295u, 1.2345678e-30},
                              {"X9", 17, 20, 987654.321}};
    for (const Progress& p : cases) {
        SCOPED_TRACE(p.stage);
        const std::string line = format_progress(p);
        for (const std::string& text : {line, line.substr(0, line.size() - 1)}) {  // newline optional
            const auto back = parse_progress(text);
            ASSERT_TRUE(back.has_value()) << text;
            EXPECT_EQ(back->stage, p.stage);
            EXPECT_EQ(back->iteration, p.iteration);
            EXPECT_EQ(back->iterations, p.iterations);
            EXPECT_NEAR(back->residual, p.residual, 5e-3 * std::abs(p.residual)) << text;  // 3 digits
        }
    }
    const auto nan = parse_progress(format_progress({"cg", 1, 2, std::numeric_limits<double>::quiet_NaN()}));
    ASSERT_TRUE(nan.has_value());
    EXPECT_TRUE(std::isnan(nan->residual));
}

TEST(Progress, OtherTextIsNotProgress) {
    for (const char* text : {"", "progress", "hello from the server\n", "[Server] ERROR: no such chain",
                             "progress cg_sense: iteration 5/30",                         // no residual
                             "progress cg_sense: iteration 5/30, residual ",               // empty residual
                             "progress cg_sense: iteration 5/30, residual 3.2e-04 done",  // trailing words
                             "progress cg_sense: iteration 5/30, residual 3.2e-04\n\n",   // two newlines
                             "progress cg sense: iteration 5/30, residual 3.2e-04",       // space in stage
                             "progress : iteration 5/30, residual 3.2e-04",               // no stage
                             "progress cg: iteration -1/30, residual 3.2e-04",            // signed count
                             "progress cg: iteration 1/4294967296, residual 3.2e-04",     // over 32 bits
                             "progress cg: iteration 1 / 30, residual 3.2e-04",
                             "progress cg: iteration 1/30, residual +3.2e-04",
                             "Progress cg: iteration 1/30, residual 3.2e-04",
                             " progress cg: iteration 1/30, residual 3.2e-04",
                             "progress cg: iteration 1/30, residual 3.2e-04\nprogress cg: iteration 2/30, "
                             "residual 1e-4"})
        EXPECT_FALSE(parse_progress(text).has_value()) << '"' << text << '"';
}

TEST(Progress, StageThatWouldNotParseIsRefusedByName) {
    for (const std::string bad : {"cg sense", "", "cg:sense", "cg\nsense"}) {
        try {
            format_progress({bad, 1, 2, 0.5});
            ADD_FAILURE() << "stage '" << bad << "' accepted";
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find("'" + bad + "'"), std::string::npos) << e.what();
        }
    }
}

}  // namespace
}  // namespace larmor::wire
