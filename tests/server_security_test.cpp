// Access control of larmor-server as a process (README, "Limits and security"): the --allow list
// refusing and admitting loopback clients, TLS and mutual TLS end to end with larmor-client (the same
// images as plain TCP), and the clients TLS turns away (no certificate, another CA, plain TCP,
// silence) while a good session on the same server goes on. Keys and certificates are made for each
// run with the openssl command (tests/support/test_pki.h).
#include <unistd.h>

#include <chrono>
#include <complex>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/cartesian_header.h"
#include "tests/support/ismrmrd_files.h"
#include "tests/support/server_process.h"
#include "tests/support/test_pki.h"
#include "tests/support/tls_wire_connection.h"

namespace larmor {
namespace {

using test::ServerProcess;
using test::TestPki;
using test::TlsWireConnection;
using test::WireConnection;
using namespace std::chrono_literals;

std::string header_xml() { return test::cartesian_header_xml(); }

wire::Acquisition acquisition(uint32_t scan) {
    wire::Acquisition a;
    a.head.version = 1;
    a.head.scan_counter = scan;
    a.head.number_of_samples = 32;
    a.head.active_channels = 2;
    a.head.available_channels = 2;
    a.head.center_sample = 16;
    a.head.idx.kspace_encode_step_1 = static_cast<uint16_t>(scan % 16);
    a.data.assign(64, std::complex<float>(1.0f, float(scan)));
    return a;
}

std::string joined_texts(const std::vector<wire::WireMessage>& messages) {
    std::string out;
    for (const auto& t : test::texts_of(messages)) out += t;
    return out;
}

// The number after "\"field\": " in a larmor::status answer, or -1.
long status_field(const std::string& json, const std::string& field) {
    const std::string key = "\"" + field + "\": ";
    const size_t at = json.find(key);
    if (at == std::string::npos) return -1;
    return std::stol(json.substr(at + key.size()));
}

template <class Connection>
std::string status_over(Connection& c) {
    c.send(wire::Query{0, 7, "larmor::status"});
    const wire::WireMessage reply = c.receive();
    const auto* r = std::get_if<wire::Response>(&reply);
    if (!r) throw std::runtime_error("no RESPONSE to larmor::status");
    return r->text;
}

// A counter session on `c` (config, header, n acquisitions, CLOSE): the count the server reports.
template <class Connection>
void expect_counter_session(Connection& c, uint32_t n) {
    c.send(wire::ConfigFile{"counter"});
    c.send(wire::ParameterScript{header_xml()});
    for (uint32_t i = 0; i < n; ++i) c.send(acquisition(i));
    c.send(wire::Close{});
    const std::string text = joined_texts(c.receive_until_close());
    EXPECT_NE(text.find("AcquisitionCounter: " + std::to_string(n)), std::string::npos) << text;
    EXPECT_EQ(text.find("ERROR"), std::string::npos) << text;
}

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// ---------------------------------------------------------------------------------------------------
// --allow

// All of 127.0.0.0/8 is this machine, so one server tells two loopback clients apart by their source
// address: 127.0.0.2 is allowed, 127.0.0.1 is not.
TEST(ServerAllowList, RefusesAClientOutsideTheListBeforeAnySessionExists) {
    ServerProcess server({"--allow", "127.0.0.2/32"});
    {
        WireConnection refused(server.port());
        refused.send(wire::ConfigFile{"counter"});
        const auto reply = refused.receive_until_close();
        const std::string text = joined_texts(reply);
        EXPECT_TRUE(contains(text, "[Server] ERROR: connections from 127.0.0.1 are not allowed")) << text;
        EXPECT_FALSE(contains(text, "127.0.0.2")) << "the allow-list must not be revealed: " << text;
        EXPECT_TRUE(refused.closed_by_peer());
    }
    WireConnection allowed(server.port(), 60s, "127.0.0.2");
    const std::string status = status_over(allowed);
    EXPECT_EQ(status_field(status, "connections_refused"), 1) << status;
    // The refused connection never became a session, and this one is none yet either: it has only
    // queried (a session slot is taken with the chain config, connection_slots.h).
    EXPECT_EQ(status_field(status, "sessions_total"), 0) << status;
    EXPECT_EQ(status_field(status, "connections_pending"), 1) << status;
    expect_counter_session(allowed, 3);
    EXPECT_TRUE(contains(server.log(), "refused 127.0.0.1:")) << server.log();
    EXPECT_TRUE(contains(server.log(), "not in --allow (127.0.0.2/32)")) << server.log();
}

// A client refused in a loop writes at most 20 log lines per 10 s; every refusal is still counted.
TEST(ServerAllowList, RefusalsInALoopDoNotFloodTheLog) {
    ServerProcess server({"--allow", "127.0.0.2/32"});
    for (int i = 0; i < 40; ++i) {
        WireConnection refused(server.port());
        refused.send(wire::ConfigFile{"counter"});
        refused.receive_until_close();
    }
    WireConnection allowed(server.port(), 60s, "127.0.0.2");
    EXPECT_EQ(status_field(status_over(allowed), "connections_refused"), 40);
    const std::string log = server.log();
    size_t lines = 0;
    for (size_t at = log.find("refused 127.0.0.1:"); at != std::string::npos; at = log.find("refused 127.0.0.1:", at + 1))
        ++lines;
    // 40 refusals within one window (a few seconds at most) log 20 lines; two windows at most 40.
    EXPECT_GE(lines, 20u) << log;
    EXPECT_LT(lines, 40u) << log;
}

TEST(ServerAllowList, ServesLoopbackWhenItsNetworkIsAllowed) {
    ServerProcess server({"--allow", "10.0.0.0/8,::1/128", "--allow", "127.0.0.0/8"});
    WireConnection c(server.port());
    expect_counter_session(c, 5);
    EXPECT_TRUE(contains(server.log(), "clients allowed from 10.0.0.0/8, ::1/128, 127.0.0.0/8")) << server.log();
}

// Bound to :: (IPv6 and IPv4), the server sees an IPv4 client as ::ffff:127.0.0.1 (RFC 4291 section
// 2.5.5.2); IPv4 networks still match it, IPv6 ones do not.
TEST(ServerAllowList, DualStackSocketJudgesIpv4ClientsByIpv4Networks) {
    {
        ServerProcess server({"--address", "::", "--allow", "::1/128", "--allow", "127.0.0.0/8"});
        WireConnection c(server.port());
        expect_counter_session(c, 2);
    }
    ServerProcess server({"--address", "::", "--allow", "::1/128"});
    WireConnection c(server.port());
    c.send(wire::ConfigFile{"counter"});
    const std::string text = joined_texts(c.receive_until_close());
    EXPECT_TRUE(contains(text, "are not allowed by this larmor-server (--allow)")) << text;
    EXPECT_TRUE(contains(server.log(), "refused [::ffff:127.0.0.1]:")) << server.log();
}

TEST(ServerAllowList, MalformedNetworkStopsTheServerAtStartupNamingIt) {
    for (const std::string bad : {"10.0.0.1/8", "127.0.0.0/33", "not-an-address", "fe80::1%lo"}) {
        const auto r = test::run_process({test::server_binary(), "--port", "0", "--allow", "127.0.0.0/8", "--allow", bad},
                                         60s);
        EXPECT_FALSE(r.timed_out) << bad;
        EXPECT_NE(r.exit_code, 0) << bad << "\n" << r.output;
        EXPECT_TRUE(contains(r.output, "'" + bad + "'")) << r.output;
        EXPECT_FALSE(contains(r.output, "listening on")) << r.output;
    }
}

// ---------------------------------------------------------------------------------------------------
// TLS

class ServerTls : public ::testing::Test {
protected:
    static void SetUpTestSuite() { pki_ = std::make_unique<TestPki>(); }

