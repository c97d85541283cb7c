// --log-format json (server/log_format.h): every line the server writes is one JSON object, and a
// session's lines, the gadgets' included, carry its session id.
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>
#include <string>

#include "tests/support/server_process.h"
#include "tests/support/small_scan.h"

namespace larmor {
namespace {

using namespace std::chrono_literals;

// A light structural check of one JSON Lines record as the formatter writes it: an object whose
// string values have no raw control characters or unescaped quotes.
bool looks_like_json_object(const std::string& line) {
    if (line.size() < 2 || line.front() != '{' || line.back() != '}') return false;
    bool in_string = false;
    for (size_t i = 1; i + 1 < line.size(); ++i) {
        const char c = line[i];
        if (static_cast<unsigned char>(c) < 0x20) return false;
        if (in_string && c == '\\') {
            ++i;
            continue;
        }
        if (c == '"') in_string = !in_string;
    }
    return !in_string;
}

TEST(ServerLogFormat, JsonLinesCarryTheSession) {
    test::ServerProcess server({"--log-format", "json", "--backend", "cpu"});
    {
        const test::SmallScan scan;
        test::WireConnection c(server.port(), 60s);
        c.send(wire::ConfigFile{"cartesian-rss"});
        c.send(wire::ParameterScript{test::small_scan_header(scan)});
        for (const auto& a : test::small_scan_acquisitions(scan, {1.f})) c.send(a);
        c.send(wire::Close{});
        EXPECT_EQ(test::images_by_repetition(c.receive_until_close(), scan).size(), 1u);
    }
    {
        // A message with quotes and a backslash in it: the chain name is echoed in the error.
        test::WireConnection c(server.port(), 60s);
        c.send(wire::ConfigFile{"no \"such\" \\chain"});
        c.send(wire::Close{});
        c.receive_until_close();
    }
    std::string log;
    const auto end = std::chrono::steady_clock::now() + 20s;
    do {
        log = server.log();
    } while (log.find("\"session\": \"s2\"") == std::string::npos && std::chrono::steady_clock::now() < end);
    std::istringstream lines(log);
    std::string line;
    size_t records = 0, s1 = 0;
    while (std::getline(lines, line)) {
        if (line.empty()) continue;
        ++records;
        EXPECT_TRUE(looks_like_json_object(line)) << line;
        EXPECT_EQ(line.rfind("{\"time\": \"20", 0), 0u) << line;
        EXPECT_NE(line.find("\"level\": "), std::string::npos) << line;
        if (line.find("\"session\": \"s1\"") != std::string::npos) ++s1;
    }
    EXPECT_GT(records, 3u);
    EXPECT_GE(s1, 2u) << log;  // its start and its end at least
    EXPECT_NE(log.find("\"session\": \"s2\""), std::string::npos) << log;
    EXPECT_NE(log.find("\\\"such\\\" \\\\chain"), std::string::npos) << log;  // escaped
}

TEST(ServerLogFormat, AnUnknownFormatIsRefusedByName) {
    const auto r = test::run_process({test::server_binary(), "--log-format", "xml", "--port", "0"}, 30s);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.output.find("xml"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace larmor
