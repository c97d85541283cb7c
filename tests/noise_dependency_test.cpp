// Noise dependencies and compressed uploads, byte-level against larmor-server: a noise scan sent in a
// session of its own is stored and prewhitens a later session that names it (the same image as one
// combined session), Gadgetron's dependency pre-query is answered with DEPENDENCY_QUERY only, a
// missing dependency gives a warning and an unwhitened image, another scan cannot replace the noise a
// scan stored (nor is noise of more channels than the store keeps stored), NHLBI-compressed
// acquisitions reconstruct as the plain ones do, and every TEXT ends with a newline.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <ismrmrd/meta.h>
#include <ismrmrd/xml.h>

#include "tests/support/ismrmrd_files.h"
#include "tests/support/nhlbi_encoder.h"
#include "tests/support/server_process.h"

namespace larmor {
namespace {

using test::ScanFile;
using test::ServerProcess;
using test::WireConnection;
using wire::WireMessage;
using namespace std::chrono_literals;

const char* kDependencyQueryScript = R"(<?xml version="1.0" encoding="UTF-8"?>
<gadgetronStreamConfiguration xsi:schemaLocation="http://gadgetron.sf.net/gadgetron gadgetron.xsd"
  xmlns="http://gadgetron.sf.net/gadgetron" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <writer><slot>1019</slot><dll>gadgetron_mricore</dll><classname>DependencyQueryWriter</classname></writer>
  <gadget><name>NoiseSummary</name><dll>gadgetron_mricore</dll><classname>NoiseSummaryGadget</classname>
    <property><name>noise_file</name><value>GadgetronNoiseCovarianceMatrix_@ID@</value></property>
  </gadget>
</gadgetronStreamConfiguration>
)";

// A phantom scan (64^2, 4 coils, 2x readout oversampling, noise scans first), generated once.
const ScanFile& phantom() {
    static const ScanFile scan = [] {
        static std::atomic<int> n{0};
        const std::string path = "/tmp/larmor-nd-phantom-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".h5";
        const auto r = test::run_process({std::string(LARMOR_BINARY_DIR) + "/tools/larmor-phantom", "-o", path,
                                          "--matrix", "64", "--coils", "4", "--oversampling", "2", "--snr", "30",
                                          "--noise-scan", "--noise-samples", "64", "--seed", "7"},
                                         120s);
        if (r.exit_code != 0) throw std::runtime_error("larmor-phantom failed: " + r.output);
        ScanFile s = test::read_scan(path);
        ::unlink(path.c_str());
        return s;
    }();
    return scan;
}

using test::to_wire;

// One whole session: config, header, acquisitions (each through `encode`, plain by default), CLOSE.
std::vector<WireMessage> session(uint16_t port, const std::string& chain, const std::string& xml,
                                 const std::vector<ISMRMRD::Acquisition>& acquisitions,
                                 std::vector<uint8_t> (*encode)(const ISMRMRD::Acquisition&) = nullptr) {
    WireConnection c(port);
    c.send(wire::ConfigFile{chain});
    c.send(wire::ParameterScript{xml});
    for (const auto& a : acquisitions) {
        if (encode)
            c.send_bytes(encode(a));
        else
            c.send(to_wire(a));
    }
    c.send(wire::Close{});
    return c.receive_until_close();
}

std::vector<WireMessage> dependency_query(uint16_t port, const std::string& id) {
    std::string script = kDependencyQueryScript;
    script.replace(script.find("@ID@"), 4, id);
    WireConnection c(port);
    c.send(wire::ConfigScript{script});
    c.send(wire::Close{});
    return c.receive_until_close();
}

// The TEXT replies other than the session summary every session ends with (checked on its own).
std::string joined_texts(const std::vector<WireMessage>& reply) {
    std::string out;
    for (const auto& t : test::texts_of(reply))
        if (t.rfind("[Summary] ", 0) != 0) out += t;
    return out;
}

std::string summary_of(const std::vector<WireMessage>& reply) {
    for (const auto& t : test::texts_of(reply))
        if (t.rfind("[Summary] ", 0) == 0) return t;
    return "";
}

// The float pixels of the one image in a reply.
std::vector<float> only_image(const std::vector<WireMessage>& reply) {
    std::vector<float> pixels;
    int images = 0;
    for (const auto& m : reply)
        if (const auto* im = std::get_if<wire::Image>(&m)) {
            ++images;
            EXPECT_EQ(im->head.data_type, ISMRMRD::ISMRMRD_FLOAT);
            pixels.resize(im->pixels.size() / sizeof(float));
            std::memcpy(pixels.data(), im->pixels.data(), im->pixels.size());
        }
    EXPECT_EQ(images, 1) << joined_texts(reply);
    return pixels;
}

// max |a - b| / max |a|
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size() || a.empty()) return INFINITY;
    double diff = 0, peak = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, double(std::abs(a[i] - b[i])));
        peak = std::max(peak, double(std::abs(a[i])));
    }
    return diff / peak;
}

