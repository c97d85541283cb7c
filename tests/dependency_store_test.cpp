// The dependency store (gadgets/noise_dependency_store.h) and the noise covariance helpers: exact
// round trips, ids that cannot leave the directory, the store's limits, damaged files named, coil reordering.
#include <unistd.h>

#include <chrono>
#include <complex>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gadgets/noise_covariance.h"
#include "gadgets/noise_dependency_store.h"

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
    store.save("45387_1079885_1079904_343", cov);
    const auto back = store.load("45387_1079885_1079904_343");
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->channels, cov.channels);
    EXPECT_EQ(back->matrix, cov.matrix);
    EXPECT_EQ(back->samples, cov.samples);
    EXPECT_EQ(back->noise_dwell_time_us, cov.noise_dwell_time_us);
    EXPECT_EQ(back->receiver_noise_bandwidth, cov.receiver_noise_bandwidth);
    EXPECT_EQ(back->coil_labels, cov.coil_labels);
    // The latest store of an id wins; no temporary files are left behind.
    NoiseCovariance other = sample_covariance(2);
    store.save("45387_1079885_1079904_343", other);
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
        store.save(id, sample_covariance(1));
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
        probe.save("x", sample_covariance(8));
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
        removed += store.save("m" + std::to_string(i), sample_covariance(8));
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
    counted.save("a", sample_covariance(2));
    fs::last_write_time(counted.path_for("a"), fs::file_time_type::clock::now() - std::chrono::hours(2));
    counted.save("b", sample_covariance(2));
    fs::last_write_time(counted.path_for("b"), fs::file_time_type::clock::now() - std::chrono::hours(1));
    EXPECT_EQ(counted.save("c", sample_covariance(2)), 1u);
    EXPECT_FALSE(counted.load("a").has_value());
    EXPECT_TRUE(counted.load("b").has_value());
    EXPECT_TRUE(counted.load("c").has_value());

    // A store smaller than one covariance still keeps the newest.
    NoiseStoreLimits tiny;
    tiny.max_bytes = 1;
    const NoiseDependencyStore small(dir.path() + "/tiny", tiny);
    small.save("old", sample_covariance(4));
    fs::last_write_time(small.path_for("old"), fs::file_time_type::clock::now() - std::chrono::hours(1));
    EXPECT_EQ(small.save("new", sample_covariance(4)), 1u);
    EXPECT_TRUE(small.load("new").has_value());
}

TEST(DependencyStore, DamagedFileIsNamed) {
    TempDir dir;
    const NoiseDependencyStore store(dir.path());
    store.save("m1", sample_covariance(3));
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
