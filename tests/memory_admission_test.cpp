// Memory budgets through a real larmor-server: streams whose ISMRMRD header declares more than a
// session may hold are refused with a TEXT naming the budget before anything big is allocated, the
// server's resident memory does not move, and good sessions beside them get their images.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <complex>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <ismrmrd/ismrmrd.h>

#include "tests/support/cartesian_header.h"
#include "tests/support/server_process.h"
#include "wire/codec.h"

namespace larmor {
namespace {

using namespace std::chrono_literals;
using test::ServerProcess;
using test::WireConnection;
using wire::WireMessage;

// The budgets the defaults give on a 24 GiB host (75% and 25% of that), stated so the tests mean
// the same on every machine. CPU backend: the budget is host memory whatever the machine has.
const std::vector<std::string> kAsOnA24GiBHost = {"--backend", "cpu", "--memory-limit", "18GiB",
                                                  "--session-memory-limit", "25%"};

std::string header_xml(unsigned x, unsigned y, unsigned z, unsigned channels) {
    return test::cartesian_header_xml(x, y, z, channels);
}

wire::Acquisition readout(uint16_t samples, uint16_t channels, uint16_t line, bool last = false) {
    wire::Acquisition a = test::cartesian_readout(samples, channels, line, last);
    for (size_t i = 0; i < a.data.size(); ++i)
        a.data[i] = std::complex<float>(float((i * 7 + line * 3) % 11) - 5.f, float((i * 5 + line) % 13) - 6.f);
    return a;
}

std::string texts(const std::vector<WireMessage>& reply) {
    std::string out;
    for (const auto& t : test::texts_of(reply)) out += t;
    return out;
}

// A small Cartesian scan (32 x 16, 2 coils) through the cartesian chain; returns the image pixels.
std::vector<uint8_t> cartesian_image(uint16_t port) {
    WireConnection c(port);
    c.send(wire::ConfigFile{"cartesian"});
    c.send(wire::ParameterScript{header_xml(32, 16, 1, 2)});
    for (uint16_t line = 0; line < 16; ++line) c.send(readout(32, 2, line, line == 15));
    c.send(wire::Close{});
    const auto reply = c.receive_until_close();
    std::vector<uint8_t> pixels;
    for (const auto& m : reply)
        if (const auto* im = std::get_if<wire::Image>(&m)) pixels.insert(pixels.end(), im->pixels.begin(), im->pixels.end());
    EXPECT_EQ(texts(reply).find("ERROR"), std::string::npos) << texts(reply);
    return pixels;
}

// VmRSS of `pid` in bytes.
uint64_t resident_bytes(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string key;
    uint64_t kib = 0;
    while (f >> key) {
        if (key == "VmRSS:" && f >> kib) return kib * 1024;
        f.ignore(1 << 20, '\n');
    }
    return 0;
}

// The hostile stream of the issue: a header declaring a big matrix, one readout, CLOSE. Returns
// the server's TEXT replies.
std::string oversized_session(uint16_t port, unsigned x, unsigned y, unsigned z, unsigned channels,
                              const std::string& chain = "cartesian") {
    WireConnection c(port);
    c.send(wire::ConfigFile{chain});
    c.send(wire::ParameterScript{header_xml(x, y, z, channels)});
    c.send(readout(uint16_t(std::min(x, 4096u)), uint16_t(std::min(channels, 64u)), 0));
    c.send(wire::Close{});
    const auto reply = c.receive_until_close();
    EXPECT_TRUE(c.closed_by_peer());
    return texts(reply);
}

class MemoryAdmission : public ::testing::Test {
protected:
    void SetUp() override {
        server_ = std::make_unique<ServerProcess>(kAsOnA24GiBHost);
        reference_ = cartesian_image(server_->port());
        ASSERT_FALSE(reference_.empty());
        for (int i = 0; i < 3; ++i) cartesian_image(server_->port());  // warm: plans, allocator arenas
        rss_before_ = resident_bytes(server_->pid());
        ASSERT_GT(rss_before_, 0u);
    }
    void TearDown() override {
        if (!server_) return;
        EXPECT_TRUE(server_->running()) << "the server died";
        EXPECT_EQ(cartesian_image(server_->port()), reference_) << "the server no longer reconstructs correctly";
        const uint64_t after = resident_bytes(server_->pid());
        std::printf("server RSS %.1f MiB before the hostile streams, %.1f MiB after\n", rss_before_ / 1048576.0,
                    after / 1048576.0);
        // "Unchanged": allocator noise and thread stacks of finished sessions, nothing like the
        // gigabytes a zero-filled buffer would take.
        EXPECT_LT(after, rss_before_ + (uint64_t{64} << 20));
    }
    uint16_t port() const { return server_->port(); }