TEST(NoiseDependency, SplitSessionsGiveTheImageOfOneCombinedSession) {
    ServerProcess server;
    const ScanFile& scan = phantom();
    const ScanFile noise = test::noise_part(scan), imaging = test::imaging_part(scan);
    ASSERT_EQ(noise.acquisitions.size(), 64u);

    // One session with noise and data, naming a dependency the store does not have: its own noise is used.
    const auto combined = session(server.port(), "default.xml", test::with_measurement(scan.xml, "IMG_1", "NOISE_1"),
                                  scan.acquisitions);
    EXPECT_EQ(joined_texts(combined), "");
    EXPECT_EQ(summary_of(combined),
              "[Summary] 128 acquisitions received: 128 used (64 imaging, 64 noise (prewhitening)); 64 reached an image; 0 "
              "discarded\n");
    const std::vector<float> reference = only_image(combined);

    // The noise alone under the id the imaging header names, then the imaging data alone.
    const auto noise_reply =
        session(server.port(), "default.xml", test::with_measurement(scan.xml, "NOISE_1", ""), noise.acquisitions);
    ASSERT_EQ(noise_reply.size(), 2u) << "a noise-only session returns its summary and CLOSE: "
                                      << joined_texts(noise_reply);
    EXPECT_EQ(summary_of(noise_reply),
              "[Summary] 64 acquisitions received: 64 used (64 noise (prewhitening)); 0 reached an image; 0 discarded\n");
    const auto split = session(server.port(), "default.xml", test::with_measurement(scan.xml, "IMG_2", "NOISE_1"),
                               imaging.acquisitions);
    EXPECT_EQ(joined_texts(split), "");
    EXPECT_LE(relative_difference(reference, only_image(split)), 1e-6);
    EXPECT_NE(server.log().find("loaded noise dependency 'NOISE_1' (4 channels, "), std::string::npos) << server.log();

    // Without any noise the image differs: the comparison above can fail.
    const auto plain = session(server.port(), "default.xml", test::with_measurement(scan.xml, "IMG_3", ""),
                               imaging.acquisitions);
    EXPECT_GT(relative_difference(reference, only_image(plain)), 1e-2);
}

TEST(NoiseDependency, MissingDependencyWarnsAndLeavesTheImageUnwhitened) {
    ServerProcess server;
    const ScanFile imaging = test::imaging_part(phantom());
    const auto missing = session(server.port(), "default.xml",
                                 test::with_measurement(imaging.xml, "IMG_1", "NO_SUCH_NOISE"), imaging.acquisitions);
    const std::string text = joined_texts(missing);
    EXPECT_NE(text.find("[NoiseAdjust] WARNING: noise dependency 'NO_SUCH_NOISE'"), std::string::npos) << text;
    EXPECT_NE(text.find("is not in the dependency store " + server.dependency_dir()), std::string::npos) << text;
    EXPECT_NE(text.find("not prewhitened"), std::string::npos) << text;
    EXPECT_EQ(text.find("ERROR"), std::string::npos) << text;
    const auto plain = session(server.port(), "default.xml", test::with_measurement(imaging.xml, "IMG_2", ""),
                               imaging.acquisitions);
    EXPECT_EQ(only_image(missing), only_image(plain));
    EXPECT_NE(server.log().find("NO_SUCH_NOISE"), std::string::npos) << "logged too";
}

