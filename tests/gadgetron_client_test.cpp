// The real gadgetron_ismrmrd_client, HEAD and v4.1, built from ../shared/tools/gadgetron-client,
// against larmor-server: the real scan with its Noise measurementDependency through every shipped
// chain, with and without a noise-scan session first; NHLBI-compressed uploads (-P, -T); and the info
// query as Gadgetron's integration-test runner reads it. Exit 0 of the HEAD client is a strict check
// of a clean session (it aborts on any unexpected message id). Skips when ../shared is absent.
//
// The 300 MB uploads (-P 16, -T 0.01) take about 10 s on two cores but need 0.7 GB of /tmp:
// LARMOR_LARGE_UPLOAD_TESTS=0 skips them.
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cmath>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/gadgetron_client.h"
#include "tests/support/ismrmrd_files.h"
#include "tests/support/server_process.h"

namespace larmor {
namespace {

using test::ProcessResult;
using test::ServerProcess;
using namespace std::chrono_literals;

const std::string kDataset = LARMOR_SHARED_DATA_DIR "/gadgetron-grappa-r3/meas_MID00349_FID09273_SNR_R3.h5";
// The scan's Noise measurementDependency (its header.xml).
const std::string kNoiseId = "45387_1079885_1079904_343";
const std::vector<std::string> kChains = {"cartesian", "cartesian-rss", "default.xml",
                                          "cg_sense",  "cg_sense.xml",  "grappa",
                                          "Generic_Cartesian_Grappa.xml", "counter", "passthrough"};
const std::string kGroup = "larmor";  // -G: the output group

bool exists(const std::string& p) {
    std::error_code ec;
    return std::filesystem::exists(p, ec);
}

bool reconstructs(const std::string& chain) { return chain != "counter" && chain != "passthrough"; }
bool prewhitens(const std::string& chain) { return reconstructs(chain); }

// A file under /tmp unique to this process, removed with the object.
class TempFile {
public:
    explicit TempFile(const std::string& stem) {
        static std::atomic<int> n{0};
        path_ = "/tmp/larmor-gt-" + stem + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".h5";
    }
    ~TempFile() { std::filesystem::remove(path_); }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// One client run against `server` (address and port added), logged with its exit status and time.
ProcessResult run_client(const std::string& client, const ServerProcess& server, std::vector<std::string> args) {
    args.insert(args.begin(), {"-a", "127.0.0.1", "-p", std::to_string(server.port())});
    const auto t0 = std::chrono::steady_clock::now();
    const test::ClientRun r = test::run_gadgetron_client(client, args);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string shown;
    for (size_t i = 4; i < args.size(); ++i) shown += " " + std::filesystem::path(args[i]).filename().string();
    std::cout << "    " << std::filesystem::path(client).filename().string() << shown << ": exit " << r.exit_code
              << " in " << s << " s";
    if (!r.raced.empty()) std::cout << " (" << r.raced.size() << " run(s) lost to the client's connect race first)";
    std::cout << std::endl;
    return r;
}

class GadgetronClient : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        if (!test::gadgetron_client_available()) return;
        try {
            clients_ = test::build_gadgetron_clients();
        } catch (const std::exception& e) {
            build_error_ = e.what();
        }
    }
    void SetUp() override {
        if (!test::gadgetron_client_available())
            GTEST_SKIP() << "Gadgetron client sources absent: " << test::gadgetron_client_dir();
        ASSERT_TRUE(clients_) << build_error_;
    }

    static inline std::optional<test::GadgetronClients> clients_;
    static inline std::string build_error_;
};

// ---------------------------------------------------------------------------------------------------
// Queries

// Gadgetron's test/integration/run_tests.py reads `-q -Q gadgetron::info` with, for each marker, the
// first match of <marker>(?:\s*):(?:\s+)(?P<value>.*)? (case-insensitive; `.` stops at the line's
// end), failing when one is missing; "System Memory size" is then read as (?P<value>\d+)(?: MB)?,
// "CUDA Support" compared with YES/yes/True/true/1, and every "Total amount of global GPU memory"
// value collected. The same search, spelled out (std::regex trips GCC 12 warnings under ASan).
std::optional<std::string> runner_value(const std::string& info, const std::string& marker) {
    auto lower = [](std::string s) {
        for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return s;
    };
    const std::string text = lower(info), key = lower(marker);
    auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) {
        size_t i = at + key.size();
        while (i < text.size() && space(text[i])) ++i;
        if (i >= text.size() || text[i] != ':') continue;
        ++i;
        if (i >= text.size() || !space(text[i])) continue;
        while (i < text.size() && space(text[i])) ++i;  // \s+ is greedy, across lines too
        const size_t end = info.find('\n', i);
        return info.substr(i, end == std::string::npos ? std::string::npos : end - i);
    }
    return std::nullopt;
}

