// The dependency store (gadgets/noise_dependency_store.h) and the noise covariance helpers: exact
// round trips, ids that cannot leave the directory, the store's limits, damaged files named, owners
// (another scan cannot replace a stored covariance), version-1 files, coil reordering; NoiseAdjust's
// covariances charged to the session's memory budget.
#include <unistd.h>

#include <chrono>
#include <complex>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/backend.h"
#include "core/memory_budget.h"
#include "gadgets/factories.h"
#include "gadgets/noise_covariance.h"
#include "gadgets/noise_dependency_store.h"
#include "tests/support/cartesian_header.h"
#include "tests/support/gadget_harness.h"

namespace larmor {
namespace {

namespace fs = std::filesystem;

class TempDir {
public:
    TempDir() {
        char dir[] = "/tmp/larmor-store-test-XXXXXX";
        if (!::mkdtemp(dir)) throw std::runtime_error("mkdtemp");
        path_ = dir;
    }
    ~TempDir() {
        std::error_code ignored;
        fs::remove_all(path_, ignored);
    }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// The identity the tests that are not about owners store under.
const std::string kScan = "measurementID=test\n";

NoiseCovariance sample_covariance(uint32_t c) {
    NoiseCovariance cov;
    cov.channels = c;
    cov.samples = 12345;
    cov.noise_dwell_time_us = 5.5f;
    cov.receiver_noise_bandwidth = 0.793;
    for (uint32_t i = 0; i < c; ++i) cov.coil_labels.push_back("coil " + std::to_string(i));
    cov.matrix.resize(size_t{c} * c);
    for (uint32_t i = 0; i < c; ++i)
        for (uint32_t j = 0; j < c; ++j)
            cov.matrix[i * c + j] = i == j ? std::complex<double>(1.0 + i, 0)
                                           : std::complex<double>(0.1 / (1 + i + j), (double(i) - double(j)) * 1e-3);
    return cov;
}

TEST(DependencyStore, RoundTripIsExact) {
    TempDir dir;
    const NoiseDependencyStore store(dir.path() + "/not/yet/there");
    EXPECT_FALSE(store.load("45387_1079885_1079904_343").has_value());
    const NoiseCovariance cov = sample_covariance(14);
    store.save("45387_1079885_1079904_343", cov, kScan);
    const auto back = store.load("45387_1079885_1079904_343");
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->channels, cov.channels);
    EXPECT_EQ(back->matrix, cov.matrix);
    EXPECT_EQ(back->samples, cov.samples);
    EXPECT_EQ(back->noise_dwell_time_us, cov.noise_dwell_time_us);
    EXPECT_EQ(back->receiver_noise_bandwidth, cov.receiver_noise_bandwidth);
    EXPECT_EQ(back->coil_labels, cov.coil_labels);
    // The latest store of an id by the same scan wins; no temporary files are left behind.
    NoiseCovariance other = sample_covariance(2);
    store.save("45387_1079885_1079904_343", other, kScan);
    EXPECT_EQ(store.load("45387_1079885_1079904_343")->channels, 2u);
    size_t files = 0;
    for (const auto& e : fs::directory_iterator(store.directory())) {
        ++files;
        EXPECT_EQ(e.path().extension(), ".cov") << e.path();
    }
    EXPECT_EQ(files, 1u);
}

TEST(DependencyStore, IdsNeverNameAPathOutsideTheDirectory) {
    TempDir dir;
    const NoiseDependencyStore store(dir.path());
    for (const std::string& id : std::vector<std::string>{"../../etc/passwd", "/abs/path", "..", ".", "a b%c",
                                                           std::string("nul\0x", 5)}) {
        const fs::path p = store.path_for(id);
        EXPECT_EQ(p.parent_path(), fs::path(dir.path())) << id;
        store.save(id, sample_covariance(1), kScan);
        EXPECT_TRUE(store.load(id).has_value()) << id;
    }
    EXPECT_NE(store.path_for("a/b"), store.path_for("a%2Fb")) << "escaping keeps ids apart";
    EXPECT_THROW(store.path_for(""), std::invalid_argument);
    try {
        store.path_for(std::string(201, 'x'));
        ADD_FAILURE();
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("201 bytes"), std::string::npos) << e.what();
    }
}

// Bounded by bytes and by count: the oldest covariances go first, the newest always stays, files that
// are not covariances are left alone.
TEST(DependencyStore, TheOldestGoWhenTheStoreIsOverItsLimits) {
    TempDir dir;
    const size_t one = [&] {  // the size of one 8-channel covariance file
        const NoiseDependencyStore probe(dir.path() + "/probe");
        probe.save("x", sample_covariance(8), kScan);
        return size_t(fs::file_size(probe.path_for("x")));
    }();
    NoiseStoreLimits by_bytes;
    by_bytes.max_bytes = 3 * one;
    const NoiseDependencyStore store(dir.path() + "/bytes", by_bytes);
    fs::create_directories(dir.path() + "/bytes");
    std::ofstream(dir.path() + "/bytes/notes.txt") << "not a covariance";
    ASSERT_TRUE(fs::exists(dir.path() + "/bytes/notes.txt"));
    size_t removed = 0;
    for (int i = 0; i < 6; ++i) {
        removed += store.save("m" + std::to_string(i), sample_covariance(8), kScan);
        // Distinct modification times even on a coarse file system clock.
        fs::last_write_time(store.path_for("m" + std::to_string(i)),
                            fs::file_time_type::clock::now() - std::chrono::hours(6 - i));
    }
    EXPECT_EQ(removed, 3u);
    for (int i = 0; i < 3; ++i) EXPECT_FALSE(store.load("m" + std::to_string(i)).has_value()) << i;
    for (int i = 3; i < 6; ++i) EXPECT_TRUE(store.load("m" + std::to_string(i)).has_value()) << i;
    EXPECT_TRUE(fs::exists(dir.path() + "/bytes/notes.txt"));

    NoiseStoreLimits by_count;
    by_count.max_entries = 2;
    const NoiseDependencyStore counted(dir.path() + "/count", by_count);
    counted.save("a", sample_covariance(2), kScan);
    fs::last_write_time(counted.path_for("a"), fs::file_time_type::clock::now() - std::chrono::hours(2));
    counted.save("b", sample_covariance(2), kScan);
    fs::last_write_time(counted.path_for("b"), fs::file_time_type::clock::now() - std::chrono::hours(1));
    EXPECT_EQ(counted.save("c", sample_covariance(2), kScan), 1u);
    EXPECT_FALSE(counted.load("a").has_value());
    EXPECT_TRUE(counted.load("b").has_value());
    EXPECT_TRUE(counted.load("c").has_value());

    // A store smaller than one covariance still keeps the newest.
    NoiseStoreLimits tiny;
    tiny.max_bytes = 1;
    const NoiseDependencyStore small(dir.path() + "/tiny", tiny);
    small.save("old", sample_covariance(4), kScan);
    fs::last_write_time(small.path_for("old"), fs::file_time_type::clock::now() - std::chrono::hours(1));
    EXPECT_EQ(small.save("new", sample_covariance(4), kScan), 1u);
    EXPECT_TRUE(small.load("new").has_value());
}

TEST(DependencyStore, DamagedFileIsNamed) {
    TempDir dir;
    const NoiseDependencyStore store(dir.path());
    store.save("m1", sample_covariance(3), kScan);
    const std::string path = store.path_for("m1");
    fs::resize_file(path, fs::file_size(path) - 1);
    try {
        store.load("m1");
        ADD_FAILURE() << "a truncated file was accepted";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("it ends in the matrix"), std::string::npos) << e.what();
    }
    std::ofstream(path, std::ios::binary | std::ios::trunc) << "GADGETRON";
    try {
        store.load("m1");
        ADD_FAILURE() << "a foreign file was accepted";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("wrong magic"), std::string::npos) << e.what();
    }
}

