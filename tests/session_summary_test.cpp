// No data lost: every session ends with a summary of what became of its acquisitions (received =
// used + discarded, and why), and the checks at the door (server/acquisition_checks.h) refuse or
// count what a gadget must not see. The expected counts are computed here from the files' own flags.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <thread>
#include <string>
#include <vector>

#include <ismrmrd/ismrmrd.h>

#include "tests/support/ismrmrd_files.h"
#include "tests/support/server_process.h"
#include "wire/codec.h"

namespace larmor {
namespace {

using namespace std::chrono_literals;
using test::ScanFile;
using test::ServerProcess;
using test::WireConnection;
using wire::WireMessage;

const std::string kDataset = LARMOR_SHARED_DATA_DIR "/gadgetron-grappa-r3/meas_MID00349_FID09273_SNR_R3.h5";

bool has_flag(const ISMRMRD::Acquisition& a, int flag) { return (a.getHead().flags >> (flag - 1)) & 1; }

using test::to_wire;

struct Reply {
    std::vector<std::string> texts;
    size_t images = 0;
    bool all_finite = true;  // every float pixel of every image
    std::string summary() const {
        for (const auto& t : texts)
            if (t.rfind("[Summary] ", 0) == 0) return t;
        return "";
    }
    std::string errors() const {
        std::string out;
        for (const auto& t : texts)
            if (t.find("ERROR") != std::string::npos) out += t;
        return out;
    }
};

Reply session(uint16_t port, const std::string& chain, const std::string& xml,
              const std::vector<wire::Acquisition>& acquisitions) {
    WireConnection c(port);
    c.send(wire::ConfigFile{chain});
    c.send(wire::ParameterScript{xml});
    for (const auto& a : acquisitions) c.send(a);
    c.send(wire::Close{});
    Reply r;
    for (const auto& m : c.receive_until_close()) {
        if (const auto* t = std::get_if<wire::Text>(&m)) r.texts.push_back(t->text);
        if (const auto* im = std::get_if<wire::Image>(&m)) {
            ++r.images;
            if (im->head.data_type == ISMRMRD::ISMRMRD_FLOAT)
                for (size_t i = 0; i + 4 <= im->pixels.size(); i += 4) {
                    float v;
                    std::memcpy(&v, im->pixels.data() + i, 4);
                    r.all_finite &= std::isfinite(v);
                }
        }
    }
    return r;
}

std::vector<wire::Acquisition> wire_acquisitions(const ScanFile& scan) {
    std::vector<wire::Acquisition> out;
    for (const auto& a : scan.acquisitions) out.push_back(to_wire(a));
    return out;
}

// What the cartesian chain (noise_adjust, accumulate_trigger without calibration output) must say
// about `scan`, from its flags: noise scans feed the whitener, calibration-only lines are not used
// by this chain, everything else is imaging.
std::string expected_cartesian_summary(const ScanFile& scan, uint64_t extra_discards = 0,
                                       const std::string& extra = "") {
    uint64_t noise = 0, calibration_only = 0, imaging = 0;
    uint32_t first_calibration = 0;
    for (const auto& a : scan.acquisitions) {
        if (has_flag(a, ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT)) {
            ++noise;
        } else if (has_flag(a, ISMRMRD::ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION)) {
            if (calibration_only++ == 0) first_calibration = a.getHead().scan_counter;
        } else {
            ++imaging;
        }
    }
    imaging -= extra_discards;
    const uint64_t n = scan.acquisitions.size();
    std::string used;
    if (imaging) used += std::to_string(imaging) + " imaging";
    if (noise) used += (used.empty() ? "" : ", ") + std::to_string(noise) + " noise (prewhitening)";
    std::string s = "[Summary] " + std::to_string(n) + " acquisitions received: " + std::to_string(imaging + noise) +
                    " used (" + used + "); " + std::to_string(imaging) + " reached an image; " +
                    std::to_string(calibration_only + extra_discards) + " discarded";
    std::string reasons = extra;
    if (calibration_only)
        reasons += (reasons.empty() ? "" : "; ") + std::to_string(calibration_only) +
                   " calibration-only lines (the chain does not use them: emit_calibration is off) (first "
                   "scan_counter " +
                   std::to_string(first_calibration) + ")";
    if (!reasons.empty()) s += ": " + reasons;
    return s + "\n";
}

class SessionSummary : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        path_ = "/tmp/larmor-summary-" + std::to_string(::getpid()) + ".h5";
        // 3 slices x 2 repetitions, R=2 with 8 embedded ACS lines and a noise scan: every kind of
        // readout the cartesian chain treats differently.
        const auto r = test::run_process({std::string(LARMOR_BINARY_DIR) + "/tools/larmor-phantom", "-o", path_,
                                          "--matrix", "32", "--coils", "4", "--slices", "3", "--repetitions", "2",
                                          "--accel", "2", "--acs", "8", "--noise-scan", "--snr", "50"},
                                         120s);
        ASSERT_EQ(r.exit_code, 0) << r.output;
        scan_ = test::read_scan(path_);
    }
    static void TearDownTestSuite() { ::unlink(path_.c_str()); }