    // A phantom with a noise scan and 8 repetitions (17 MB), reconstructed by the Cartesian chain
    // on the CPU: images of the first repetitions come back while the client is still uploading
    // the later ones, so both directions of one TLS session are busy at once. Made by the first test
    // that streams it: ctest runs each test in a process of its own, and the others (most of them) do
    // not need it (20 s per process under ThreadSanitizer).
    static const std::string& scan() {
        if (scan_.empty()) {
            const std::string path = pki_->dir() + "/scan.h5";
            const auto r = test::run_process({std::string(LARMOR_BINARY_DIR) + "/tools/larmor-phantom", "-o", path,
                                              "--matrix", "128", "--coils", "8", "--oversampling", "2", "--snr", "30",
                                              "--noise-scan", "--repetitions", "8", "--seed", "3"},
                                             120s);
            if (r.exit_code != 0) throw std::runtime_error("larmor-phantom failed: " + r.output);
            scan_ = path;
        }
        return scan_;
    }
    static void TearDownTestSuite() { pki_.reset(); }

    static std::vector<std::string> tls_server_args(bool mutual) {
        std::vector<std::string> args = {"--backend", "cpu", "--tls-cert", pki_->cert("server"), "--tls-key",
                                         pki_->key("server"), "--tls-handshake-timeout", "2"};
        if (mutual) args.insert(args.end(), {"--tls-client-ca", pki_->cert("client_ca")});
        return args;
    }