// A header of the scan the owner tests store as: every field scan_identity reads.
ISMRMRD::IsmrmrdHeader scan_header(const std::string& patient) {
    ISMRMRD::IsmrmrdHeader h;
    ISMRMRD::MeasurementInformation m;
    m.measurementID = "45387_1079885_1079904_342";
    m.seriesDate = "2024-03-01";
    m.seriesTime = "10:11:12";
    m.frameOfReferenceUID = "1.3.12.2.1107.5.2.1";
    m.protocolName = "noise";
    h.measurementInformation = m;
    ISMRMRD::SubjectInformation subject;
    subject.patientID = patient;
    h.subjectInformation = subject;
    ISMRMRD::StudyInformation study;
    study.studyInstanceUID = "1.2.3.4";
    study.studyID = "1079904";
    study.studyDate = "2024-03-01";
    study.studyTime = "10:00:00";
    h.studyInformation = study;
    ISMRMRD::AcquisitionSystemInformation sys;
    sys.systemVendor = "SIEMENS";
    sys.systemModel = "Avanto";
    sys.deviceID = "45387";
    sys.stationName = "AWP45387";
    sys.institutionName = "Somewhere";
    sys.receiverChannels = 14;
    h.acquisitionSystemInformation = sys;
    return h;
}

TEST(DependencyStore, ScanIdentityNamesTheScanExactly) {
    const ISMRMRD::IsmrmrdHeader h = scan_header("1079885");
    EXPECT_EQ(scan_identity(h),
              "measurementID=45387_1079885_1079904_342\nseriesDate=2024-03-01\nseriesTime=10:11:12\n"
              "frameOfReferenceUID=1.3.12.2.1107.5.2.1\nprotocolName=noise\npatientID=1079885\n"
              "studyInstanceUID=1.2.3.4\nstudyID=1079904\nstudyDate=2024-03-01\nstudyTime=10:00:00\n"
              "systemVendor=SIEMENS\nsystemModel=Avanto\ndeviceID=45387\nstationName=AWP45387\n"
              "institutionName=Somewhere\nreceiverChannels=14\n");
    EXPECT_EQ(scan_identity(ISMRMRD::IsmrmrdHeader{}), "");
    // A value cannot forge the next field: line ends and '%' are escaped.
    ISMRMRD::IsmrmrdHeader forged = h;
    forged.subjectInformation->patientID = "1079885\nstudyInstanceUID=9%";
    EXPECT_NE(scan_identity(forged).find("patientID=1079885%0AstudyInstanceUID=9%25\n"), std::string::npos)
        << scan_identity(forged);
    // Bounded: a long value keeps its head and its length, so values of other lengths still differ.
    ISMRMRD::IsmrmrdHeader longer = h, longest = h;
    longer.subjectInformation->patientID = std::string(100000, 'p');
    longest.subjectInformation->patientID = std::string(100001, 'p');
    EXPECT_LT(scan_identity(longer).size(), scan_identity(h).size() + kMaxIdentityFieldBytes + 16);
    EXPECT_NE(scan_identity(longer).find("...%+100000\n"), std::string::npos);
    EXPECT_NE(scan_identity(longer), scan_identity(longest));
}