TEST(NoiseDependency, PreQueryAnswersWithTheNoiseSummaryAsGadgetron) {
    ServerProcess server;
    const ScanFile noise = test::noise_part(phantom());

    auto reply = dependency_query(server.port(), "NOISE_9");
    ASSERT_EQ(reply.size(), 2u);
    ISMRMRD::MetaContainer failed;
    ISMRMRD::deserialize(std::get<wire::DependencyQuery>(reply[0]).meta_xml.c_str(), failed);
    EXPECT_STREQ(failed.as_str("status"), "failed");
    EXPECT_TRUE(std::holds_alternative<wire::Close>(reply[1]));

    session(server.port(), "cartesian", test::with_measurement(noise.xml, "NOISE_9", ""), noise.acquisitions);
    reply = dependency_query(server.port(), "NOISE_9");
    ASSERT_EQ(reply.size(), 2u) << "DEPENDENCY_QUERY and CLOSE, never TEXT";
    ISMRMRD::MetaContainer meta;
    ISMRMRD::deserialize(std::get<wire::DependencyQuery>(reply[0]).meta_xml.c_str(), meta);
    EXPECT_STREQ(meta.as_str("status"), "success");
    EXPECT_EQ(meta.as_long("channels"), 4);
    EXPECT_DOUBLE_EQ(meta.as_double("noise_dwell_time_us"), noise.acquisitions[0].getHead().sample_time_us);
    // sigma_c = sqrt(Sigma_cc), the (N - 1)-normalised variance of channel c over the noise samples.
    std::vector<double> sigma(4, 0.0);
    size_t samples = 0;
    for (const auto& a : noise.acquisitions) {
        const size_t ns = a.getHead().number_of_samples;
        for (size_t c = 0; c < 4; ++c)
            for (size_t s = 0; s < ns; ++s) sigma[c] += std::norm(std::complex<double>(a.getDataPtr()[c * ns + s]));
        samples += ns;
    }
    double lo = INFINITY, hi = 0, mean = 0;
    for (double& s : sigma) {
        s = std::sqrt(s / double(samples - 1));
        lo = std::min(lo, s);
        hi = std::max(hi, s);
        mean += s / 4;
    }
    EXPECT_NEAR(meta.as_double("min_sigma"), lo, 1e-5 * lo);
    EXPECT_NEAR(meta.as_double("max_sigma"), hi, 1e-5 * hi);
    EXPECT_NEAR(meta.as_double("mean_sigma"), mean, 1e-5 * mean);
}

// The header as another patient's scan would send it (scan_identity differs in patientID only).
std::string with_patient(const std::string& xml, const std::string& patient) {
    ISMRMRD::IsmrmrdHeader h;
    ISMRMRD::deserialize(xml.c_str(), h);
    ISMRMRD::SubjectInformation s = h.subjectInformation ? *h.subjectInformation : ISMRMRD::SubjectInformation{};
    s.patientID = patient;
    h.subjectInformation = s;
    std::ostringstream out;
    ISMRMRD::serialize(h, out);
    return out.str();
}

// Noise scans of another covariance: channel 0 three times as loud.
ScanFile louder_first_channel(ScanFile noise) {
    for (auto& a : noise.acquisitions)
        for (size_t s = 0; s < a.getHead().number_of_samples; ++s) a.getDataPtr()[s] *= 3.0f;
    return noise;
}