    // larmor-client streaming the phantom through `cartesian` with `extra` flags; the images it wrote.
    static std::vector<test::FileImage> reconstruct(uint16_t port, const std::vector<std::string>& extra,
                                                    test::ProcessResult* result = nullptr) {
        const std::string out = pki_->dir() + "/out-" + std::to_string(counter_++) + ".h5";
        std::vector<std::string> argv = {test::client_binary(), "-a", "127.0.0.1", "-p", std::to_string(port),
                                         "-f", scan(), "-c", "cartesian", "-o", out, "-G", "run"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        const auto r = test::run_process(argv, 300s);
        if (result) *result = r;
        EXPECT_EQ(r.exit_code, 0) << r.output;
        std::vector<test::FileImage> images;
        if (::access(out.c_str(), F_OK) == 0) images = test::read_images(out, "run");
        ::unlink(out.c_str());
        return images;
    }

    // What plain TCP gives, once per suite.
    static const std::vector<test::FileImage>& plain_images() {
        static const std::vector<test::FileImage> images = [] {
            ServerProcess plain({"--backend", "cpu"});
            return reconstruct(plain.port(), {});
        }();
        return images;
    }

    static void expect_same_images(const std::vector<test::FileImage>& got) {
        const auto& ref = plain_images();
        ASSERT_EQ(ref.size(), 8u);  // one per repetition
        ASSERT_EQ(got.size(), ref.size());
        for (size_t i = 0; i < ref.size(); ++i) {
            EXPECT_EQ(got[i].name, ref[i].name);
            // Same bytes in, same image out, to the rounding of the FFT plans: each CPU session
            // measures its own FFTW plans (FFTW_MEASURE), and under load it may pick another
            // algorithm, which moves the last digits (seen: 1e-5 relative).
            EXPECT_LT(test::nrmse(ref[i].values, got[i].values), 1e-4) << "image " << i << " differs from plain TCP's";
        }
    }

    // larmor-client -Q gadgetron::version with `extra` flags.
    static test::ProcessResult query(uint16_t port, const std::vector<std::string>& extra,
                                     const std::string& host = "127.0.0.1") {
        std::vector<std::string> argv = {test::client_binary(), "-a", host, "-p", std::to_string(port), "-Q",
                                         "gadgetron::version"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        return test::run_process(argv, 120s);
    }

    static std::unique_ptr<TestPki> pki_;
    static std::string scan_;
    static int counter_;
};

std::unique_ptr<TestPki> ServerTls::pki_;
std::string ServerTls::scan_;
int ServerTls::counter_ = 0;

TEST_F(ServerTls, ServerOnlyTlsReturnsTheSameImagesAsPlainTcp) {
    ServerProcess server(tls_server_args(false));
    test::ProcessResult r;
    expect_same_images(reconstruct(server.port(), {"--tls", "--tls-ca", pki_->cert("ca")}, &r));
    EXPECT_TRUE(contains(r.output, "TLSv1.3")) << r.output;
    EXPECT_TRUE(contains(server.log(), "TLSv1.3")) << server.log();
}

TEST_F(ServerTls, MutualTlsReturnsTheSameImagesAsPlainTcp) {
    ServerProcess server(tls_server_args(true));
    expect_same_images(reconstruct(
        server.port(), {"--tls-ca", pki_->cert("ca"), "--tls-cert", pki_->cert("client"), "--tls-key", pki_->key("client")}));
    EXPECT_TRUE(contains(server.log(), "client certificate /CN=client")) << server.log();
}

// Every kind of client mutual TLS turns away, while a good session on the same server is in the
// middle of its stream: each is refused with a clear reason on both sides, and the good session
// ends with every acquisition counted.
TEST_F(ServerTls, RefusedClientsDoNotDisturbAConcurrentSession) {
    ServerProcess server(tls_server_args(true));
    TlsWireConnection good(server.port(), pki_->cert("ca"), pki_->cert("client"), pki_->key("client"));
    good.send(wire::ConfigFile{"counter"});
    good.send(wire::ParameterScript{header_xml()});
    for (uint32_t i = 0; i < 10; ++i) good.send(acquisition(i));
    ASSERT_GE(status_field(status_over(good), "sessions_active"), 1);  // the session is running

    // No client certificate.
    auto r = query(server.port(), {"--tls-ca", pki_->cert("ca")});
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "the server requires a client certificate")) << r.output;
    // A certificate from a CA the server does not trust.
    r = query(server.port(), {"--tls-ca", pki_->cert("ca"), "--tls-cert", pki_->cert("stranger"), "--tls-key",
                              pki_->key("stranger")});
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "does not accept this client certificate")) << r.output;
    // Plain TCP on the TLS port: told so in plain text.
    {
        WireConnection plain(server.port());
        plain.send(wire::ConfigFile{"counter"});
        const std::string text = joined_texts(plain.receive_until_close());
        EXPECT_TRUE(contains(text, "this larmor-server port speaks TLS")) << text;
    }
    // A client that connects and says nothing is dropped after --tls-handshake-timeout (2 s).
    {
        WireConnection silent(server.port());
        EXPECT_TRUE(silent.closed_by_peer(60s)) << "a silent client kept its connection";
    }