// The hostile probe of issue 19: another scan's upload under an id replaced that id's noise.
TEST(DependencyStore, AnotherScanCannotReplaceAStoredCovariance) {
    TempDir dir;
    const NoiseDependencyStore store(dir.path());
    const std::string id = "45387_1079885_1079904_342";
    const std::string owner = scan_identity(scan_header("1079885"));
    const std::string other = scan_identity(scan_header("666"));
    const NoiseCovariance first = sample_covariance(4), second = sample_covariance(2);
    store.save(id, first, owner);
    EXPECT_EQ(store.owner(id), owner);
    try {
        store.save(id, second, other);
        ADD_FAILURE() << "another scan replaced the covariance";
    } catch (const NoiseStoreRefused& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("measurement '" + id + "' already holds the noise covariance of another scan (patientID "
                            "differs); that one is kept"),
                  std::string::npos)
            << what;
        EXPECT_NE(what.find("--dependency-store-overwrite"), std::string::npos) << what;
        EXPECT_EQ(what.find("666"), std::string::npos) << "the stored scan's values are not shown: " << what;
    }
    EXPECT_EQ(store.load(id)->matrix, first.matrix);
    EXPECT_EQ(store.owner(id), owner);
    size_t files = 0;
    for (const auto& e : fs::directory_iterator(dir.path())) files += e.is_regular_file() ? 1 : 0;
    EXPECT_EQ(files, 1u) << "a refused store leaves no temporary file";

    // The same scan re-sent replaces its own covariance.
    store.save(id, second, owner);
    EXPECT_EQ(store.load(id)->matrix, second.matrix);

    // With the server's --dependency-store-overwrite any scan may.
    NoiseStoreLimits open;
    open.allow_overwrite = true;
    const NoiseDependencyStore overwriting(dir.path(), open);
    overwriting.save(id, first, other);
    EXPECT_EQ(store.load(id)->matrix, first.matrix);
    EXPECT_EQ(store.owner(id), other);
    EXPECT_THROW(store.save(id, second, owner), NoiseStoreRefused) << "now the other scan owns it";
    EXPECT_THROW(store.save(id, second, ""), std::invalid_argument);
}

