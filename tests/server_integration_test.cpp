// larmor-server as a process, spoken to over TCP: queries, full sessions, concurrency, every
// malformed input protocol.md names (each next to a good session that must not notice), limits,
// shutdown, and the real dataset through larmor-client. No assertion depends on timing; every wait
// has a generous deadline so a broken server fails a test instead of hanging it.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <complex>
#include <csignal>
#include <cstddef>
#include <optional>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <ismrmrd/dataset.h>
#include <ismrmrd/meta.h>

#include "tests/support/cartesian_header.h"
#include "tests/support/server_process.h"

namespace larmor {
namespace {

using test::ServerProcess;
using test::WireConnection;
using wire::Acquisition;
using wire::Image;
using wire::Text;
using wire::Waveform;
using wire::WireMessage;
using namespace std::chrono_literals;

constexpr uint16_t kChannels = 2;
constexpr uint16_t kSamples = 32;
constexpr uint16_t kLines = 16;

const std::string kDataset = LARMOR_SHARED_DATA_DIR "/gadgetron-grappa-r3/meas_MID00349_FID09273_SNR_R3.h5";

std::string header_xml() { return test::cartesian_header_xml(32, 16, 1, kChannels); }

Acquisition make_acquisition(uint32_t scan, bool noise = false) {
    Acquisition a;
    a.head.version = 1;
    a.head.scan_counter = scan;
    a.head.number_of_samples = kSamples;
    a.head.active_channels = kChannels;
    a.head.available_channels = kChannels;
    a.head.center_sample = kSamples / 2;
    a.head.idx.kspace_encode_step_1 = static_cast<uint16_t>(scan % kLines);
    if (noise) a.head.flags |= uint64_t{1} << (ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT - 1);
    a.data.resize(size_t{kChannels} * kSamples);
    for (size_t i = 0; i < a.data.size(); ++i) a.data[i] = std::complex<float>(float(scan), float(i));
    return a;
}

Waveform make_waveform(uint32_t scan) {
    Waveform w;
    w.head.version = 1;
    w.head.number_of_samples = 8;
    w.head.channels = 1;
    w.head.scan_counter = scan;
    w.data.assign(8, scan);
    return w;
}

Image make_image(uint16_t index) {
    Image im;
    im.head.version = 1;
    im.head.data_type = ISMRMRD::ISMRMRD_FLOAT;
    im.head.image_type = ISMRMRD::ISMRMRD_IMTYPE_MAGNITUDE;
    im.head.matrix_size[0] = 16;
    im.head.matrix_size[1] = 8;
    im.head.matrix_size[2] = 1;
    im.head.channels = 1;
    im.head.image_index = index;
    im.pixels.assign(16 * 8 * sizeof(float), static_cast<uint8_t>(index));
    return im;
}

std::string joined(const std::vector<std::string>& texts) {
    std::string out;
    for (const auto& t : texts) out += t + "\n";
    return out;
}

// The number right after `prefix` in `text`, or -1 (std::regex trips GCC 12 warnings under ASan).
long number_after(const std::string& text, const std::string& prefix) {
    const size_t at = text.find(prefix);
    if (at == std::string::npos) return -1;
    const size_t from = at + prefix.size();
    const size_t to = text.find_first_not_of("0123456789", from);
    if (to == from) return -1;
    return std::stol(text.substr(from, to - from));
}

// The acquisition count the AcquisitionCounter gadget reported, or -1.
long counted_acquisitions(const std::string& text) { return number_after(text, "AcquisitionCounter: "); }

// config counter + header + n acquisitions (the first a noise scan) + `waveforms` + CLOSE.
std::vector<WireMessage> counter_session(uint16_t port, uint32_t n, uint32_t waveforms = 0) {
    WireConnection c(port);
    c.send(wire::ConfigFile{"counter"});
    c.send(wire::ParameterScript{header_xml()});
    for (uint32_t i = 0; i < n; ++i) c.send(make_acquisition(i, i == 0));
    for (uint32_t i = 0; i < waveforms; ++i) c.send(make_waveform(i));
    c.send(wire::Close{});
    auto reply = c.receive_until_close();
    EXPECT_TRUE(c.closed_by_peer()) << "the server must close the connection after CLOSE";
    return reply;
}

void expect_clean_count(const std::vector<WireMessage>& reply, long expected) {
    const std::string text = joined(test::texts_of(reply));
    EXPECT_EQ(counted_acquisitions(text), expected) << text;
    EXPECT_EQ(text.find("ERROR"), std::string::npos) << text;
    ASSERT_FALSE(reply.empty());
    EXPECT_TRUE(std::holds_alternative<wire::Close>(reply.back()));
}

// A good session kept busy on its own thread for the duration of a bad one: it streams an
// acquisition every few milliseconds (so it never idles into a read timeout) until finish(), then
// checks that every acquisition it sent was counted and that it saw no error.
class BackgroundSession {
public:
    explicit BackgroundSession(uint16_t port) : conn_(port) {
        conn_.send(wire::ConfigFile{"counter"});
        conn_.send(wire::ParameterScript{header_xml()});
        worker_ = std::thread([this] {
            try {
                while (!stop_) {
                    conn_.send(make_acquisition(sent_, sent_ == 0));
                    ++sent_;
                    std::this_thread::sleep_for(5ms);
                }
            } catch (const std::exception& e) {
                failure_ = e.what();
            }
        });
    }
    ~BackgroundSession() {
        stop_ = true;
        if (worker_.joinable()) worker_.join();
    }