    for (uint32_t i = 10; i < 20; ++i) good.send(acquisition(i));
    good.send(wire::Close{});
    const std::string text = joined_texts(good.receive_until_close());
    EXPECT_NE(text.find("AcquisitionCounter: 20"), std::string::npos) << text;
    EXPECT_EQ(text.find("ERROR"), std::string::npos) << text;

    TlsWireConnection after(server.port(), pki_->cert("ca"), pki_->cert("client"), pki_->key("client"));
    const std::string status = status_over(after);
    EXPECT_EQ(status_field(status, "tls_handshakes_failed"), 4) << status;
    const std::string log = server.log();
    for (const char* line : {"refused: TLS handshake failed: error:0A0000C7:SSL routines::peer did not return a certificate",
                             "refused: TLS handshake failed: client certificate rejected: unable to get local issuer",
                             "refused: not TLS (first byte 0x01): a plain-TCP client on the TLS port",
                             "no TLS handshake within 2 s (--tls-handshake-timeout)"})
        EXPECT_TRUE(contains(log, line)) << line << "\n" << log;
}

TEST_F(ServerTls, ClientVerifiesTheServerCertificateAndItsName) {
    ServerProcess server(tls_server_args(false));
    // The right CA, and the certificate names both 127.0.0.1 and localhost.
    for (const char* host : {"127.0.0.1", "localhost"}) {
        const auto r = query(server.port(), {"--tls-ca", pki_->cert("ca")}, host);
        EXPECT_EQ(r.exit_code, 0) << host << "\n" << r.output;
        EXPECT_TRUE(contains(r.output, "Larmor")) << r.output;
    }
    // Another CA: not trusted.
    auto r = query(server.port(), {"--tls-ca", pki_->cert("other_ca")});
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "is not trusted: unable to get local issuer certificate")) << r.output;
    // The system's CAs (no --tls-ca) do not know the test CA either.
    r = query(server.port(), {"--tls"});
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "is not trusted")) << r.output;

    // A certificate from the right CA for another name.
    ServerProcess misnamed({"--tls-cert", pki_->cert("misnamed"), "--tls-key", pki_->key("misnamed")});
    r = query(misnamed.port(), {"--tls-ca", pki_->cert("ca")});
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "IP address mismatch")) << r.output;
    r = query(misnamed.port(), {"--tls-ca", pki_->cert("ca")}, "localhost");
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "hostname mismatch")) << r.output;
}