// Version 1 (no identity), as the store wrote it before owners: channels 2, samples 7, dwell 3.5 us,
// bandwidth 0.79, one label per channel, the matrix.
std::string version_one_file(const NoiseCovariance& cov) {
    std::string out = "LRMNOISE";
    auto put = [&out](const auto& v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put(uint32_t{1});
    put(cov.channels);
    put(cov.samples);
    put(cov.noise_dwell_time_us);
    put(cov.receiver_noise_bandwidth);
    put(static_cast<uint32_t>(cov.coil_labels.size()));
    for (const std::string& l : cov.coil_labels) {
        put(static_cast<uint32_t>(l.size()));
        out += l;
    }
    for (const auto& v : cov.matrix) {
        put(v.real());
        put(v.imag());
    }
    return out;
}

TEST(DependencyStore, VersionOneFilesStillLoadAndHaveNoOwner) {
    TempDir dir;
    const NoiseDependencyStore store(dir.path());
    const NoiseCovariance old = sample_covariance(3);
    std::ofstream(store.path_for("old"), std::ios::binary) << version_one_file(old);
    const auto back = store.load("old");
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->matrix, old.matrix);
    EXPECT_EQ(back->samples, old.samples);
    EXPECT_EQ(back->coil_labels, old.coil_labels);
    EXPECT_EQ(store.owner("old"), std::string());
    // Nobody owns it, so any scan may replace it, and then owns it.
    const std::string scan = scan_identity(scan_header("1079885"));
    store.save("old", sample_covariance(2), scan);
    EXPECT_EQ(store.load("old")->channels, 2u);
    EXPECT_EQ(store.owner("old"), scan);
    EXPECT_FALSE(store.owner("none").has_value());
}

