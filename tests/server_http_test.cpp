// The HTTP status endpoint (--http-port; server/http_status.h) of a real larmor-server process:
// probes, Prometheus metrics and the status page answer, and the counters move while a session runs.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/backend.h"
#include "tests/support/server_process.h"
#include "tests/support/small_scan.h"

namespace larmor {
namespace {

using namespace std::chrono_literals;
using test::http_request;
using test::ServerProcess;

double sample(const std::string& body, const std::string& name) { return test::metric_sample(body, name); }

TEST(ServerHttp, ProbesAnswerAndUnknownPathsAndMethodsAreRefused) {
    ServerProcess server({"--http-port", "0", "--max-sessions", "3"});
    ASSERT_NE(server.http_port(), 0) << server.log();
    const auto live = http_request(server.http_port(), "/healthz");
    EXPECT_EQ(live.status, 200);
    EXPECT_EQ(live.body, "ok\n");
    const auto ready = http_request(server.http_port(), "/readyz");
    EXPECT_EQ(ready.status, 200) << ready.body;
    const auto status = http_request(server.http_port(), "/status");
    EXPECT_EQ(status.status, 200);
    EXPECT_EQ(status.content_type, "application/json");
    EXPECT_NE(status.body.find("\"sessions_total\": 0"), std::string::npos) << status.body;
    const auto page = http_request(server.http_port(), "/");
    EXPECT_EQ(page.status, 200);
    EXPECT_NE(page.content_type.find("text/html"), std::string::npos);
    EXPECT_NE(page.body.find("ready"), std::string::npos);
    EXPECT_NE(page.body.find("http-equiv=\"refresh\""), std::string::npos);  // refreshes itself
    EXPECT_EQ(page.body.find("src=\"http"), std::string::npos);              // no external assets
    EXPECT_EQ(http_request(server.http_port(), "/nothing").status, 404);
    EXPECT_EQ(http_request(server.http_port(), "/metrics", "POST").status, 405);
    const auto head = http_request(server.http_port(), "/metrics", "HEAD");
    EXPECT_EQ(head.status, 200);
    EXPECT_TRUE(head.body.empty());
    // The protocol port still serves while the HTTP port does.
    EXPECT_TRUE(server.running());
}

TEST(ServerHttp, IsOffUnlessAsked) {
    ServerProcess server;
    EXPECT_EQ(server.http_port(), 0);
    EXPECT_EQ(server.log().find("HTTP status on"), std::string::npos) << server.log();
}

TEST(ServerHttp, AnAddressOutsideAllowGetsNoAnswer) {
    // Only 10.0.0.0/8 may connect; the test connects from 127.0.0.1.
    ServerProcess server({"--http-port", "0", "--allow", "10.0.0.0/8"});
    ASSERT_NE(server.http_port(), 0);
    EXPECT_EQ(http_request(server.http_port(), "/healthz", "GET", 5s).status, 0);
}

// Scraped during a session (its connection open, the scan sent, CLOSE withheld) and after it: the
// gauges and counters follow the session, and the gadgets' histograms count their calls.
TEST(ServerHttp, MetricsFollowARunningSession) {
    ServerProcess server({"--http-port", "0", "--backend", "cpu"});
    const uint16_t http = server.http_port();
    const auto before = http_request(http, "/metrics");
    ASSERT_EQ(before.status, 200);
    EXPECT_NE(before.content_type.find("version=0.0.4"), std::string::npos);
    EXPECT_EQ(sample(before.body, "larmor_sessions_active"), 0);
    EXPECT_EQ(sample(before.body, "larmor_acquisitions_total"), 0);
    EXPECT_EQ(sample(before.body, "larmor_ready"), 1);
    EXPECT_GT(sample(before.body, "larmor_host_memory_bytes{state=\"limit\"}"), 0);
    EXPECT_NE(before.body.find("# TYPE larmor_gadget_seconds histogram"), std::string::npos);

    const test::SmallScan scan;
    const auto acquisitions = test::small_scan_acquisitions(scan, {1.f});
    test::WireConnection c(server.port(), 60s);
    c.send(wire::ConfigFile{"cartesian-rss"});
    c.send(wire::ParameterScript{test::small_scan_header(scan)});
    for (const auto& a : acquisitions) c.send(a);
    // The session's counters are updated as its messages are read: wait until all have been.
    std::string during;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    do {
        during = http_request(http, "/metrics").body;
    } while (sample(during, "larmor_acquisitions_total") < double(acquisitions.size()) &&
             std::chrono::steady_clock::now() < deadline);
    EXPECT_EQ(sample(during, "larmor_sessions_active"), 1) << during;
    EXPECT_EQ(sample(during, "larmor_sessions_total"), 1);
    EXPECT_EQ(sample(during, "larmor_acquisitions_total"), double(acquisitions.size()));
    EXPECT_GT(sample(during, "larmor_received_bytes_total"), 0);
    const auto status = http_request(http, "/status").body;
    EXPECT_NE(status.find("\"sessions_active\": 1"), std::string::npos) << status;
    // The page lists the running session with its chain and what it has received.
    const std::string live_page = http_request(http, "/").body;
    EXPECT_NE(live_page.find("<td>s1</td>"), std::string::npos) << live_page;
    EXPECT_NE(live_page.find("<td>cartesian-rss</td>"), std::string::npos) << live_page;
    EXPECT_NE(live_page.find("<td>" + std::to_string(acquisitions.size()) + "</td>"), std::string::npos) << live_page;

    c.send(wire::Close{});
    const auto reply = c.receive_until_close();
    EXPECT_EQ(test::images_by_repetition(reply, scan).size(), 1u);
    std::string after;
    const auto end = std::chrono::steady_clock::now() + 30s;
    do {
        after = http_request(http, "/metrics").body;
    } while (sample(after, "larmor_sessions_active") != 0 && std::chrono::steady_clock::now() < end);
    EXPECT_EQ(sample(after, "larmor_sessions_active"), 0);
    EXPECT_EQ(sample(after, "larmor_images_sent_total"), 1);
    EXPECT_EQ(sample(after, "larmor_sessions_failed_total"), 0);
    // The session's transforms were planned by the process, once each.
    EXPECT_GT(sample(after, "larmor_fft_plan_lookups_total{library=\"fftw\",outcome=\"planned\"}"), 0) << after;
    EXPECT_EQ(sample(after, "larmor_fft_plans{library=\"fftw\"}"),
              sample(after, "larmor_fft_plan_lookups_total{library=\"fftw\",outcome=\"planned\"}"));
    // Every acquisition went through the chain's first gadget; the histogram's buckets add up.
    const std::string first = "larmor_gadget_seconds_count{gadget=\"";
    const size_t at = after.find(first);
    ASSERT_NE(at, std::string::npos) << after;
    EXPECT_GE(std::strtod(after.c_str() + after.find(' ', at) + 1, nullptr), double(acquisitions.size()));
    const std::string page = http_request(http, "/").body;
    EXPECT_NE(page.find("<td>1</td>"), std::string::npos) << page;  // one image sent, one session
}

// The page shows a thumbnail of a running session's latest image (an inline BMP, no other request):
// a two-repetition scan sends its first image before the client closes.
TEST(ServerHttp, TheStatusPageShowsTheLatestImageOfARunningSession) {
    ServerProcess server({"--http-port", "0", "--backend", "cpu"});
    const uint16_t http = server.http_port();
    test::SmallScan scan;
    scan.repetitions = 2;
    const auto acquisitions = test::small_scan_acquisitions(scan, {1.f, 2.f});
    test::WireConnection c(server.port(), 60s);
    c.send(wire::ConfigFile{"cartesian-rss"});
    c.send(wire::ParameterScript{test::small_scan_header(scan)});
    for (const auto& a : acquisitions) c.send(a);
    std::string page;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    do {
        page = http_request(http, "/").body;
    } while (page.find("data:image/bmp;base64,") == std::string::npos && std::chrono::steady_clock::now() < deadline);
    const size_t at = page.find("src=\"data:image/bmp;base64,");
    ASSERT_NE(at, std::string::npos) << page;
    EXPECT_NE(page.find("alt=\"latest image of s1\""), std::string::npos) << page;
    // The picture is a BMP of the scan's 32 x 32 matrix ("Qk" is base64 of "BM").
    EXPECT_EQ(page.compare(at + 27, 2, "Qk"), 0) << page.substr(at, 80);
    c.send(wire::Close{});
    EXPECT_EQ(test::images_by_repetition(c.receive_until_close(), scan).size(), 2u);
}

// On a GPU machine each device of --devices reports its budget and the driver's total and free memory.
TEST(ServerHttp, DeviceMemoryOnAGpuMachine) {
    if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
    ServerProcess server({"--http-port", "0", "--devices", "0"});
    const std::string m = http_request(server.http_port(), "/metrics").body;
    const double total = sample(m, "larmor_device_memory_bytes{device=\"0\",state=\"total\"}"),
                 free = sample(m, "larmor_device_memory_bytes{device=\"0\",state=\"free\"}");
    EXPECT_EQ(total, double(cuda_device_memory(0))) << m;
    EXPECT_GT(free, 0) << m;
    EXPECT_LE(free, total);
    EXPECT_GT(sample(m, "larmor_device_memory_budget_bytes{device=\"0\",state=\"limit\"}"), 0) << m;
    EXPECT_EQ(sample(m, "larmor_device_sessions{device=\"0\"}"), 0);
    EXPECT_NE(http_request(server.http_port(), "/").body.find("<td>GPU 0</td>"), std::string::npos);
}

// A session that fails counts as failed, and /readyz turns 503 at the session limit.
TEST(ServerHttp, FailedSessionsAndTheSessionLimitShow) {
    ServerProcess server({"--http-port", "0", "--max-sessions", "1", "--backend", "cpu"});
    const uint16_t http = server.http_port();
    {
        test::WireConnection bad(server.port(), 30s);
        bad.send(wire::ConfigFile{"no-such-chain"});
        bad.send(wire::Close{});
        const auto texts = test::texts_of(bad.receive_until_close());
        ASSERT_FALSE(texts.empty());
    }
    std::string m;
    const auto end = std::chrono::steady_clock::now() + 30s;
    do {
        m = http_request(http, "/metrics").body;
    } while (sample(m, "larmor_sessions_failed_total") < 1 && std::chrono::steady_clock::now() < end);
    EXPECT_EQ(sample(m, "larmor_sessions_failed_total"), 1) << m;
    EXPECT_GE(sample(m, "larmor_error_texts_total"), 1);
    const std::string page = http_request(http, "/").body;  // the error, under recent errors
    EXPECT_NE(page.find("no-such-chain"), std::string::npos) << page;
    EXPECT_NE(page.find("no session running"), std::string::npos) << page;

    test::WireConnection holder(server.port(), 30s);
    holder.send(wire::ConfigFile{"cartesian-rss"});
    std::string why;
    const auto until = std::chrono::steady_clock::now() + 30s;
    int code = 0;
    do {
        const auto r = http_request(http, "/readyz");
        code = r.status;
        why = r.body;
    } while (code != 503 && std::chrono::steady_clock::now() < until);
    EXPECT_EQ(code, 503);
    EXPECT_NE(why.find("--max-sessions 1"), std::string::npos) << why;
}

}  // namespace
}  // namespace larmor
