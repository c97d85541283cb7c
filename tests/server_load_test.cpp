// Load: 32 clients at once against one real larmor-server on loopback, each streaming its own scan
// through the cartesian-rss chain, and every image that comes back checked against a reference
// session's image times that client's scale (so an image of another session, a corrupted or a missing
// one fails). Prints the wall time and throughput; nothing here asserts on timing.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/server_process.h"
#include "tests/support/small_scan.h"

namespace larmor {
namespace {

using namespace std::chrono_literals;
using test::SmallScan;

constexpr int kClients = 32;
const SmallScan kScan{64, 8, 8};  // 64x64 recon (128-sample readouts), 8 coils, 8 repetitions: 8 images, 4 MB

// One whole session: chain, header, the scan with these per-repetition scales, CLOSE; the reply.
std::vector<wire::WireMessage> run_session(uint16_t port, const std::vector<float>& scales) {
    test::WireConnection c(port, 120s);
    c.send(wire::ConfigFile{"cartesian-rss"});
    c.send(wire::ParameterScript{test::small_scan_header(kScan)});
    for (const auto& a : test::small_scan_acquisitions(kScan, scales)) c.send(a);
    c.send(wire::Close{});
    return c.receive_until_close();
}

// Client i scales repetition r by (i + 1) + r / 8: a different factor for every image of the run.
std::vector<float> scales_of(int client) {
    std::vector<float> s;
    for (int r = 0; r < kScan.repetitions; ++r) s.push_back(float(client + 1) + float(r) / 8.0f);
    return s;
}

TEST(ServerLoad, ThirtyTwoConcurrentClientsEachGetTheirOwnCorrectImages) {
    // Idle OpenMP workers of 32 sessions must sleep, not spin, on a small machine (README, "Using it").
    ::setenv("OMP_WAIT_POLICY", "passive", 1);
    test::ServerProcess server({"--max-sessions", "64"});
    const auto ref_images = test::images_by_repetition(run_session(server.port(), std::vector<float>(kScan.repetitions, 1.0f)), kScan);
    ASSERT_FALSE(HasFailure()) << "the reference session failed";
    // Each repetition of the reference has the same data, so every image must be the same.
    for (int r = 1; r < kScan.repetitions; ++r) ASSERT_LT(test::relative_image_error(ref_images[r], ref_images[0], 1.0f), 1e-6);

    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::future<std::vector<wire::WireMessage>>> clients;
    for (int i = 0; i < kClients; ++i)
        clients.push_back(std::async(std::launch::async, [&server, i] { return run_session(server.port(), scales_of(i)); }));
    int checked = 0;
    for (int i = 0; i < kClients; ++i) {
        ASSERT_EQ(clients[i].wait_for(600s), std::future_status::ready) << "client " << i << " did not finish";
        std::vector<wire::WireMessage> reply;
        ASSERT_NO_THROW(reply = clients[i].get()) << "client " << i;
        const auto images = test::images_by_repetition(reply, kScan);
        const auto scales = scales_of(i);
        for (int r = 0; r < kScan.repetitions; ++r) {
            // Float FFTs of data scaled by s agree with s times the reference to a few ulps of the peak.
            EXPECT_LT(test::relative_image_error(images[r], ref_images[0], scales[r]), 1e-5)
                << "client " << i << ", repetition " << r;
            ++checked;
        }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[load] %d concurrent clients: %d images checked in %.2f s (%.1f sessions/s, %.1f images/s)\n",
                kClients, checked, secs, kClients / secs, checked / secs);
    EXPECT_EQ(checked, kClients * kScan.repetitions);
}

}  // namespace
}  // namespace larmor