TEST(DependencyStore, CovarianceOfMoreChannelsThanTheLimitIsNotStored) {
    TempDir dir;
    EXPECT_EQ(NoiseStoreLimits{}.max_channels, 256u);
    const NoiseDependencyStore defaults(dir.path() + "/defaults");
    EXPECT_THROW(defaults.save("wide", sample_covariance(257), kScan), NoiseStoreRefused);
    defaults.save("wide", sample_covariance(256), kScan);
    EXPECT_EQ(defaults.load("wide")->channels, 256u);

    NoiseStoreLimits four;
    four.max_channels = 4;
    const NoiseDependencyStore store(dir.path() + "/four", four);
    try {
        store.save("m", sample_covariance(5), kScan);
        ADD_FAILURE() << "a 5-channel covariance was stored";
    } catch (const NoiseStoreRefused& e) {
        EXPECT_NE(std::string(e.what()).find("a noise covariance of 5 channels is more than the dependency store keeps "
                                             "(at most 4 channels: larmor-server --dependency-store-max-channels)"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_FALSE(store.load("m").has_value());
    store.save("m", sample_covariance(4), kScan);
    EXPECT_EQ(store.load("m")->channels, 4u);
}

// NoiseAdjust with a session budget: the covariance it accumulates, and the one it loads, count while held.
std::vector<Acquisition> noise_scans(uint16_t channels, uint16_t samples, size_t count) {
    std::mt19937 rng(5);
    std::normal_distribution<float> n;
    std::vector<Acquisition> scans(count);
    for (size_t i = 0; i < count; ++i) {
        Acquisition& a = scans[i];
        a.head.flags = uint64_t{1} << (ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT - 1);
        a.head.scan_counter = static_cast<uint32_t>(i);
        a.head.active_channels = channels;
        a.head.number_of_samples = samples;
        a.head.sample_time_us = 5;
        a.data.resize(size_t{channels} * samples);
        for (auto& v : a.data) v = {n(rng), n(rng)};
    }
    return scans;
}

std::vector<std::unique_ptr<Gadget>> noise_adjust_alone() {
    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(make_noise_adjust(config::NoiseAdjust{}));
    return g;
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

TEST(NoiseAdjustMemory, CovariancesAreChargedToTheSessionBudget) {
    constexpr uint16_t kChannels = 64;
    constexpr uint64_t kCovarianceBytes = 64 * 64 * 16;  // 64 KiB of complex doubles
    auto budget = std::make_shared<MemoryBudget>("session host memory budget (--session-memory-limit)", 1 << 20);
    const std::string xml = test::cartesian_header_xml(32, 16, 1, kChannels);
    {
        SessionContext ctx = test::make_session(xml, make_cpu_backend(1, {budget, nullptr}));
        test::GadgetHarness h(noise_adjust_alone());
        h.start(ctx);
        const uint64_t before = budget->in_use();
        for (Acquisition& a : noise_scans(kChannels, 128, 2)) h.push(std::move(a));
        EXPECT_EQ(budget->in_use() - before, kCovarianceBytes) << "held while it is accumulated";
        wire::Acquisition line = test::cartesian_readout(32, kChannels, 0);
        line.head.sample_time_us = 5;
        h.push(std::move(line));
        EXPECT_EQ(budget->in_use(), before) << "released once the whitener is made";
        EXPECT_GE(budget->peak(), before + kCovarianceBytes);
    }
    // Over the budget the session fails, naming the bytes and the budget.
    auto small = std::make_shared<MemoryBudget>("session host memory budget (--session-memory-limit)", 32 << 10);
    SessionContext ctx = test::make_session(xml, make_cpu_backend(1, {small, nullptr}));
    test::GadgetHarness h(noise_adjust_alone());
    h.start(ctx);
    const std::string error = error_of([&] { h.push(noise_scans(kChannels, 128, 1).at(0)); });
    EXPECT_NE(error.find("NoiseAdjust: the noise covariance of 64 channels accumulated from the stream's noise scans "
                         "needs 64.0 KiB (65536 bytes) more, over the session host memory budget "
                         "(--session-memory-limit)"),
              std::string::npos)
        << error;
}

TEST(NoiseAdjustMemory, LoadedDependencyIsChargedToTheSessionBudget) {
    TempDir dir;
    auto store = std::make_shared<NoiseDependencyStore>(dir.path());
    store->save("NOISE_1", sample_covariance(64), kScan);
    const std::string xml = test::cartesian_header_xml(32, 16, 1, 64);
    auto small = std::make_shared<MemoryBudget>("session host memory budget (--session-memory-limit)", 32 << 10);
    SessionContext ctx = test::make_session(xml, make_cpu_backend(1, {small, nullptr}));
    ISMRMRD::MeasurementInformation m;
    m.measurementID = "IMG_1";
    ISMRMRD::MeasurementDependency d;
    d.dependencyType = "Noise";
    d.measurementID = "NOISE_1";
    m.measurementDependency.push_back(d);
    ctx.header.measurementInformation = m;
    ctx.dependencies = store;
    test::GadgetHarness h(noise_adjust_alone());
    const std::string error = error_of([&] { h.start(ctx); });
    EXPECT_NE(error.find("NoiseAdjust: the noise covariance of 64 channels of noise dependency 'NOISE_1' needs 64.0 "
                         "KiB (65536 bytes) more, over the session host memory budget (--session-memory-limit)"),
              std::string::npos)
        << error;
}

TEST(NoiseCovarianceHelpers, SigmasAreSquareRootsOfTheDiagonal) {
    const NoiseSigmas s = noise_sigmas(sample_covariance(4));  // diagonal 1, 2, 3, 4
    EXPECT_FLOAT_EQ(s.min, 1.0f);
    EXPECT_FLOAT_EQ(s.max, 2.0f);
    EXPECT_FLOAT_EQ(s.mean, float((1 + std::sqrt(2.0) + std::sqrt(3.0) + 2) / 4));
}

TEST(NoiseCovarianceHelpers, InverseCholeskyFactorWhitensTheCovariance) {
    const NoiseCovariance cov = sample_covariance(5);
    const auto w = inverse_cholesky_factor(cov);
    const size_t c = cov.channels;
    // W Sigma W^H = I
    for (size_t i = 0; i < c; ++i)
        for (size_t j = 0; j < c; ++j) {
            std::complex<double> sum = 0;
            for (size_t k = 0; k < c; ++k)
                for (size_t l = 0; l < c; ++l) sum += w[i * c + k] * cov.matrix[k * c + l] * std::conj(w[j * c + l]);
            EXPECT_NEAR(std::abs(sum - (i == j ? 1.0 : 0.0)), 0.0, 1e-12) << i << "," << j;
        }
    NoiseCovariance dead = cov;
    for (size_t k = 0; k < c; ++k) dead.matrix[3 * c + k] = dead.matrix[k * c + 3] = 0;
    try {
        inverse_cholesky_factor(dead);
        ADD_FAILURE() << "a channel without noise was accepted";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("channel 3 of 5"), std::string::npos) << e.what();
    }
}

TEST(NoiseCovarianceHelpers, CoilsAreReorderedByLabel) {
    const NoiseCovariance cov = sample_covariance(3);
    NoiseCovariance same = cov;
    std::string note;
    EXPECT_TRUE(match_coil_order(same, cov.coil_labels, note));
    EXPECT_EQ(same.matrix, cov.matrix);
    EXPECT_EQ(note, "");

    NoiseCovariance permuted = cov;
    const std::vector<std::string> order = {"coil 2", "coil 0", "coil 1"};
    EXPECT_TRUE(match_coil_order(permuted, order, note));
    EXPECT_EQ(permuted.coil_labels, order);
    const size_t src[] = {2, 0, 1};
    for (size_t i = 0; i < 3; ++i)
        for (size_t j = 0; j < 3; ++j) EXPECT_EQ(permuted.matrix[i * 3 + j], cov.matrix[src[i] * 3 + src[j]]);

    NoiseCovariance foreign = cov;
    EXPECT_FALSE(match_coil_order(foreign, {"coil 0", "coil 1", "body"}, note));
    EXPECT_NE(note.find("'body'"), std::string::npos) << note;
    EXPECT_EQ(foreign.matrix, cov.matrix);
    EXPECT_FALSE(match_coil_order(foreign, {}, note));
}

}  // namespace
}  // namespace larmor