    void finish_and_check() {
        stop_ = true;
        worker_.join();
        ASSERT_EQ(failure_, "") << "the good session failed while the bad one ran";
        conn_.send(wire::Close{});
        expect_clean_count(conn_.receive_until_close(), static_cast<long>(sent_));
    }

private:
    WireConnection conn_;
    std::thread worker_;
    std::atomic<bool> stop_{false};
    uint32_t sent_ = 0;
    std::string failure_;
};

// Reads the reply to a bad session: at least one TEXT with "ERROR" and every needle, then CLOSE,
// then the server closes the connection.
void expect_error_reply(WireConnection& c, const std::vector<std::string>& needles) {
    std::vector<WireMessage> reply;
    ASSERT_NO_THROW(reply = c.receive_until_close()) << "expected TEXT error(s) and CLOSE";
    const std::string text = joined(test::texts_of(reply));
    EXPECT_NE(text.find("ERROR"), std::string::npos) << text;
    for (const auto& n : needles) EXPECT_NE(text.find(n), std::string::npos) << "missing '" << n << "' in: " << text;
    EXPECT_TRUE(c.closed_by_peer()) << "connection still open after CLOSE";
}

// The answer to one query session, or nothing when the server answered without a RESPONSE.
std::optional<std::string> try_query(uint16_t port, const std::string& key, uint64_t correlation = 42) {
    WireConnection c(port);
    c.send(wire::Query{0, correlation, key});
    c.send(wire::Close{});
    const auto reply = c.receive_until_close();
    for (const auto& m : reply)
        if (const auto* r = std::get_if<wire::Response>(&m)) {
            EXPECT_EQ(r->correlation_id, correlation);
            return r->text;
        }
    return std::nullopt;
}

std::string query(uint16_t port, const std::string& key) {
    auto answer = try_query(port, key);
    if (!answer) ADD_FAILURE() << "no RESPONSE to query '" << key << "'";
    return answer.value_or("");
}

// One numeric field of the larmor::status JSON, or -1.
long status_field(const std::string& status, const std::string& field) {
    return number_after(status, "\"" + field + "\": ");
}

bool file_exists(const std::string& path) {
    struct stat st{};
    return ::stat(path.c_str(), &st) == 0;
}

// A private copy of the shared dataset, removed with the object. ISMRMRD::Dataset opens files
// read-write, and HDF5's file locking then fails when another process (a test running beside this
// one) has the same file open.
class DatasetCopy {
public:
    DatasetCopy() : path_("/tmp/larmor-it-dataset-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++) + ".h5") {
        std::ifstream in(kDataset, std::ios::binary);
        std::ofstream out(path_, std::ios::binary);
        out << in.rdbuf();
        if (!out) throw std::runtime_error("cannot copy " + kDataset + " to " + path_);
    }
    ~DatasetCopy() { ::unlink(path_.c_str()); }
    const std::string& path() const { return path_; }

private:
    static inline int counter_ = 0;
    std::string path_;
};

// ---------------------------------------------------------------------------------------------------
// Queries

TEST(ServerQueries, GadgetronAndLarmorKeys) {
    ServerProcess server;
    EXPECT_NE(query(server.port(), "gadgetron::version").find("Larmor"), std::string::npos);
    const std::string info = query(server.port(), "gadgetron::info");
    EXPECT_NE(info.find("CUDA"), std::string::npos) << info;
    EXPECT_NE(info.find("counter"), std::string::npos) << "info lists the chains: " << info;
    EXPECT_NE(info.find(test::source_config_dir()), std::string::npos) << info;
    EXPECT_FALSE(query(server.port(), "gadgetron::cuda::devices").empty());
    const std::string status = query(server.port(), "larmor::status");
    for (const char* field : {"uptime_s", "sessions_active", "sessions_total", "acquisitions", "bytes_received",
                              "images_sent", "errors"})
        EXPECT_NE(status.find(field), std::string::npos) << field << " missing in " << status;
}

TEST(ServerQueries, UnknownKeyNamesItAndListsKnownKeys) {
    ServerProcess server;
    const std::string answer = query(server.port(), "gadgetron::no_such_key");
    EXPECT_NE(answer.find("unknown query key 'gadgetron::no_such_key'"), std::string::npos) << answer;
    EXPECT_NE(answer.find("gadgetron::version"), std::string::npos) << answer;
}

TEST(ServerQueries, AnsweredInEveryState) {
    ServerProcess server;
    WireConnection c(server.port());
    c.send(wire::Query{0, 1, "gadgetron::version"});  // before config
    c.send(wire::ConfigFile{"counter"});
    c.send(wire::Query{0, 2, "gadgetron::version"});  // after config
    c.send(wire::ParameterScript{header_xml()});
    c.send(make_acquisition(0));
    c.send(wire::Query{0, 3, "larmor::status"});  // while streaming
    c.send(wire::Close{});
    const auto reply = c.receive_until_close();
    std::vector<uint64_t> ids;
    for (const auto& m : reply)
        if (const auto* r = std::get_if<wire::Response>(&m)) ids.push_back(r->correlation_id);
    EXPECT_EQ(ids, (std::vector<uint64_t>{1, 2, 3}));
    expect_clean_count(reply, 1);
}

TEST(ServerQueries, StatusCountsSessionsAndAcquisitions) {
    ServerProcess server;
    expect_clean_count(counter_session(server.port(), 7), 7);
    const std::string status = query(server.port(), "larmor::status");
    EXPECT_EQ(status_field(status, "acquisitions"), 7) << status;
    // A connection that only queries never takes a session slot (connection_slots.h): it is pending.
    EXPECT_EQ(status_field(status, "sessions_total"), 1) << status;
    EXPECT_EQ(status_field(status, "sessions_active"), 0) << status;
    EXPECT_EQ(status_field(status, "connections_pending"), 1) << status;  // this query's own connection
}

// ---------------------------------------------------------------------------------------------------
// Good sessions

TEST(ServerSession, CounterChainAccountsForEveryAcquisition) {
    ServerProcess server;
    const auto reply = counter_session(server.port(), 69, 3);
    expect_clean_count(reply, 69);
    const std::string text = joined(test::texts_of(reply));
    EXPECT_NE(text.find("(1 noise)"), std::string::npos) << text;
    EXPECT_NE(text.find("3 waveforms"), std::string::npos) << text;
}

TEST(ServerSession, ConfigScriptInProtobufText) {
    ServerProcess server;
    WireConnection c(server.port());
    c.send(wire::ConfigScript{"name: \"inline\" gadget { acquisition_counter {} }"});
    c.send(wire::ParameterScript{header_xml()});
    for (uint32_t i = 0; i < 5; ++i) c.send(make_acquisition(i));
    c.send(wire::Close{});
    expect_clean_count(c.receive_until_close(), 5);
}

TEST(ServerSession, ImagesFlowBackThroughTheChain) {
    // pass_through hands the client's images to the sink unchanged: the IMAGE output path end to end.
    ServerProcess server;
    WireConnection c(server.port());
    c.send(wire::ConfigScript{"gadget { pass_through {} }"});
    c.send(wire::ParameterScript{header_xml()});
    for (uint16_t i = 0; i < 10; ++i) c.send(make_image(i));
    c.send(make_acquisition(0));  // not an image: dropped at the end of the chain
    c.send(wire::Close{});
    const auto reply = c.receive_until_close();
    std::vector<uint16_t> indices;
    for (const auto& m : reply)
        if (const auto* im = std::get_if<Image>(&m)) {
            indices.push_back(im->head.image_index);
            EXPECT_EQ(im->pixels, make_image(im->head.image_index).pixels);
        }
    EXPECT_EQ(indices, (std::vector<uint16_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
    // The acquisition is accounted for: it reached the end of the chain unused.
    EXPECT_EQ(joined(test::texts_of(reply)),
              "[Summary] 1 acquisition received: 0 used; 1 discarded: 1 reached the end of the chain unused (first "
              "scan_counter 0)\n\n");
    EXPECT_EQ(status_field(query(server.port(), "larmor::status"), "images_sent"), 10);
}

TEST(ServerSession, ConfigThenCloseIsAnsweredNotHung) {
    ServerProcess server;
    WireConnection c(server.port());
    c.send(wire::ConfigFile{"counter"});
    c.send(wire::Close{});
    const auto reply = c.receive_until_close();
    const std::string text = joined(test::texts_of(reply));
    EXPECT_EQ(text.find("ERROR"), std::string::npos) << text;
    EXPECT_NE(text.find("no ISMRMRD header"), std::string::npos) << text;
}

TEST(ServerSession, NoiseDependencyQueryIsAnsweredWithDependencyQueryOnly) {
    // What gadgetron_ismrmrd_client sends before a measurement with a noise dependency. The HEAD client
    // accepts DEPENDENCY_QUERY and CLOSE only here: a TEXT makes it abort (protocol.md, "Session" 4).
    ServerProcess server;
    WireConnection c(server.port());
    c.send(wire::ConfigScript{R"(<?xml version="1.0" encoding="UTF-8"?>
<gadgetronStreamConfiguration xmlns="http://gadgetron.sf.net/gadgetron">
  <writer><slot>1019</slot><dll>gadgetron_mricore</dll><classname>DependencyQueryWriter</classname></writer>
  <gadget><name>NoiseSummary</name><dll>gadgetron_mricore</dll><classname>NoiseSummaryGadget</classname>
    <property><name>noise_file</name><value>/tmp/gadgetron/GadgetronNoiseCovarianceMatrix_xyz</value></property>
  </gadget>
</gadgetronStreamConfiguration>)"});
    c.send(wire::Close{});
    const auto reply = c.receive_until_close();
    ASSERT_EQ(reply.size(), 2u) << "DEPENDENCY_QUERY, CLOSE";
    const auto* dep = std::get_if<wire::DependencyQuery>(&reply[0]);
    ASSERT_NE(dep, nullptr);
    ISMRMRD::MetaContainer meta;
    ISMRMRD::deserialize(dep->meta_xml.c_str(), meta);
    EXPECT_STREQ(meta.as_str("status"), "failed") << dep->meta_xml;
    EXPECT_TRUE(c.closed_by_peer());
    EXPECT_NE(server.log().find("noise dependency query for measurement 'xyz': failed"), std::string::npos)
        << server.log();
}

TEST(ServerSession, EightConcurrentSessionsAllComplete) {
    ServerProcess server;
    std::vector<std::future<std::vector<WireMessage>>> sessions;
    for (uint32_t i = 0; i < 8; ++i)
        sessions.push_back(std::async(std::launch::async, [&server, i] { return counter_session(server.port(), 50 + i); }));
    for (uint32_t i = 0; i < 8; ++i) {
        ASSERT_EQ(sessions[i].wait_for(300s), std::future_status::ready) << "session " << i << " did not finish";
        expect_clean_count(sessions[i].get(), 50 + i);  // each its own count: sessions are independent
    }
}

TEST(ServerSession, RealDatasetStreamedRawAccountsForAll69Acquisitions) {
    if (!file_exists(kDataset)) GTEST_SKIP() << "dataset absent: " << kDataset;
    const DatasetCopy copy;
    ISMRMRD::Dataset dataset(copy.path().c_str(), "dataset", false);
    std::string xml;
    dataset.readHeader(xml);
    ServerProcess server;
    WireConnection c(server.port());
    c.send(wire::ConfigFile{"counter"});
    c.send(wire::ParameterScript{xml});
    const uint32_t n = dataset.getNumberOfAcquisitions();
    for (uint32_t i = 0; i < n; ++i) {
        ISMRMRD::Acquisition src;
        dataset.readAcquisition(i, src);
        Acquisition a;
        a.head = src.getHead();
        a.traj.assign(src.getTrajPtr(), src.getTrajPtr() + src.getNumberOfTrajElements());
        a.data.assign(src.getDataPtr(), src.getDataPtr() + src.getNumberOfDataElements());
        c.send(a);
    }
    c.send(wire::Close{});
    const auto reply = c.receive_until_close();
    EXPECT_EQ(n, 69u);
    expect_clean_count(reply, 69);
    EXPECT_NE(joined(test::texts_of(reply)).find("(1 noise)"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------------
// larmor-client against the server

class ServerWithClient : public ::testing::Test {
protected:
    void SetUp() override {
        if (!file_exists(test::client_binary())) GTEST_SKIP() << "larmor-client not built: " << test::client_binary();
    }
    std::string out_path(const std::string& stem) {
        return "/tmp/larmor-it-" + stem + "-" + std::to_string(::getpid()) + ".h5";
    }
};

TEST_F(ServerWithClient, Query) {
    ServerProcess server;
    const auto r = test::run_process(
        {test::client_binary(), "-a", "127.0.0.1", "-p", std::to_string(server.port()), "-Q", "gadgetron::version"},
        120s);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("Larmor"), std::string::npos) << r.output;
}

TEST_F(ServerWithClient, RealDatasetThroughCounterChain) {
    if (!file_exists(kDataset)) GTEST_SKIP() << "dataset absent: " << kDataset;
    ServerProcess server;
    const DatasetCopy copy;
    const std::string out = out_path("counter");
    const auto r = test::run_process({test::client_binary(), "-a", "127.0.0.1", "-p", std::to_string(server.port()),
                                      "-f", copy.path(), "-c", "counter", "-o", out},
                                     300s);
    ::unlink(out.c_str());
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(counted_acquisitions(r.output), 69) << r.output;
    EXPECT_EQ(r.output.find("ERROR"), std::string::npos) << r.output;
}

TEST_F(ServerWithClient, RealDatasetGadgetronXmlChainReturnsImages) {
    if (!file_exists(kDataset)) GTEST_SKIP() << "dataset absent: " << kDataset;
    ServerProcess server({"--backend", "cpu"});
    const DatasetCopy copy;
    const std::string out = out_path("default");
    const auto r = test::run_process({test::client_binary(), "-a", "127.0.0.1", "-p", std::to_string(server.port()),
                                      "-f", copy.path(), "-c", "default.xml", "-o", out},
                                     300s);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output.find("ERROR"), std::string::npos) << r.output;
    EXPECT_TRUE(file_exists(out)) << "no images written to " << out << "\n" << r.output;
    ::unlink(out.c_str());
    EXPECT_GT(status_field(query(server.port(), "larmor::status"), "images_sent"), 0);
}

// The CG-SENSE chain end to end on the real R=3 scan, under its Larmor name and as Gadgetron XML:
// an image comes back, and the solver's progress lines reach the client (printed, never counted as
// errors).
TEST_F(ServerWithClient, RealDatasetThroughCgSenseChains) {
    if (!file_exists(kDataset)) GTEST_SKIP() << "dataset absent: " << kDataset;
    ServerProcess server({"--backend", "cpu"});
    const DatasetCopy copy;
    for (const char* chain : {"cg_sense", "cg_sense.xml"}) {
        const std::string out = out_path(std::string("cg-sense-") + chain);
        const auto r = test::run_process({test::client_binary(), "-a", "127.0.0.1", "-p", std::to_string(server.port()),
                                          "-f", copy.path(), "-c", chain, "-o", out},
                                         300s);
        EXPECT_EQ(r.exit_code, 0) << chain << "\n" << r.output;
        EXPECT_EQ(r.output.find("ERROR"), std::string::npos) << chain << "\n" << r.output;
        EXPECT_NE(r.output.find("progress cg_sense: iteration 10/30"), std::string::npos) << chain << "\n" << r.output;
        EXPECT_TRUE(file_exists(out)) << "no images written to " << out << "\n" << r.output;
        ::unlink(out.c_str());
    }
    EXPECT_EQ(status_field(query(server.port(), "larmor::status"), "images_sent"), 2);
}

// GRAPPA through the server with larmor-client: Larmor's chain and Gadgetron's classnames.
TEST_F(ServerWithClient, RealDatasetThroughGrappaChains) {
    if (!file_exists(kDataset)) GTEST_SKIP() << "dataset absent: " << kDataset;
    ServerProcess server({"--backend", "cpu"});
    const DatasetCopy copy;
    for (const char* chain : {"grappa", "Generic_Cartesian_Grappa.xml"}) {
        const std::string out = out_path(std::string("grappa-") + chain);
        const auto r = test::run_process({test::client_binary(), "-a", "127.0.0.1", "-p", std::to_string(server.port()),
                                          "-f", copy.path(), "-c", chain, "-o", out},
                                         300s);
        EXPECT_EQ(r.exit_code, 0) << chain << "\n" << r.output;
        EXPECT_EQ(r.output.find("ERROR"), std::string::npos) << chain << "\n" << r.output;
        EXPECT_TRUE(file_exists(out)) << "no images written to " << out << "\n" << r.output;
        ::unlink(out.c_str());
    }
    EXPECT_EQ(status_field(query(server.port(), "larmor::status"), "images_sent"), 2);
}

// Several clients replaying one scan file at once (ISMRMRD opens inputs read-write, so without the
// client's HDF5 locking opt-out only the first could open it).
TEST_F(ServerWithClient, EightClientsStreamTheSameFileAtOnce) {
    if (!file_exists(kDataset)) GTEST_SKIP() << "dataset absent: " << kDataset;
    ServerProcess server;
    const DatasetCopy copy;  // one file shared by all eight clients
    std::vector<std::future<test::ProcessResult>> runs;
    for (int i = 0; i < 8; ++i) {
        const std::string out = out_path("same-file-" + std::to_string(i));
        runs.push_back(std::async(std::launch::async, [&, out] {
            auto r = test::run_process({test::client_binary(), "-a", "127.0.0.1", "-p", std::to_string(server.port()),
                                        "-f", copy.path(), "-c", "counter", "-o", out},
                                       300s);
            ::unlink(out.c_str());
            return r;
        }));
    }
    for (auto& f : runs) {
        const auto r = f.get();
        EXPECT_EQ(r.exit_code, 0) << r.output;
        EXPECT_EQ(counted_acquisitions(r.output), 69) << r.output;
    }
}

TEST_F(ServerWithClient, UnknownChainIsReportedAndClientExitsCleanly) {
    if (!file_exists(kDataset)) GTEST_SKIP() << "dataset absent: " << kDataset;
    ServerProcess server;
    const DatasetCopy copy;
    const std::string out = out_path("unknown");
    const auto r = test::run_process({test::client_binary(), "-a", "127.0.0.1", "-p", std::to_string(server.port()),
                                      "-f", copy.path(), "-c", "no_such_chain", "-o", out},
                                     300s);
    ::unlink(out.c_str());
    EXPECT_FALSE(r.timed_out) << r.output;
    EXPECT_NE(r.output.find("no_such_chain"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("Broken pipe"), std::string::npos) << "the server must read until CLOSE: " << r.output;
}

// ---------------------------------------------------------------------------------------------------
// Malformed input: one server for the suite (short timeouts); each case runs next to a good
// session, and the server must still serve a new session afterwards.

class ServerMalformed : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        server_ = std::make_unique<ServerProcess>(std::vector<std::string>{"--read-timeout", "3", "--write-timeout", "3"});
    }
    static void TearDownTestSuite() { server_.reset(); }

    void SetUp() override { good_ = std::make_unique<BackgroundSession>(port()); }

    void TearDown() override {
        if (good_) good_->finish_and_check();
        good_.reset();
        ASSERT_TRUE(server_->running()) << "the server died";
        expect_clean_count(counter_session(port(), 3), 3);  // the same process still serves
    }

    static uint16_t port() { return server_->port(); }

    static std::unique_ptr<ServerProcess> server_;
    std::unique_ptr<BackgroundSession> good_;
};

std::unique_ptr<ServerProcess> ServerMalformed::server_;

// Sends the rest of a plausible session after an error, as a real client would (it does not read
// while it sends): the server must keep reading, so none of this may fail with a broken pipe.
void send_rest_of_session(WireConnection& c, uint32_t acquisitions = 300) {
    c.send(wire::ParameterScript{header_xml()});
    for (uint32_t i = 0; i < acquisitions; ++i) c.send(make_acquisition(i));
    c.send(wire::Close{});
}

TEST_F(ServerMalformed, TruncatedMessageTimesOut) {
    WireConnection c(port());
    c.send(wire::ConfigFile{"counter"});
    c.send(wire::ParameterScript{header_xml()});
    const auto bytes = wire::encode(make_acquisition(0));
    c.send_bytes(bytes.data(), 100);  // then silence, connection open
    expect_error_reply(c, {"read timeout after 3 s", "bytes into a message"});
}

TEST_F(ServerMalformed, IdleConnectionTimesOut) {
    WireConnection c(port());
    c.send(wire::ConfigFile{"counter"});  // then nothing at all
    expect_error_reply(c, {"read timeout after 3 s", "between messages"});
}

TEST_F(ServerMalformed, TruncatedMessageAtEndOfStream) {
    WireConnection c(port());
    c.send(wire::ConfigFile{"counter"});
    c.send(wire::ParameterScript{header_xml()});
    const auto bytes = wire::encode(make_acquisition(0));
    c.send_bytes(bytes.data(), 100);
    c.shutdown_send();
    expect_error_reply(c, {"truncated", "ACQUISITION"});
}

TEST_F(ServerMalformed, UnknownMessageId) {
    WireConnection c(port());
    c.send(wire::ConfigFile{"counter"});
    c.send(wire::ParameterScript{header_xml()});
    const uint8_t bogus[] = {0x0f, 0x27, 1, 2, 3, 4};  // id 9999
    c.send_bytes(bogus, sizeof bogus);
    expect_error_reply(c, {"9999"});
}

TEST_F(ServerMalformed, HeaderBeforeConfig) {
    WireConnection c(port());
    send_rest_of_session(c);
    expect_error_reply(c, {"PARAMETER_SCRIPT", "before a chain config"});
}

TEST_F(ServerMalformed, DataBeforeHeader) {
    WireConnection c(port());
    c.send(wire::ConfigFile{"counter"});
    for (uint32_t i = 0; i < 100; ++i) c.send(make_acquisition(i));
    c.send(wire::Close{});
    expect_error_reply(c, {"ACQUISITION(1008)", "before the ISMRMRD header"});
}

TEST_F(ServerMalformed, AbsurdConfigScriptLength) {
    WireConnection c(port());
    const uint8_t msg[] = {2, 0, 0xff, 0xff, 0xff, 0xff, 'x'};  // CONFIG_SCRIPT of 4 GiB - 1
    c.send_bytes(msg, sizeof msg);
    expect_error_reply(c, {"4294967295"});
}

TEST_F(ServerMalformed, AbsurdHeaderLength) {
    WireConnection c(port());
    c.send(wire::ConfigFile{"counter"});
    const uint8_t msg[] = {3, 0, 0x00, 0x00, 0x00, 0xf0};  // PARAMETER_SCRIPT of 0xf0000000 bytes
    c.send_bytes(msg, sizeof msg);
    expect_error_reply(c, {std::to_string(0xf0000000u)});
}

TEST_F(ServerMalformed, AbsurdQueryLength) {
    WireConnection c(port());
    std::vector<uint8_t> msg = {6, 0};
    msg.insert(msg.end(), 16, 0);                                 // reserved, correlation id
    msg.insert(msg.end(), {0, 0, 0, 0, 0, 0, 0, 0x40});          // key length 2^62
    c.send_bytes(msg);
    expect_error_reply(c, {std::to_string(uint64_t{1} << 62)});
}

TEST_F(ServerMalformed, AbsurdChannelCount) {
    WireConnection c(port());
    c.send(wire::ConfigFile{"counter"});
    c.send(wire::ParameterScript{header_xml()});
    auto bytes = wire::encode(make_acquisition(0));
    // active_channels sits at byte 2 (id) + 38 of the AcquisitionHeader.
    const size_t at = 2 + offsetof(ISMRMRD::ISMRMRD_AcquisitionHeader, active_channels);
    bytes[at] = 0x60;
    bytes[at + 1] = 0xea;  // 60000 channels
    c.send_bytes(bytes.data(), 2 + wire::kAcquisitionHeaderBytes);
    expect_error_reply(c, {"60000"});
}

// A ZFP-compressed acquisition (flag 53) in the middle of a large upload: refused, but the upload is
// read to the client's CLOSE before the answer, so the client never writes into a closed socket.
TEST_F(ServerMalformed, UnsupportedCompressionIsDrainedUntilClose) {
    WireConnection c(port());
    c.send(wire::ConfigFile{"counter"});
    c.send(wire::ParameterScript{header_xml()});
    for (uint32_t i = 0; i < 10; ++i) c.send(make_acquisition(i));
    Acquisition zfp = make_acquisition(10);
    zfp.head.flags |= uint64_t{1} << 52;  // flag 53
    std::vector<uint8_t> bytes = wire::encode(make_acquisition(10));
    bytes.resize(2 + wire::kAcquisitionHeaderBytes);
    std::memcpy(bytes.data() + 2, &zfp.head, wire::kAcquisitionHeaderBytes);
    const uint32_t n = 3000;  // u32 length + bytes, as the client frames compressed data
    bytes.insert(bytes.end(), reinterpret_cast<const uint8_t*>(&n), reinterpret_cast<const uint8_t*>(&n) + 4);
    bytes.insert(bytes.end(), n, 0x5a);
    c.send_bytes(bytes);
    // 64 MiB more after the refusal: more than socket buffers and the server's post-CLOSE linger hold.
    Acquisition big = make_acquisition(11);
    big.head.number_of_samples = 4096;
    big.head.active_channels = 32;
    big.data.assign(size_t{4096} * 32, {1.0f, 2.0f});
    const auto big_bytes = wire::encode(big);
    for (int i = 0; i < 64; ++i) c.send_bytes(big_bytes);
    c.send(wire::Close{});
    expect_error_reply(c, {"ZFP-compressed data (flag 53) is not supported", "scan_counter 10", "3000"});
}

TEST_F(ServerMalformed, ConfigNameWithDotDot) {
    WireConnection c(port());
    c.send(wire::ConfigFile{"../etc/passwd"});
    send_rest_of_session(c);
    expect_error_reply(c, {"../etc/passwd"});
}

TEST_F(ServerMalformed, ConfigNameWithSlash) {
    WireConnection c(port());
    c.send(wire::ConfigFile{"a/b"});
    send_rest_of_session(c);
    expect_error_reply(c, {"'a/b'"});
}

TEST_F(ServerMalformed, UnknownChainNameListsAvailableChains) {
    WireConnection c(port());
    c.send(wire::ConfigFile{"no_such_chain"});
    send_rest_of_session(c);
    expect_error_reply(c, {"no_such_chain", "counter"});
}

TEST_F(ServerMalformed, BadChainScript) {
    WireConnection c(port());
    c.send(wire::ConfigScript{"gadget { no_such_gadget {} }"});
    send_rest_of_session(c);
    expect_error_reply(c, {"no_such_gadget"});
}

TEST_F(ServerMalformed, GarbageXmlHeader) {
    WireConnection c(port());
    c.send(wire::ConfigFile{"counter"});
    c.send(wire::ParameterScript{"<ismrmrdHeader><encoding>this is not closed"});
    for (uint32_t i = 0; i < 100; ++i) c.send(make_acquisition(i));
    c.send(wire::Close{});
    expect_error_reply(c, {"not well-formed XML", "at byte"});
}

TEST_F(ServerMalformed, WrongXmlRoot) {
    WireConnection c(port());
    c.send(wire::ConfigFile{"counter"});
    c.send(wire::ParameterScript{"<notAHeader/>"});
    c.send(wire::Close{});
    expect_error_reply(c, {"notAHeader"});
}

TEST_F(ServerMalformed, SecondConfig) {
    WireConnection c(port());
    c.send(wire::ConfigFile{"counter"});
    c.send(wire::ConfigFile{"passthrough"});
    send_rest_of_session(c);
    expect_error_reply(c, {"second chain config", "CONFIG_FILE"});
}

TEST_F(ServerMalformed, ServerToClientMessageFromClient) {
    WireConnection c(port());
    c.send(wire::ConfigFile{"counter"});
    c.send(Text{"hello"});
    c.send(wire::Close{});
    expect_error_reply(c, {"TEXT(5)"});
}

TEST_F(ServerMalformed, GadgetFailureIsReportedAfterTheClientsClose) {
    WireConnection c(port());
    c.send(wire::ConfigScript{"gadget { accumulate_trigger {} }"});
    c.send(wire::ParameterScript{header_xml()});
    Acquisition bad = make_acquisition(1);
    bad.head.idx.kspace_encode_step_1 = 999;  // outside the header's encoding limits
    c.send(bad);
    for (uint32_t i = 0; i < 200; ++i) c.send(make_acquisition(i));  // still read, then dropped
    c.send(wire::Close{});
    expect_error_reply(c, {"999"});
}

TEST_F(ServerMalformed, ChainRequiringCudaWithoutDevice) {
    const bool has_cuda = query(port(), "gadgetron::cuda::devices") != "0";  // the device count, as Gadgetron
    WireConnection c(port());
    c.send(wire::ConfigScript{"name: \"gpu_only\" backend: BACKEND_CUDA gadget { acquisition_counter {} }"});
    c.send(wire::ParameterScript{header_xml()});
    c.send(make_acquisition(0));
    c.send(wire::Close{});
    if (has_cuda) {
        expect_clean_count(c.receive_until_close(), 1);
    } else {
        expect_error_reply(c, {"gpu_only", "cuda"});
    }
}

TEST_F(ServerMalformed, ClientVanishesMidStream) {
    {
        WireConnection c(port());
        c.send(wire::ConfigFile{"counter"});
        c.send(wire::ParameterScript{header_xml()});
        for (uint32_t i = 0; i < 10; ++i) c.send(make_acquisition(i));
        const auto bytes = wire::encode(make_acquisition(10));
        c.send_bytes(bytes.data(), bytes.size() / 2);
    }  // closed without CLOSE, mid-message
    // TearDown checks the server and the concurrent session.
}

TEST_F(ServerMalformed, ClientThatNeverReads) {
    // Echo large images through pass_through without ever reading: the server's writes stall, its
    // write timeout ends the session, and nothing else is affected.
    WireConnection c(port(), 120s);
    c.send(wire::ConfigScript{"gadget { pass_through {} }"});
    c.send(wire::ParameterScript{header_xml()});
    Image big = make_image(0);
    big.head.matrix_size[0] = 512;
    big.head.matrix_size[1] = 512;
    big.pixels.assign(512 * 512 * sizeof(float), 1);
    bool send_failed = false;
    try {
        for (int i = 0; i < 400; ++i) c.send(big);  // 400 MiB: far beyond any socket buffer
    } catch (const std::exception&) {
        send_failed = true;  // the server gave up on us and closed: expected
    }
    EXPECT_TRUE(send_failed) << "the server kept accepting data it could not return";
}

// ---------------------------------------------------------------------------------------------------
// Limits and lifecycle

TEST(ServerLimits, ConnectionsOverMaxSessionsAreTurnedAway) {
    ServerProcess server({"--max-sessions", "2"});
    WireConnection a(server.port()), b(server.port());
    a.send(wire::ConfigFile{"counter"});
    b.send(wire::ConfigFile{"counter"});
    // a and b are being served once a query on each has been answered.
    a.send(wire::Query{0, 1, "gadgetron::version"});
    b.send(wire::Query{0, 1, "gadgetron::version"});
    ASSERT_TRUE(std::holds_alternative<wire::Response>(a.receive()));
    ASSERT_TRUE(std::holds_alternative<wire::Response>(b.receive()));
    {
        WireConnection c(server.port());
        c.send(wire::ConfigFile{"counter"});
        expect_error_reply(c, {"--max-sessions 2"});
    }
    for (WireConnection* s : {&a, &b}) {
        s->send(wire::ParameterScript{header_xml()});
        s->send(make_acquisition(0));
        s->send(wire::Close{});
        expect_clean_count(s->receive_until_close(), 1);
    }
    // a and b give their slots back as they end; until then a new connection may still be turned
    // away, so ask until one is served (bounded, no timing assumption).
    std::optional<std::string> status;
    for (int attempt = 0; attempt < 300 && !status; ++attempt) {
        status = try_query(server.port(), "larmor::status");
        if (!status) std::this_thread::sleep_for(100ms);
    }
    ASSERT_TRUE(status) << "the server never accepted a session again";
    EXPECT_GE(status_field(*status, "sessions_rejected"), 1) << *status;
}

TEST(ServerLifecycle, SigtermEndsSessionsAndExitsZero) {
    ServerProcess server({"--shutdown-grace", "1"});
    WireConnection c(server.port());
    c.send(wire::ConfigFile{"counter"});
    c.send(wire::ParameterScript{header_xml()});
    c.send(make_acquisition(0));
    c.send(wire::Query{0, 1, "gadgetron::version"});
    ASSERT_TRUE(std::holds_alternative<wire::Response>(c.receive()));  // the session is running
    auto stopped = std::async(std::launch::async, [&server] { return server.stop(SIGTERM, std::chrono::seconds(60)); });
    expect_error_reply(c, {"shutting down"});
    ASSERT_EQ(stopped.wait_for(90s), std::future_status::ready);
    EXPECT_EQ(stopped.get(), 0);
}

// A connection that has sent nothing does not hold the shutdown for the grace period (60 s here).
TEST(ServerLifecycle, SigtermDoesNotWaitForSilentConnections) {
    ServerProcess server({"--shutdown-grace", "60"});
    WireConnection silent(server.port());
    WireConnection half(server.port());
    half.send_bytes(std::vector<uint8_t>{1, 0});  // two bytes of a message id: not a whole message
    std::this_thread::sleep_for(300ms);  // both accepted
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(server.stop(SIGTERM, std::chrono::seconds(60)), 0);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
    EXPECT_NE(server.log().find("ended 2 connection(s) that had sent nothing"), std::string::npos) << server.log();
}

// A burst of connections over --max-sessions is logged in a throttled few lines, every one still
// counted and answered.
TEST(ServerLifecycle, ABurstOverTheSessionLimitIsLoggedInAFewLines) {
    ServerProcess server({"--max-sessions", "1"});
    WireConnection holder(server.port());
    holder.send(wire::ConfigFile{"counter"});
    holder.send(wire::Query{0, 1, "gadgetron::version"});
    ASSERT_TRUE(std::holds_alternative<wire::Response>(holder.receive()));
    constexpr int kBurst = 60;
    for (int i = 0; i < kBurst; ++i) {
        WireConnection c(server.port(), 30s);
        c.send(wire::ConfigFile{"counter"});  // a slot is asked for with the chain config
        expect_error_reply(c, {"session limit"});
    }
    const std::string log = server.log();
    size_t lines = 0;
    for (size_t at = 0; (at = log.find("turning away", at)) != std::string::npos; ++at) ++lines;
    EXPECT_LE(lines, 21u) << log;
    EXPECT_GE(lines, 1u);
}

TEST(ServerLifecycle, SigtermLetsARunningSessionFinish) {
    ServerProcess server({"--shutdown-grace", "60"});
    WireConnection c(server.port());
    c.send(wire::ConfigFile{"counter"});
    c.send(wire::ParameterScript{header_xml()});
    c.send(wire::Query{0, 1, "gadgetron::version"});
    ASSERT_TRUE(std::holds_alternative<wire::Response>(c.receive()));
    ::kill(server.pid(), SIGTERM);
    // New connections are refused once the server stopped accepting; this one goes on.
    for (uint32_t i = 0; i < 20; ++i) c.send(make_acquisition(i));
    c.send(wire::Close{});
    expect_clean_count(c.receive_until_close(), 20);
    EXPECT_EQ(server.stop(SIGTERM, std::chrono::seconds(60)), 0);
}

}  // namespace
}  // namespace larmor
