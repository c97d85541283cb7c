// Deadlines a client cannot stretch (issue 19, finding 6): --read-timeout restarts at every byte, so a
// client that sends one byte every few seconds, or nothing after connecting, used to hold a session slot
// for as long as it liked. Now its chain config and header must be complete within --handshake-timeout
// of connecting, after the header it must keep to --min-data-rate (time the server itself keeps it
// waiting does not count), and --max-sessions-per-address keeps one address from taking every slot.
// Against a real larmor-server, each with a good session beside or after the hostile ones.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/server_process.h"
#include "tests/support/small_scan.h"
#include "wire/codec.h"

namespace larmor {
namespace {

using namespace std::chrono_literals;
using test::ServerProcess;
using test::WireConnection;

using test::some_text_contains;

// One cartesian-rss session of the small scan, sent at full speed: its one image.
void good_session(uint16_t port) { EXPECT_FALSE(test::small_scan_image(port).empty()); }

// Sends `bytes` one at a time, `gap` apart, and stops early when the server has closed the connection.
void trickle(WireConnection& c, const std::vector<uint8_t>& bytes, size_t count, std::chrono::milliseconds gap) {
    for (size_t i = 0; i < count && i < bytes.size(); ++i) {
        try {
            c.send_bytes(&bytes[i], 1);
        } catch (const std::exception&) {
            return;  // closed: the server ended the session
        }
        std::this_thread::sleep_for(gap);
    }
}

// A chain config sent one byte every 300 ms: before, each byte restarted the 30 s read timeout and
// the session lived on; now it ends at the 2 s handshake deadline.
TEST(ServerDeadlines, ATrickledConfigEndsAtTheHandshakeDeadline) {
    ServerProcess server({"--handshake-timeout", "2", "--read-timeout", "30", "--backend", "cpu"});
    WireConnection c(server.port(), 30s);
    const auto start = std::chrono::steady_clock::now();
    trickle(c, wire::encode(wire::ConfigFile{"cartesian-rss"}), 16, 300ms);  // 4.8 s of trickle
    const auto reply = c.receive_until_close();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_TRUE(some_text_contains(reply, "within --handshake-timeout 2 s of connecting"));
    EXPECT_LT(seconds, 20.0) << "the server waited for its read timeout instead";
    good_session(server.port());
}

// After the header, acquisition bytes trickle at 5 bytes/s against a floor of 1000 bytes/s over 2 s.
TEST(ServerDeadlines, ATrickleAfterTheHeaderIsEndedByTheRateFloor) {
    ServerProcess server({"--min-data-rate", "1000", "--min-data-rate-window", "2", "--read-timeout", "30", "--backend",
                          "cpu"});
    const test::SmallScan scan;
    WireConnection c(server.port(), 30s);
    c.send(wire::ConfigFile{"cartesian-rss"});
    c.send(wire::ParameterScript{test::small_scan_header(scan)});
    trickle(c, wire::encode(test::small_scan_acquisitions(scan, {1.f})[0]), 30, 200ms);  // 6 s
    const auto reply = c.receive_until_close();
    EXPECT_TRUE(some_text_contains(reply, "data rate below --min-data-rate 1000 bytes/s"));
    good_session(server.port());
}

// The same floor does not end a real scan that pauses: 32 readouts of 2.4 KB, 0.15 s apart (about
// 16 KB/s while waiting, 4.8 s in all: two windows).
TEST(ServerDeadlines, ASlowButSteadyScanKeepsItsSession) {
    ServerProcess server({"--min-data-rate", "1000", "--min-data-rate-window", "2", "--handshake-timeout", "2",
                          "--backend", "cpu"});
    const test::SmallScan scan;
    WireConnection c(server.port(), 30s);
    c.send(wire::ConfigFile{"cartesian-rss"});
    c.send(wire::ParameterScript{test::small_scan_header(scan)});
    for (const auto& a : test::small_scan_acquisitions(scan, {1.f})) {
        c.send(a);
        std::this_thread::sleep_for(150ms);  // past the handshake deadline too: it ended with the header
    }
    c.send(wire::Close{});
    EXPECT_EQ(test::images_by_repetition(c.receive_until_close(), scan).size(), 1u);
}

// Connections that send nothing fill every slot; they are ended at the handshake deadline, each told
// why, and the server serves again (before, they held the slots for the whole read timeout).
TEST(ServerDeadlines, SilentConnectionsGiveTheirSlotsBackAtTheHandshakeDeadline) {
    ServerProcess server({"--handshake-timeout", "2", "--read-timeout", "60", "--max-sessions", "6", "--backend", "cpu"});
    std::vector<std::unique_ptr<WireConnection>> silent;
    for (int i = 0; i < 6; ++i) silent.push_back(std::make_unique<WireConnection>(server.port(), 30s));
    const auto start = std::chrono::steady_clock::now();
    for (auto& s : silent) EXPECT_TRUE(some_text_contains(s->receive_until_close(), "--handshake-timeout 2 s"));
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 20.0);
    // The slots are free again once the server has reaped the ended sessions.
    const auto until = std::chrono::steady_clock::now() + 20s;
    for (;;) {
        WireConnection probe(server.port(), 30s);
        probe.send(wire::Close{});
        const auto reply = probe.receive_until_close();
        if (!some_text_contains(reply, "session limit") || std::chrono::steady_clock::now() > until) break;
        std::this_thread::sleep_for(100ms);
    }
    good_session(server.port());
}

// One address may hold two sessions: the third connection is turned away with a message naming the
// flag, and a session is accepted again once one of the two has ended.
TEST(ServerDeadlines, OneAddressHoldsAtMostItsShareOfSessions) {
    ServerProcess server({"--max-sessions-per-address", "2", "--http-port", "0", "--backend", "cpu"});
    auto first = std::make_unique<WireConnection>(server.port(), 30s);
    WireConnection second(server.port(), 30s);
    first->send(wire::ConfigFile{"cartesian-rss"});
    second.send(wire::ConfigFile{"cartesian-rss"});
    // Both are sessions once the server has answered a query on each (a reply means the session runs).
    for (WireConnection* c : {first.get(), &second}) {
        c->send(wire::Query{0, 1, "larmor::status"});
        ASSERT_TRUE(std::holds_alternative<wire::Response>(c->receive()));
    }
    {
        WireConnection third(server.port(), 30s);
        third.send(wire::ConfigFile{"cartesian-rss"});  // the slot is asked for with the chain config
        EXPECT_TRUE(some_text_contains(third.receive_until_close(), "--max-sessions-per-address 2"));
    }
    EXPECT_EQ(test::metric_sample(test::http_request(server.http_port(), "/metrics").body,
                                  "larmor_connections_refused_total{reason=\"per_address\"}"),
              1);
    first->send(wire::Close{});
    first->receive_until_close();
    // The session gives its place back before the server ends the connection, so once the client sees
    // the end, a new session from the same address is admitted.
    EXPECT_TRUE(first->closed_by_peer());
    first.reset();
    good_session(server.port());
    second.send(wire::Close{});
    second.receive_until_close();
}

}  // namespace
}  // namespace larmor