// Issue 19's hostile probe: a second scan uploading noise under the first scan's measurement id is
// told that it was not stored, and later sessions naming that id still get the first scan's noise.
TEST(NoiseDependency, AnotherScanCannotReplaceTheStoredNoise) {
    ServerProcess server;
    const ScanFile& scan = phantom();
    const ScanFile noise = test::noise_part(scan), imaging = test::imaging_part(scan);
    const std::string first_xml = with_patient(test::with_measurement(scan.xml, "NOISE_1", ""), "PATIENT_A");
    const std::string other_xml = with_patient(first_xml, "PATIENT_B");
    const ScanFile other = louder_first_channel(noise);
    const std::string imaging_xml = test::with_measurement(scan.xml, "IMG_1", "NOISE_1");

    session(server.port(), "default.xml", first_xml, noise.acquisitions);
    const std::vector<float> reference =
        only_image(session(server.port(), "default.xml", imaging_xml, imaging.acquisitions));

    const auto refused = session(server.port(), "default.xml", other_xml, other.acquisitions);
    const std::string text = joined_texts(refused);
    EXPECT_NE(text.find("[NoiseAdjust] WARNING: cannot store the noise covariance of measurement 'NOISE_1': "
                        "measurement 'NOISE_1' already holds the noise covariance of another scan (patientID "
                        "differs); that one is kept. larmor-server --dependency-store-overwrite lets a different "
                        "scan replace a stored covariance\n"),
              std::string::npos)
        << text;
    EXPECT_EQ(text.find("ERROR"), std::string::npos) << text;
    EXPECT_NE(server.log().find("already holds the noise covariance of another scan"), std::string::npos) << "logged";
    EXPECT_LE(relative_difference(reference, only_image(session(server.port(), "default.xml", imaging_xml,
                                                                 imaging.acquisitions))),
              1e-6)
        << "the first scan's noise is still used";

    // The same scan re-sent replaces its noise, without a warning.
    EXPECT_EQ(joined_texts(session(server.port(), "default.xml", first_xml, other.acquisitions)), "");
    EXPECT_GT(relative_difference(reference, only_image(session(server.port(), "default.xml", imaging_xml,
                                                                 imaging.acquisitions))),
              1e-2)
        << "the other noise gives another image, so the comparison above can fail";
}

TEST(NoiseDependency, OverwriteFlagLetsAnotherScanReplaceTheStoredNoise) {
    ServerProcess server({"--dependency-store-overwrite"});
    const ScanFile& scan = phantom();
    const ScanFile noise = test::noise_part(scan), imaging = test::imaging_part(scan);
    const std::string first_xml = with_patient(test::with_measurement(scan.xml, "NOISE_1", ""), "PATIENT_A");
    const std::string imaging_xml = test::with_measurement(scan.xml, "IMG_1", "NOISE_1");
    session(server.port(), "default.xml", first_xml, noise.acquisitions);
    const std::vector<float> reference =
        only_image(session(server.port(), "default.xml", imaging_xml, imaging.acquisitions));
    EXPECT_EQ(joined_texts(session(server.port(), "default.xml", with_patient(first_xml, "PATIENT_B"),
                                   louder_first_channel(noise).acquisitions)),
              "");
    EXPECT_GT(relative_difference(reference, only_image(session(server.port(), "default.xml", imaging_xml,
                                                                 imaging.acquisitions))),
              1e-2);
}

// A noise scan of more channels than --dependency-store-max-channels is not stored (the client is told
// why); its own session is still prewhitened with it.
TEST(NoiseDependency, NoiseOfMoreChannelsThanTheLimitIsNotStored) {
    const ScanFile& scan = phantom();  // 4 coils
    const std::string xml = test::with_measurement(scan.xml, "IMG_1", "");
    ServerProcess unlimited;
    const std::vector<float> reference = only_image(session(unlimited.port(), "default.xml", xml, scan.acquisitions));

    ServerProcess server({"--dependency-store-max-channels", "3"});
    const auto reply = session(server.port(), "default.xml", xml, scan.acquisitions);
    const std::string text = joined_texts(reply);
    EXPECT_EQ(text, "[NoiseAdjust] WARNING: cannot store the noise covariance of measurement 'IMG_1': a noise "
                    "covariance of 4 channels is more than the dependency store keeps (at most 3 channels: "
                    "larmor-server --dependency-store-max-channels)\n");
    EXPECT_LE(relative_difference(reference, only_image(reply)), 1e-6) << "prewhitened all the same";
    const ScanFile imaging = test::imaging_part(scan);
    const auto later = session(server.port(), "default.xml", test::with_measurement(scan.xml, "IMG_2", "IMG_1"),
                               imaging.acquisitions);
    EXPECT_NE(joined_texts(later).find("noise dependency 'IMG_1' (the header's Noise measurementDependency) is not in "
                                       "the dependency store"),
              std::string::npos)
        << joined_texts(later);
}