    static inline std::string path_;
    static inline ScanFile scan_;
};

TEST_F(SessionSummary, MultiSliceMultiRepetitionPhantomAccountsForEveryAcquisition) {
    ServerProcess server({"--backend", "cpu"});
    const Reply r = session(server.port(), "cartesian", scan_.xml, wire_acquisitions(scan_));
    EXPECT_EQ(r.errors(), "");
    EXPECT_EQ(r.images, 6u) << "3 slices x 2 repetitions";
    std::printf("%s", r.summary().c_str());
    EXPECT_EQ(r.summary(), expected_cartesian_summary(scan_));
    EXPECT_NE(server.log().find(r.summary().substr(0, r.summary().size() - 1)), std::string::npos)
        << "the summary is logged too";
}

TEST_F(SessionSummary, RealDatasetAccountsForEveryAcquisition) {
    struct stat st{};
    if (::stat(kDataset.c_str(), &st) != 0) GTEST_SKIP() << "dataset absent: " << kDataset;
    const ScanFile scan = test::read_scan(kDataset);
    ServerProcess server({"--backend", "cpu"});
    const Reply r = session(server.port(), "cartesian", scan.xml, wire_acquisitions(scan));
    EXPECT_EQ(r.errors(), "");
    EXPECT_GE(r.images, 1u);
    std::printf("%s", r.summary().c_str());
    EXPECT_EQ(r.summary(), expected_cartesian_summary(scan));
}

TEST_F(SessionSummary, NonFiniteSamplesAreKeptOutAndCounted) {
    ServerProcess server({"--backend", "cpu"});
    std::vector<wire::Acquisition> acqs = wire_acquisitions(scan_);
    // Two imaging readouts of the first slice, one with a NaN and one with an infinity.
    std::vector<uint32_t> broken;
    for (auto& a : acqs) {
        if (a.flag(ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT) || a.flag(ISMRMRD::ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION))
            continue;
        a.data[broken.size() * 7] = broken.empty() ? std::complex<float>(std::nanf(""), 0.f)
                                                   : std::complex<float>(0.f, std::numeric_limits<float>::infinity());
        broken.push_back(uint32_t{a.head.scan_counter});  // a copy: the header is packed
        if (broken.size() == 2) break;
    }
    const Reply r = session(server.port(), "cartesian", scan_.xml, acqs);
    EXPECT_EQ(r.errors(), "");
    EXPECT_EQ(r.images, 6u);
    EXPECT_TRUE(r.all_finite) << "a NaN sample must not reach the image";
    EXPECT_EQ(r.summary(), expected_cartesian_summary(scan_, 2,
                                                      "2 acquisitions with NaN or infinite samples (kept out of the "
                                                      "images) (first scan_counter " +
                                                          std::to_string(broken[0]) + ")"));
}

