// The server's pure parts without a socket: backend choice, query answers, header parsing, quoting.
#include <gtest/gtest.h>

#include <algorithm>

#include "chain.pb.h"
#include "core/backend.h"
#include "server/backend_select.h"
#include "server/excerpt.h"
#include "server/header_parse.h"
#include "server/queries.h"
#include "server/system_info.h"

namespace larmor::server {
namespace {

TEST(ServerBackendChoice, EitherSayingCpuMeansCpu) {
    EXPECT_FALSE(choose_cuda(BackendPolicy::Cpu, config::BACKEND_CUDA, "c", true));
    EXPECT_FALSE(choose_cuda(BackendPolicy::Cuda, config::BACKEND_CPU, "c", true));
    EXPECT_FALSE(choose_cuda(BackendPolicy::Auto, config::BACKEND_CPU, "c", true));
}

TEST(ServerBackendChoice, AutoFollowsTheDevice) {
    EXPECT_TRUE(choose_cuda(BackendPolicy::Auto, config::BACKEND_AUTO, "c", true));
    EXPECT_FALSE(choose_cuda(BackendPolicy::Auto, config::BACKEND_AUTO, "c", false));
    EXPECT_TRUE(choose_cuda(BackendPolicy::Auto, config::BACKEND_CUDA, "c", true));
    EXPECT_TRUE(choose_cuda(BackendPolicy::Cuda, config::BACKEND_AUTO, "c", true));
}

TEST(ServerBackendChoice, CudaWithoutDeviceNamesTheChain) {
    try {
        choose_cuda(BackendPolicy::Auto, config::BACKEND_CUDA, "gpu_chain", false);
        FAIL() << "expected BackendError";
    } catch (const BackendError& e) {
        EXPECT_NE(std::string(e.what()).find("gpu_chain"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
    }
    EXPECT_THROW(choose_cuda(BackendPolicy::Cuda, config::BACKEND_AUTO, "c", false), BackendError);
}

TEST(ServerBackendChoice, PolicyParsingNamesBadValues) {
    EXPECT_EQ(parse_backend_policy("cuda"), BackendPolicy::Cuda);
    try {
        parse_backend_policy("gpu");
        FAIL();
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("'gpu'"), std::string::npos);
    }
}

// Gadgetron's info layout, line by line, so its integration-test runner finds each marker (the real
// clients read it in tests/gadgetron_client_test.cpp).
TEST(ServerQueryAnswers, InfoAndDeviceCountInGadgetronsFormat) {
    ServerOptions options;
    options.config_dir = "/nonexistent/larmor-config";
    options.dependency_dir = "/var/tmp/deps";
    ServerStats stats;
    const QueryContext ctx{options, stats};
    const std::string info = answer_query("gadgetron::info", ctx);
    for (const char* line : {"\n  -- Version            : " LARMOR_VERSION "\n", "\n  -- Git SHA1           : ",
                             "\n  -- System Memory size : ", "\n  -- Python Support     : NO\n",
                             "\n  -- Julia Support      : NO\n", "\n  -- Matlab Support     : NO\n",
                             "\n  -- CUDA Support       : ", "\n  -- Dependency dir     : /var/tmp/deps\n"})
        EXPECT_NE(info.find(line), std::string::npos) << "missing '" << line << "' in:\n" << info;
    const size_t mem = info.find("System Memory size : ") + 21;
    EXPECT_GT(std::stol(info.substr(mem)), 0) << info;
    EXPECT_EQ(info.substr(info.find(" MB", mem), 4), " MB\n") << info;
    EXPECT_EQ(info.back(), '\n');
    const std::string count = answer_query("gadgetron::cuda::devices", ctx);
    EXPECT_EQ(count, std::to_string(cuda_devices().size()));
    // As Gadgetron's: 1 only when a device is there (a CUDA build on a machine without one answers 0),
    // and the detail keys per device, joined by ';'.
    const size_t n = cuda_devices().size();
    EXPECT_EQ(answer_query("gadgetron::info::cuda", ctx), n ? "1" : "0");
    const std::string memory = answer_query("gadgetron::cuda::memory", ctx),
                      capabilities = answer_query("gadgetron::cuda::capabilities", ctx);
    EXPECT_EQ(size_t(std::count(memory.begin(), memory.end(), ';')), n ? n - 1 : 0) << memory;
    EXPECT_EQ(size_t(std::count(capabilities.begin(), capabilities.end(), ';')), n ? n - 1 : 0) << capabilities;
    if (n) {
        EXPECT_EQ(std::stoull(memory), cuda_device_memory(0));
        EXPECT_NE(capabilities.find('.'), std::string::npos) << capabilities;
        EXPECT_NE(answer_query("gadgetron::cuda::driver", ctx), "N/A");
        EXPECT_NE(info.find("Total amount of global GPU memory: "), std::string::npos) << info;
    } else {
        EXPECT_EQ(memory, "");
        EXPECT_EQ(capabilities, "");
    }
    if (!built_with_cuda()) {
        EXPECT_EQ(answer_query("gadgetron::cuda::runtime", ctx), "N/A");
    }
    EXPECT_EQ(answer_query("ismrmrd::version", ctx), "1.8.0");
    EXPECT_GT(std::stoull(answer_query("gadgetron::info::memory", ctx)), 0u);
}

TEST(ServerQueryAnswers, KnownAndUnknownKeys) {
    ServerOptions options;
    options.config_dir = "/nonexistent/larmor-config";
    ServerStats stats;
    const QueryContext ctx{options, stats};
    EXPECT_EQ(answer_query("gadgetron::version", ctx), version_string());
    EXPECT_EQ(answer_query(" gadgetron::version" + std::string(1, '\0'), ctx), version_string());
    EXPECT_NE(answer_query("gadgetron::info", ctx).find("/nonexistent/larmor-config"), std::string::npos);
    EXPECT_NE(answer_query("larmor::status", ctx).find("\"sessions_active\": 0"), std::string::npos);
    const std::string unknown = answer_query("foo::bar", ctx);
    EXPECT_NE(unknown.find("unknown query key 'foo::bar'"), std::string::npos) << unknown;
    for (const auto& k : known_query_keys()) EXPECT_NE(unknown.find(k), std::string::npos) << k;
}

TEST(ServerHeaderParse, MalformedXmlNamesTheProblemAndPlace) {
    try {
        parse_ismrmrd_header("<ismrmrdHeader><encoding>oops");
        FAIL();
    } catch (const HeaderError& e) {
        EXPECT_NE(std::string(e.what()).find("not well-formed"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("at byte"), std::string::npos) << e.what();
    }
    EXPECT_THROW(parse_ismrmrd_header("   "), HeaderError);
    try {
        parse_ismrmrd_header("<foo/>");
        FAIL();
    } catch (const HeaderError& e) {
        EXPECT_NE(std::string(e.what()).find("'foo'"), std::string::npos) << e.what();
    }
}

TEST(ServerHeaderParse, AcceptsATrailingNul) {
    const std::string xml =
        "<ismrmrdHeader><experimentalConditions><H1resonanceFrequency_Hz>63500000</H1resonanceFrequency_Hz>"
        "</experimentalConditions><encoding><encodedSpace><matrixSize><x>8</x><y>8</y><z>1</z></matrixSize>"
        "<fieldOfView_mm><x>1</x><y>1</y><z>1</z></fieldOfView_mm></encodedSpace><reconSpace><matrixSize><x>8</x>"
        "<y>8</y><z>1</z></matrixSize><fieldOfView_mm><x>1</x><y>1</y><z>1</z></fieldOfView_mm></reconSpace>"
        "<encodingLimits></encodingLimits><trajectory>cartesian</trajectory></encoding></ismrmrdHeader>";
    EXPECT_EQ(parse_ismrmrd_header(xml).encoding.size(), 1u);
    EXPECT_EQ(parse_ismrmrd_header(xml + std::string(1, '\0')).encoding.size(), 1u);
}

TEST(ServerExcerpt, BoundsAndEscapes) {
    EXPECT_EQ(excerpt("a\nb"), "a\\x0ab");
    const std::string long_text(1000, 'x');
    const std::string e = excerpt(long_text, 10);
    EXPECT_EQ(e.substr(0, 10), std::string(10, 'x'));
    EXPECT_NE(e.find("1000 bytes"), std::string::npos);
}

}  // namespace
}  // namespace larmor::server