    std::unique_ptr<ServerProcess> server_;
    std::vector<uint8_t> reference_;
    uint64_t rss_before_ = 0;
};

TEST_F(MemoryAdmission, FourGiBHeaderIsRefusedNamingTheBudgetWhileAGoodSessionRuns) {
    auto good = std::async(std::launch::async, [&] {
        std::vector<std::vector<uint8_t>> images;
        for (int i = 0; i < 20; ++i) images.push_back(cartesian_image(port()));
        return images;
    });
    const std::string reply = oversized_session(port(), 1024, 1024, 64, 8);
    std::printf("reply: %s", reply.c_str());
    EXPECT_NE(reply.find("[Memory] ERROR: "), std::string::npos) << reply;
    EXPECT_NE(reply.find("encoded matrix of 1024 x 1024 x 64 with 8 receiver channels"), std::string::npos) << reply;
    EXPECT_NE(reply.find("over the session host memory budget (--session-memory-limit) of 4.50 GiB"), std::string::npos)
        << reply;
    for (const auto& image : good.get()) EXPECT_EQ(image, reference_) << "a concurrent good session got another image";
}

TEST_F(MemoryAdmission, TwoTiBHeaderIsRefusedTooWithNoAllocationAttempted) {
    const std::string reply = oversized_session(port(), 4096, 4096, 256, 64);
    EXPECT_NE(reply.find("encoded matrix of 4096 x 4096 x 256 with 64 receiver channels"), std::string::npos) << reply;
    EXPECT_NE(reply.find("session host memory budget"), std::string::npos) << reply;
    EXPECT_EQ(reply.find("bad_alloc"), std::string::npos) << reply;
    // The largest header the format can state: the estimate saturates, it never wraps to a small number.
    const std::string most = oversized_session(port(), 65535, 65535, 65535, 1024, "default.xml");
    EXPECT_NE(most.find("session host memory budget"), std::string::npos) << most;
}

TEST_F(MemoryAdmission, SixtyFourOversizedStreamsAtOnceLeaveTheServerServing) {
    std::vector<std::future<std::string>> streams;
    for (int i = 0; i < 64; ++i)
        streams.push_back(std::async(std::launch::async, [&] { return oversized_session(port(), 1024, 1024, 64, 8); }));
    int refused = 0;
    for (auto& s : streams) {
        const std::string reply = s.get();
        if (reply.find("session host memory budget") != std::string::npos) ++refused;
        else ADD_FAILURE() << "not refused by its budget: " << reply;
    }
    EXPECT_EQ(refused, 64);
}

// Data larger than the header declared (here 64 coils under a header that states 1) are stopped
// where they are allocated: the budget is charged by every array, not only at admission.
TEST_F(MemoryAdmission, DataBeyondTheDeclaredSizeAreStoppedAtAllocation) {
    WireConnection c(port());
    c.send(wire::ConfigFile{"cartesian"});
    c.send(wire::ParameterScript{header_xml(2048, 2048, 1, 1)});  // 32 MiB of k-space declared: admitted
    for (uint16_t line = 0; line < 4; ++line) c.send(readout(2048, 512, line));  // 16 GiB buffer needed
    c.send(wire::Close{});
    const std::string reply = texts(c.receive_until_close());
    std::printf("reply: %s", reply.c_str());
    EXPECT_NE(reply.find("ERROR"), std::string::npos) << reply;
    EXPECT_NE(reply.find("session host memory budget (--session-memory-limit)"), std::string::npos) << reply;
}

// "in_use" of the host memory budget in the larmor::status answer.
uint64_t host_memory_in_use(uint16_t port) {
    WireConnection c(port);
    c.send(wire::Query{0, 7, "larmor::status"});
    c.send(wire::Close{});
    for (const auto& m : c.receive_until_close())
        if (const auto* r = std::get_if<wire::Response>(&m)) {
            const size_t at = r->text.find("\"host_memory\": {");
            const size_t in_use = r->text.find("\"in_use\": ", at);
            if (at != std::string::npos && in_use != std::string::npos)
                return std::stoull(r->text.substr(in_use + 10));
        }
    return 0;
}

// The estimate for cartesian on 256 x 256 x 48 coils: k-space buffer and coil images (24 MiB each)
// and the combined image (512 KiB).
constexpr uint64_t kClaim = (uint64_t{48} << 20) + (uint64_t{512} << 10);

// With the server-wide budget taken by running sessions, a newcomer waits --admission-wait for room,
// then is told the server is busy; once they finish, it is admitted again.
TEST(MemoryAdmissionBusy, NewcomerIsToldServerBusyUntilRoomIsFree) {
    // cartesian on 256 x 256 x 48 coils needs an estimated 48.5 MiB (k-space buffer, coil images,
    // combined image): two fit in 100 MiB, a third does not.
    ServerProcess server({"--backend", "cpu", "--memory-limit", "100MiB", "--session-memory-limit", "100%",
                          "--admission-wait", "1"});
    const auto open_session = [&] {
        auto c = std::make_unique<WireConnection>(server.port());
        c->send(wire::ConfigFile{"cartesian"});
        c->send(wire::ParameterScript{header_xml(256, 256, 1, 48)});
        c->send(readout(256, 48, 128));
        return c;
    };
    auto first = open_session(), second = open_session();
    // Both admitted (their headers read, their claims made) before the third arrives.
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (host_memory_in_use(server.port()) < 2 * kClaim && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(20ms);
    ASSERT_GE(host_memory_in_use(server.port()), 2 * kClaim);
    auto third = open_session();
    third->send(wire::Close{});
    const std::string busy = texts(third->receive_until_close());
    EXPECT_NE(busy.find("server busy: chain 'cartesian'"), std::string::npos) << busy;
    EXPECT_NE(busy.find("server host memory budget (--memory-limit) of 100 MiB"), std::string::npos) << busy;
    EXPECT_NE(busy.find("waited 1 s"), std::string::npos) << busy;
    for (auto* c : {first.get(), second.get()}) {
        c->send(wire::Close{});
        const auto reply = c->receive_until_close();
        EXPECT_EQ(texts(reply).find("ERROR"), std::string::npos) << texts(reply);
        size_t images = 0;
        for (const auto& m : reply) images += std::holds_alternative<wire::Image>(m);
        EXPECT_EQ(images, 1u);
    }
    auto fourth = open_session();
    fourth->send(wire::Close{});
    const std::string admitted = texts(fourth->receive_until_close());
    EXPECT_EQ(admitted.find("ERROR"), std::string::npos) << admitted;
}

}  // namespace
}  // namespace larmor