// The client's files are checked before it connects (port 1: nothing listens there).
TEST_F(ServerTls, ClientRejectsUnusableFilesBeforeConnecting) {
    auto r = query(1, {"--tls-cert", pki_->cert("client"), "--tls-key", pki_->key("server_encrypted")});
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "--tls-key '" + pki_->key("server_encrypted") + "': the key is encrypted")) << r.output;
    r = query(1, {"--tls-cert", pki_->cert("client"), "--tls-key", pki_->key("stranger")});
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "does not belong to the certificate")) << r.output;
    r = query(1, {"--tls-ca", pki_->dir() + "/client.ext"});
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "--tls-ca '" + pki_->dir() + "/client.ext'")) << r.output;
}

TEST_F(ServerTls, TlsClientOnAPlainPortFailsWithAHint) {
    ServerProcess server;
    const auto r = query(server.port(), {"--tls-ca", pki_->cert("ca")});
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "does the server speak TLS on this port?")) << r.output;
    EXPECT_TRUE(server.running());
}

TEST_F(ServerTls, RefusedByTheAllowListOnATlsPortIsClosedWithoutAHandshake) {
    std::vector<std::string> args = tls_server_args(false);
    args.insert(args.end(), {"--allow", "127.0.0.2"});
    ServerProcess server(args);
    const auto r = query(server.port(), {"--tls-ca", pki_->cert("ca")});
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "is this machine outside its --allow networks")) << r.output;
    EXPECT_TRUE(contains(server.log(), "refused 127.0.0.1:")) << server.log();
    EXPECT_FALSE(contains(server.log(), "TLS handshake failed")) << server.log();
}

TEST_F(ServerTls, UnusableTlsFilesStopTheServerAtStartupNamingThem) {
    struct Case {
        std::vector<std::string> args;
        std::string expected;
    };
    const std::string not_pem = pki_->dir() + "/client.ext";  // a text file, not PEM
    for (const Case& c : {
             Case{{"--tls-cert", pki_->cert("server"), "--tls-key", pki_->key("client")},
                  "--tls-key '" + pki_->key("client") + "': does not belong to the certificate"},
             Case{{"--tls-cert", not_pem, "--tls-key", pki_->key("server")}, "--tls-cert '" + not_pem + "'"},
             Case{{"--tls-cert", pki_->cert("server"), "--tls-key", not_pem}, "--tls-key '" + not_pem + "'"},
             Case{{"--tls-cert", pki_->cert("server"), "--tls-key", pki_->key("server"), "--tls-client-ca", not_pem},
                  "--tls-client-ca '" + not_pem + "'"},
             Case{{"--tls-client-ca", pki_->cert("client_ca")}, "--tls-client-ca requires --tls-cert"},
             Case{{"--tls-cert", pki_->cert("server"), "--tls-key", pki_->key("server_encrypted")},
                  "--tls-key '" + pki_->key("server_encrypted") + "': the key is encrypted"},
             Case{{"--tls-cert", pki_->dir() + "/missing.pem"}, "missing.pem"},
         }) {
        std::vector<std::string> argv = {test::server_binary(), "--port", "0"};
        argv.insert(argv.end(), c.args.begin(), c.args.end());
        const auto r = test::run_process(argv, 60s);
        EXPECT_NE(r.exit_code, 0) << r.output;
        EXPECT_TRUE(contains(r.output, c.expected)) << c.expected << "\n" << r.output;
        EXPECT_FALSE(contains(r.output, "listening on")) << r.output;
    }
}

}  // namespace
}  // namespace larmor