TEST_F(SessionSummary, ContradictoryChannelCountsAreRefusedAtTheDoor) {
    ServerProcess server({"--backend", "cpu"});
    std::vector<wire::Acquisition> acqs = wire_acquisitions(scan_);
    wire::Acquisition& bad = acqs[acqs.size() / 2];
    bad.head.available_channels = 2;  // 4 active
    const Reply r = session(server.port(), "cartesian", scan_.xml, acqs);
    EXPECT_NE(r.errors().find("[Acquisition] ERROR: ACQUISITION (scan_counter " + std::to_string(bad.head.scan_counter) +
                              ", 64 samples x 4 channels): active_channels 4 exceeds available_channels 2"),
              std::string::npos)
        << r.errors();
    EXPECT_EQ(r.images, 0u) << "no partial result after an error";
    EXPECT_NE(r.summary().find("1 refused: contradictory header fields (see the error)"), std::string::npos) << r.summary();
    EXPECT_NE(r.summary().find("received after the session's error (not reconstructed)"), std::string::npos)
        << r.summary();
}

TEST_F(SessionSummary, RadialHeaderOnACartesianChainIsRefused) {
    ServerProcess server({"--backend", "cpu"});
    std::string xml = scan_.xml;
    const size_t at = xml.find("<trajectory>cartesian</trajectory>");
    ASSERT_NE(at, std::string::npos) << xml;
    xml.replace(at, std::strlen("<trajectory>cartesian</trajectory>"), "<trajectory>radial</trajectory>");
    const Reply r = session(server.port(), "cartesian", xml, wire_acquisitions(scan_));
    EXPECT_NE(r.errors().find("[Header] ERROR: encoding 0 has trajectory 'radial', but chain 'cartesian' reconstructs "
                              "Cartesian data only"),
              std::string::npos)
        << r.errors();
    // A chain that does not place readouts (it only counts) takes the same stream.
    const Reply counted = session(server.port(), "counter", xml, wire_acquisitions(scan_));
    EXPECT_EQ(counted.errors(), "");
}

TEST_F(SessionSummary, TrajectoriesOnAChainThatIgnoresThemAreReported) {
    ServerProcess server({"--backend", "cpu"});
    std::vector<wire::Acquisition> acqs = wire_acquisitions(scan_);
    uint64_t with_traj = 0;
    for (auto& a : acqs)
        if (!a.flag(ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT)) {
            a.head.trajectory_dimensions = 2;
            a.traj.assign(size_t{a.head.number_of_samples} * 2, 0.25f);
            ++with_traj;
        }
    const Reply r = session(server.port(), "cartesian", scan_.xml, acqs);
    EXPECT_EQ(r.errors(), "");
    EXPECT_NE(r.summary().find("; " + std::to_string(with_traj) +
                               " carried trajectories that chain 'cartesian' does not use"),
              std::string::npos)
        << r.summary();
}

// A client that sends its data and CLOSE but never reads the images back: the server's write
// timeout ends the session, which counts as an error in its log (it used to say "0 errors").
TEST_F(SessionSummary, AClientThatStopsReadingIsAnErrorInTheSessionLog) {
    ServerProcess server({"--backend", "cpu", "--write-timeout", "1"});
    WireConnection c(server.port());
    c.send(wire::ConfigScript{"gadget { pass_through {} }"});
    c.send(wire::ParameterScript{scan_.xml});
    wire::Image big;
    big.head.version = 1;
    big.head.data_type = ISMRMRD::ISMRMRD_FLOAT;
    big.head.matrix_size[0] = 512;
    big.head.matrix_size[1] = 512;
    big.head.matrix_size[2] = 1;
    big.head.channels = 1;
    big.pixels.assign(512 * 512 * sizeof(float), 1);
    try {
        for (int i = 0; i < 64; ++i) c.send(big);  // 64 MiB echoed back, far beyond the socket buffers
        c.send(wire::Close{});
    } catch (const std::exception&) {
        // the server gave up on us first: also what this test is about
    }
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (server.log().find("session ended") == std::string::npos && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(50ms);
    const std::string log = server.log();
    EXPECT_NE(log.find("[Socket] ERROR"), std::string::npos) << log;
    EXPECT_EQ(log.find(" 0 errors"), std::string::npos) << log;
}

}  // namespace
}  // namespace larmor