TEST(NoiseDependency, StoreOutlivesTheServer) {
    char dir[] = "/tmp/larmor-nd-store-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    const ScanFile noise = test::noise_part(phantom());
    {
        ServerProcess first({"--dependency-dir", dir});
        session(first.port(), "cartesian-rss", test::with_measurement(noise.xml, "NOISE_5", ""), noise.acquisitions);
    }
    ServerProcess second({"--dependency-dir", dir});
    const auto reply = dependency_query(second.port(), "NOISE_5");
    ASSERT_FALSE(reply.empty());
    EXPECT_NE(std::get<wire::DependencyQuery>(reply[0]).meta_xml.find("success"), std::string::npos);
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
}

// The acquisition as gadgetron_ismrmrd_client -P 16 frames it.
std::vector<uint8_t> nhlbi16(const ISMRMRD::Acquisition& a) {
    ISMRMRD::ISMRMRD_AcquisitionHeader h = a.getHead();
    h.flags |= uint64_t{1} << (ISMRMRD::ISMRMRD_ACQ_COMPRESSION2 - 1);
    const auto* f = reinterpret_cast<const float*>(a.getDataPtr());
    const auto enc = test::nhlbi_encode_precision(std::vector<float>(f, f + 2 * a.getNumberOfDataElements()), 16);
    const uint16_t id = wire::kAcquisition;
    const uint32_t n = static_cast<uint32_t>(enc.bytes.size());
    std::vector<uint8_t> out(2 + wire::kAcquisitionHeaderBytes + 4 + n);
    uint8_t* p = out.data();
    std::memcpy(p, &id, 2);
    std::memcpy(p + 2, &h, wire::kAcquisitionHeaderBytes);
    std::memcpy(p + 2 + wire::kAcquisitionHeaderBytes, &n, 4);
    std::memcpy(p + 2 + wire::kAcquisitionHeaderBytes + 4, enc.bytes.data(), n);
    return out;
}

TEST(CompressedUpload, NhlbiSessionReconstructsAsThePlainOne) {
    ServerProcess server;
    const ScanFile& scan = phantom();
    const std::string xml = test::with_measurement(scan.xml, "IMG_1", "");
    const auto plain = session(server.port(), "cartesian-rss", xml, scan.acquisitions);
    const auto compressed = session(server.port(), "cartesian-rss", xml, scan.acquisitions, nhlbi16);
    EXPECT_EQ(joined_texts(compressed), "");
    const double d = relative_difference(only_image(plain), only_image(compressed));
    EXPECT_GT(d, 0.0) << "16 bits are lossy";
    EXPECT_LT(d, 1e-3);
    const auto counted = session(server.port(), "counter", xml, scan.acquisitions, nhlbi16);
    EXPECT_NE(joined_texts(counted).find("AcquisitionCounter: " + std::to_string(scan.acquisitions.size())),
              std::string::npos)
        << joined_texts(counted);
}

TEST(ServerText, EveryTextEndsWithANewline) {
    ServerProcess server;
    WireConnection c(server.port());
    c.send(wire::ConfigFile{"no_such_chain"});
    c.send(wire::Close{});
    const auto texts = test::texts_of(c.receive_until_close());
    ASSERT_FALSE(texts.empty());
    for (const auto& t : texts) EXPECT_EQ(t.back(), '\n') << t;
    const ScanFile& scan = phantom();
    const auto counted = session(server.port(), "counter", scan.xml, scan.acquisitions);
    for (const auto& t : test::texts_of(counted)) EXPECT_EQ(t.back(), '\n') << t;
}

}  // namespace
}  // namespace larmor