// The first run of digits, as (?P<value>\d+)(?: MB)? finds it; -1 without one.
long first_number(const std::string& s) {
    const size_t from = s.find_first_of("0123456789");
    if (from == std::string::npos) return -1;
    return std::stol(s.substr(from, s.find_first_not_of("0123456789", from) - from));
}

void expect_info_parses(const std::string& client, const ServerProcess& server) {
    const ProcessResult r = run_client(client, server, {"-q", "-Q", "gadgetron::info"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const char* marker : {"Version", "Git SHA1", "System Memory size", "Python Support", "Julia Support",
                               "Matlab Support", "CUDA Support"})
        EXPECT_TRUE(runner_value(r.output, marker)) << marker << " missing in:\n" << r.output;
    const std::string memory = runner_value(r.output, "System Memory size").value_or("");
    EXPECT_GT(first_number(memory), 0) << memory;
    EXPECT_NE(memory.find(" MB"), std::string::npos) << memory;
    const std::string cuda = runner_value(r.output, "CUDA Support").value_or("");
    EXPECT_TRUE(cuda == "YES" || cuda == "NO") << cuda;
    EXPECT_NE(runner_value(r.output, "Version").value_or("").find(LARMOR_VERSION), std::string::npos) << r.output;

    const ProcessResult devices = run_client(client, server, {"-q", "-Q", "gadgetron::cuda::devices"});
    ASSERT_EQ(devices.exit_code, 0) << devices.output;
    // The count alone on its line, as Gadgetron's std::to_string(device count).
    const std::string count = devices.output.substr(0, devices.output.find('\n'));
    ASSERT_FALSE(count.empty()) << devices.output;
    EXPECT_EQ(count.find_first_not_of("0123456789"), std::string::npos) << devices.output;
    // One "Device N:" line per device, as many as the count says.
    size_t lines = 0;
    for (size_t at = r.output.find("- Device "); at != std::string::npos; at = r.output.find("- Device ", at + 1)) ++lines;
    EXPECT_EQ(std::to_string(lines), count) << r.output;
    if (cuda == "NO") {
        EXPECT_EQ(count, "0");
    }
}

TEST_F(GadgetronClient, InfoQueryParsesAsGadgetronsTestRunner) {
    ServerProcess server;
    expect_info_parses(clients_->head, server);
    expect_info_parses(clients_->v41, server);
}

// ---------------------------------------------------------------------------------------------------
// The real scan through every shipped chain

struct ChainRun {
    ProcessResult result;
    std::vector<test::FileImage> images;
};

// The scan (its noise scan included) through `chain`, on a fresh server; first, when `noise_session`,
// the noise scan alone as the measurement the scan names as its Noise dependency.
ChainRun run_real_scan(const std::string& client, const std::string& chain, bool noise_session, bool head) {
    ServerProcess server({"--backend", "cpu"});
    TempFile scan("scan"), noise("noise"), out("out");
    std::filesystem::copy_file(kDataset, scan.path());  // ISMRMRD opens inputs read-write
    if (noise_session) {
        test::ScanFile n = test::noise_part(test::read_scan(scan.path()));
        n.xml = test::with_measurement(n.xml, kNoiseId, "");
        test::write_scan(noise.path(), n);
        TempFile noise_out("noise-out");
        const auto r = run_client(client, server,
                                            {"-f", noise.path(), "-c", chain, "-o", noise_out.path(), "-G", kGroup});
        EXPECT_EQ(r.exit_code, 0) << chain << " noise session\n" << r.output;
        EXPECT_EQ(r.output.find("ERROR"), std::string::npos) << r.output;
    }
    ChainRun run;
    run.result = run_client(client, server, {"-f", scan.path(), "-c", chain, "-o", out.path(), "-G", kGroup});
    const ProcessResult& r = run.result;
    EXPECT_EQ(r.exit_code, 0) << chain << "\n" << r.output << "\n" << server.log();
    EXPECT_EQ(r.output.find("ERROR"), std::string::npos) << chain << "\n" << r.output;
    EXPECT_NE(r.output.find("Querying the Gadgetron instance for the dependent measurement: " + kNoiseId),
              std::string::npos)
        << r.output;
    const bool found = noise_session && prewhitens(chain);
    // HEAD prints the summary it got; both print the warning when the answer was "failed".
    if (found && head) {
        EXPECT_NE(r.output.find("Noise level: Min sigma = "), std::string::npos) << chain << "\n" << r.output;
    }
    if (!found) {
        EXPECT_NE(r.output.find("Dependent noise measurement not found"), std::string::npos) << chain << "\n" << r.output;
    }
    if (prewhitens(chain)) {
        const std::string used = found ? "loaded noise dependency '" + kNoiseId + "'" : "using the 384 noise samples";
        EXPECT_NE(server.log().find(used), std::string::npos) << chain << ": expected '" << used << "'\n" << server.log();
    }
    if (reconstructs(chain)) {
        EXPECT_TRUE(exists(out.path())) << chain << ": no images written\n" << r.output;
        if (exists(out.path())) run.images = test::read_images(out.path(), kGroup);
        EXPECT_EQ(run.images.size(), 1u) << chain;
    }
    if (chain == "counter") {
        EXPECT_NE(r.output.find("AcquisitionCounter: 69"), std::string::npos) << r.output;
    }
    return run;
}

void every_chain(const std::string& client, bool head) {
    if (!exists(kDataset)) GTEST_SKIP() << "dataset absent: " << kDataset;
    for (const std::string& chain : kChains) {
        SCOPED_TRACE(chain);
        const ChainRun without = run_real_scan(client, chain, false, head);
        const ChainRun with = run_real_scan(client, chain, true, head);
        // The noise session measured the scan's own noise scan: the stored covariance is the one the
        // scan gives in-stream, so the images agree to float rounding. (CG-SENSE carries the run-to-run
        // rounding of threaded FFTs and reductions through 30 iterations, GRAPPA through its calibration's
        // Gram matrix and Cholesky solve: a few 1e-6.)
        const bool calibrated = chain.rfind("cg_sense", 0) == 0 || chain.find("rappa") != std::string::npos;
        const double tolerance = calibrated ? 1e-4 : 1e-6;
        if (!without.images.empty() && !with.images.empty()) {
            EXPECT_LE(test::nrmse(without.images[0].values, with.images[0].values), tolerance) << chain;
        }
    }
}

TEST_F(GadgetronClient, HeadRealScanEveryChainWithAndWithoutNoiseSession) { every_chain(clients_->head, true); }

TEST_F(GadgetronClient, V41RealScanEveryChainWithAndWithoutNoiseSession) { every_chain(clients_->v41, false); }

// ---------------------------------------------------------------------------------------------------
// Compressed uploads

struct Phantom {
    TempFile scan{"phantom"}, noise{"phantom-noise"};
};

// larmor-phantom with a noise scan; the scan file names "PH_NOISE" as its Noise dependency (minus its
// noise scan), the noise file is that measurement.
void make_phantom(Phantom& p, const std::vector<std::string>& args) {
    TempFile raw("phantom-raw");
    std::vector<std::string> argv = {std::string(LARMOR_BINARY_DIR) + "/tools/larmor-phantom", "-o", raw.path(),
                                     "--noise-scan"};
    argv.insert(argv.end(), args.begin(), args.end());
    const ProcessResult r = test::run_process(argv, 1800s);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const test::ScanFile all = test::read_scan(raw.path());
    test::ScanFile imaging = test::imaging_part(all), noise = test::noise_part(all);
    imaging.xml = test::with_measurement(all.xml, "PH_IMAGING", "PH_NOISE");
    noise.xml = test::with_measurement(all.xml, "PH_NOISE", "");
    test::write_scan(p.scan.path(), imaging);
    test::write_scan(p.noise.path(), noise);
}

std::vector<test::FileImage> upload(const std::string& client, const ServerProcess& server, const std::string& file,
                                    const std::vector<std::string>& compression) {
    TempFile out("upload");
    std::vector<std::string> args = {"-f", file, "-c", "cartesian-rss", "-o", out.path(), "-G", kGroup};
    args.insert(args.end(), compression.begin(), compression.end());
    const ProcessResult r = run_client(client, server, args);
    EXPECT_EQ(r.exit_code, 0) << r.output << "\n" << server.log();
    EXPECT_EQ(r.output.find("ERROR"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("Broken pipe"), std::string::npos) << r.output;
    if (!compression.empty()) {
        EXPECT_NE(r.output.find("Compression ratio: "), std::string::npos) << r.output;
    }
    return exists(out.path()) ? test::read_images(out.path(), kGroup) : std::vector<test::FileImage>{};
}

double worst_nrmse(const std::vector<test::FileImage>& ref, const std::vector<test::FileImage>& x) {
    if (ref.size() != x.size() || ref.empty()) return INFINITY;
    double worst = 0;
    for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, test::nrmse(ref[i].values, x[i].values));
    return worst;
}

void compressed_uploads(const std::string& client) {
    Phantom p;
    make_phantom(p, {"--matrix", "128", "--coils", "8", "--oversampling", "2", "--snr", "30", "--repetitions", "2"});
    ServerProcess server({"--backend", "cpu"});
    const auto plain_unwhitened = upload(client, server, p.scan.path(), {});  // the dependency is not there yet
    const auto precision_unwhitened = upload(client, server, p.scan.path(), {"-P", "16"});
    ASSERT_EQ(plain_unwhitened.size(), 2u);
    EXPECT_LT(worst_nrmse(plain_unwhitened, precision_unwhitened), 1e-3);
    // -T without noise statistics: the client assumes sigma = 1 (its tolerance is then absolute). The
    // session must still complete; the image is as coarse as that tolerance makes it.
    EXPECT_EQ(upload(client, server, p.scan.path(), {"-T", "0.01"}).size(), 2u);

    // With the noise measurement stored, -T is relative to the noise level the pre-query reports.
    TempFile noise_out("noise-out");
    const ProcessResult n = run_client(client, server, {"-f", p.noise.path(), "-c", "cartesian-rss", "-o",
                                                                  noise_out.path(), "-G", kGroup});
    ASSERT_EQ(n.exit_code, 0) << n.output;
    const auto plain = upload(client, server, p.scan.path(), {});
    const auto precision = upload(client, server, p.scan.path(), {"-P", "16"});
    const auto tolerance = upload(client, server, p.scan.path(), {"-T", "0.01"});
    EXPECT_GT(worst_nrmse(plain_unwhitened, plain), 1e-2) << "the stored noise prewhitens the later uploads";
    EXPECT_LT(worst_nrmse(plain, precision), 1e-3);
    EXPECT_GT(worst_nrmse(plain, precision), 0.0) << "16 bits are lossy";
    EXPECT_LT(worst_nrmse(plain, tolerance), 1e-2);
}

TEST_F(GadgetronClient, HeadCompressedUploads) { compressed_uploads(clients_->head); }

TEST_F(GadgetronClient, V41CompressedUploads) { compressed_uploads(clients_->v41); }

// ~302 MB: 256^2, 32 coils, 2x readout oversampling, 9 repetitions (33.6 MB of samples each).
TEST_F(GadgetronClient, HeadLargeCompressedUploads) {
    const char* on = std::getenv("LARMOR_LARGE_UPLOAD_TESTS");
    if (on && std::string(on) == "0") GTEST_SKIP() << "LARMOR_LARGE_UPLOAD_TESTS=0";
    Phantom p;
    const auto t0 = std::chrono::steady_clock::now();
    make_phantom(p, {"--matrix", "256", "--coils", "32", "--oversampling", "2", "--snr", "40", "--repetitions", "9"});
    std::cout << "    phantom: " << std::filesystem::file_size(p.scan.path()) / 1e6 << " MB in "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
    ServerProcess server({"--backend", "cpu"});
    const auto plain = upload(clients_->head, server, p.scan.path(), {});
    ASSERT_EQ(plain.size(), 9u);
    for (const std::vector<std::string>& c : {std::vector<std::string>{"-P", "16"}, {"-T", "0.01"}}) {
        const auto images = upload(clients_->head, server, p.scan.path(), c);
        EXPECT_EQ(images.size(), 9u) << c[0];
        if (c[0] == "-P") {
            EXPECT_LT(worst_nrmse(plain, images), 1e-3);
        }
    }
}

}  // namespace
}  // namespace larmor
