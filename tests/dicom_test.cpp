// DICOM output (issue 24): images to DICOM MR Image Storage files (gadgets/dicom/dicom_image.h), checked
// with tools Larmor did not write: dciodvfy (Debian dicom3tools) must report no errors, and dcmdump
// (Debian dcmtk) must show the geometry of the ISMRMRD image header, computed here from the header
// independently of the writer; then the chain cartesian_dicom through larmor-server and
// larmor-client --dicom, and Gadgetron's DicomFinishGadget in a Gadgetron XML chain.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gadgets/chain_config.h"
#include "gadgets/dicom/dicom_image.h"
#include "gadgets/gadgetron_xml.h"
#include "tests/support/gadgetron_client.h"
#include "tests/support/server_process.h"
#include "tools/phantom/phantom.h"

namespace larmor {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

bool have(const char* tool) { return std::system((std::string("command -v ") + tool + " > /dev/null 2>&1").c_str()) == 0; }

std::string output_of(const std::string& cmd) {
    std::string out;
    FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
    if (!p) return out;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    ::pclose(p);
    return out;
}

// dcmdump's value of an attribute: "(0020,0032) DS [a\b\c]" -> {a, b, c}.
std::vector<double> numbers(const std::string& dump, const std::string& tag) {
    std::istringstream in(dump);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(tag, 0) != 0) continue;
        const size_t open = line.find('['), close = line.find(']');
        if (open == std::string::npos || close == std::string::npos) {  // US values have no brackets
            std::istringstream v(line.substr(tag.size() + 4));
            double x;
            return v >> x ? std::vector<double>{x} : std::vector<double>{};
        }
        std::vector<double> out;
        std::stringstream v(line.substr(open + 1, close - open - 1));
        for (std::string part; std::getline(v, part, '\\');) out.push_back(std::stod(part));
        return out;
    }
    return {};
}

std::string text_of(const std::string& dump, const std::string& tag) {
    std::istringstream in(dump);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(tag, 0) != 0) continue;
        const size_t open = line.find('['), close = line.find(']');
        return open == std::string::npos ? std::string() : line.substr(open + 1, close - open - 1);
    }
    return "(absent)";
}

// An oblique, non-square 3D image: 96 x 64 x 4, 240 x 160 x 20 mm, rotated 30 degrees about z, with
// values v(x, y, z) = 100 z + 7 x + y.
wire::Image oblique_image() {
    wire::Image im;
    auto& h = im.head;
    h.version = 1;
    h.data_type = ISMRMRD::ISMRMRD_USHORT;
    h.matrix_size[0] = 96, h.matrix_size[1] = 64, h.matrix_size[2] = 4;
    h.field_of_view[0] = 240.f, h.field_of_view[1] = 160.f, h.field_of_view[2] = 20.f;
    h.channels = 1;
    const float c = std::cos(0.5235988f), s = std::sin(0.5235988f);
    const float read[3] = {c, s, 0.f}, phase[3] = {-s, c, 0.f}, slice[3] = {0.f, 0.f, 1.f}, pos[3] = {12.5f, -30.f, 41.f};
    for (int a = 0; a < 3; ++a)
        h.read_dir[a] = read[a], h.phase_dir[a] = phase[a], h.slice_dir[a] = slice[a], h.position[a] = pos[a];
    h.image_series_index = 3;
    h.image_index = 1;
    im.pixels.resize(96 * 64 * 4 * 2);
    for (size_t z = 0; z < 4; ++z)
        for (size_t y = 0; y < 64; ++y)
            for (size_t x = 0; x < 96; ++x) {
                const uint16_t v = uint16_t(100 * z + 7 * x + y);
                std::memcpy(im.pixels.data() + 2 * (x + 96 * (y + 64 * z)), &v, 2);
            }
    return im;
}

ISMRMRD::IsmrmrdHeader patient_header() {
    ISMRMRD::IsmrmrdHeader h;
    ISMRMRD::SubjectInformation s;
    s.patientName = std::string("Doe^Jane");
    s.patientID = std::string("LARMOR-0001");
    s.patientBirthdate = std::string("1970-01-02");
    s.patientGender = std::string("F");
    h.subjectInformation = s;
    ISMRMRD::StudyInformation st;
    st.studyDate = std::string("2026-11-29");
    st.studyTime = std::string("08:15:00");
    st.studyInstanceUID = std::string("1.2.826.0.1.3680043.8.498.1");
    h.studyInformation = st;
    ISMRMRD::MeasurementInformation m;
    m.patientPosition = "HFS";
    m.protocolName = std::string("t1_fl3d");
    h.measurementInformation = m;
    return h;
}

class Dicom : public ::testing::Test {
protected:
    void SetUp() override {
        if (!dicom::dicom_available()) GTEST_SKIP() << "built without DCMTK";
        if (!have("dcmdump") || !have("dciodvfy")) GTEST_SKIP() << "dcmdump (dcmtk) or dciodvfy (dicom3tools) absent";
        dir_ = fs::temp_directory_path() / ("larmor_dicom_" + std::to_string(::getpid()));
        fs::create_directories(dir_);
    }
    void TearDown() override {
        std::error_code ec;
        if (!dir_.empty()) fs::remove_all(dir_, ec);
    }
    fs::path dir_;
};

// The writer's files pass dciodvfy, and dcmdump shows the header's geometry, identity and pixels.
TEST_F(Dicom, FilesPassDciodvfyAndCarryTheImageHeadersGeometry) {
    const wire::Image im = oblique_image();
    const ISMRMRD::IsmrmrdHeader h = patient_header();
    const dicom::SeriesIdentity series = dicom::series_identity(h, 3, "", "oblique test");
    const std::vector<dicom::DicomFile> files = dicom::dicom_files(im, h, series, 1, "");
    ASSERT_EQ(files.size(), 4u);  // one per slice of the volume
    EXPECT_EQ(series.study_uid, "1.2.826.0.1.3680043.8.498.1");  // the header's
    const auto& hd = im.head;
    const double dx = 240.0 / 96, dy = 160.0 / 64, dz = 20.0 / 4;
    for (size_t k = 0; k < files.size(); ++k) {
        const fs::path f = dir_ / files[k].filename;
        std::ofstream(f, std::ios::binary).write(reinterpret_cast<const char*>(files[k].bytes.data()),
                                                std::streamsize(files[k].bytes.size()));
        const std::string verify = output_of("dciodvfy " + f.string());
        EXPECT_NE(verify.find("MRImage"), std::string::npos) << verify;
        EXPECT_EQ(verify.find("Error"), std::string::npos) << verify;

        const std::string dump = output_of("dcmdump +P 0020,0032 +P 0020,0037 +P 0028,0030 +P 0018,0050 "
                                           "+P 0028,0010 +P 0028,0011 +P 0010,0010 +P 0010,0020 +P 0020,0013 "
                                           "+P 0020,000d +P 0008,0060 +P 0020,0011 +P 0008,103e " + f.string());
        // The centre of the first pixel: the FOV centre sits at pixel (N/2, N/2) and slice k is
        // (k - N_z/2) dz along the slice direction.
        for (int a = 0; a < 3; ++a) {
            const double want = hd.position[a] - 48 * dx * hd.read_dir[a] - 32 * dy * hd.phase_dir[a] +
                                (double(k) - 2) * dz * hd.slice_dir[a];
            const std::vector<double> ipp = numbers(dump, "(0020,0032)");
            ASSERT_EQ(ipp.size(), 3u) << dump;
            EXPECT_NEAR(ipp[a], want, 1e-4) << "axis " << a << ", slice " << k;
        }
        const std::vector<double> iop = numbers(dump, "(0020,0037)");
        ASSERT_EQ(iop.size(), 6u) << dump;
        for (int a = 0; a < 3; ++a) {
            EXPECT_NEAR(iop[a], hd.read_dir[a], 1e-6);
            EXPECT_NEAR(iop[3 + a], hd.phase_dir[a], 1e-6);
        }
        EXPECT_EQ(numbers(dump, "(0028,0030)"), (std::vector<double>{dy, dx}));  // row spacing, column spacing
        EXPECT_EQ(numbers(dump, "(0018,0050)"), std::vector<double>{dz});
        EXPECT_EQ(numbers(dump, "(0028,0010)"), std::vector<double>{64});  // rows = phase encoding
        EXPECT_EQ(numbers(dump, "(0028,0011)"), std::vector<double>{96});
        EXPECT_EQ(text_of(dump, "(0010,0010)"), "Doe^Jane");
        EXPECT_EQ(text_of(dump, "(0010,0020)"), "LARMOR-0001");
        EXPECT_EQ(text_of(dump, "(0008,0060)"), "MR");
        EXPECT_EQ(text_of(dump, "(0020,000d)"), series.study_uid);
        EXPECT_EQ(numbers(dump, "(0020,0013)"), std::vector<double>{double(k + 1)});
        EXPECT_EQ(text_of(dump, "(0008,103e)"), "oblique test");

        // Pixels as they were: dcmdump +L prints the OW values in hex, x fastest.
        const std::string px = output_of("dcmdump +L +P 7fe0,0010 " + f.string());
        const size_t open = px.find("OW ");
        ASSERT_NE(open, std::string::npos) << px;
        std::stringstream values(px.substr(open + 3));
        std::vector<unsigned> got;
        for (std::string v; got.size() < 200 && std::getline(values, v, '\\');) got.push_back(std::stoul(v, nullptr, 16));
        ASSERT_GE(got.size(), 200u);
        for (size_t i = 0; i < 200; ++i) EXPECT_EQ(got[i], 100 * k + 7 * (i % 96) + i / 96) << "pixel " << i;
    }
}

// Float images are scaled to a 4095 peak, and refusals name the problem.
TEST_F(Dicom, FloatImagesAreScaledAndBadImagesRefusedByName) {
    wire::Image im = oblique_image();
    im.head.matrix_size[2] = 1;
    im.head.data_type = ISMRMRD::ISMRMRD_FLOAT;
    im.pixels.assign(96 * 64 * 4, 0);
    const float peak = 0.25f;
    std::memcpy(im.pixels.data() + 4 * 5, &peak, 4);
    const ISMRMRD::IsmrmrdHeader h{};
    const auto files = dicom::dicom_files(im, h, dicom::series_identity(h, 1, "", ""), 1, "");
    ASSERT_EQ(files.size(), 1u);
    const fs::path f = dir_ / files[0].filename;
    std::ofstream(f, std::ios::binary).write(reinterpret_cast<const char*>(files[0].bytes.data()),
                                            std::streamsize(files[0].bytes.size()));
    const std::string verify = output_of("dciodvfy " + f.string());
    EXPECT_EQ(verify.find("Error"), std::string::npos) << verify;
    const std::string px = output_of("dcmdump +L +P 7fe0,0010 " + f.string());
    EXPECT_NE(px.find("0000\\0000\\0000\\0000\\0000\\0fff\\0000"), std::string::npos) << px.substr(0, 200);

    wire::Image bad = im;
    bad.pixels.resize(10);
    try {
        dicom::dicom_files(bad, h, dicom::series_identity(h, 1, "", ""), 1, "");
        FAIL() << "a truncated image was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("image of 10 bytes"), std::string::npos) << e.what();
    }
    bad = im;
    bad.head.field_of_view[0] = 0.f;
    EXPECT_THROW(dicom::dicom_files(bad, h, dicom::series_identity(h, 1, "", ""), 1, ""), std::invalid_argument);
}

// cartesian_dicom through the server and larmor-client --dicom: one valid file per slice, the
// phantom header's patient name in each, a distinct SOP instance UID per file.
TEST_F(Dicom, ChainThroughServerAndClientWritesValidFiles) {
    if (!fs::exists(test::client_binary())) GTEST_SKIP() << "larmor-client not built";
    phantom::PhantomSpec s;
    s.nx = s.ny = 64;
    s.coils = 4;
    s.slices = 3;
    const std::string data = (dir_ / "phantom.h5").string();
    phantom::write_dataset(s, data);
    test::ServerProcess server({"--backend", "cpu"});
    const auto r = test::run_process({test::client_binary(), "-a", "127.0.0.1", "-p", std::to_string(server.port()), "-f",
                                      data, "-c", "cartesian_dicom", "-o", (dir_ / "out.h5").string(), "--dicom",
                                      (dir_ / "dcm").string()},
                                     120s);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("3 DICOM files"), std::string::npos) << r.output;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir_ / "dcm")) files.push_back(e.path());
    ASSERT_EQ(files.size(), 3u);
    std::vector<std::string> uids;
    for (const fs::path& f : files) {
        const std::string verify = output_of("dciodvfy " + f.string());
        EXPECT_EQ(verify.find("Error"), std::string::npos) << f << "\n" << verify;
        const std::string dump = output_of("dcmdump +P 0010,0010 +P 0008,0018 " + f.string());
        EXPECT_EQ(text_of(dump, "(0010,0010)"), "Shepp-Logan phantom") << dump;
        uids.push_back(text_of(dump, "(0008,0018)"));
    }
    std::sort(uids.begin(), uids.end());
    EXPECT_EQ(std::unique(uids.begin(), uids.end()), uids.end()) << "SOP instance UIDs repeat";
}

// Gadgetron's own clients (HEAD and v4.1) receive the same chain's DICOM_WITHNAME messages and save
// them (into their working directory, with an _attrib.xml each): the files pass dciodvfy.
TEST_F(Dicom, GadgetronClientsSaveTheFiles) {
    if (!test::gadgetron_client_available()) GTEST_SKIP() << "../shared/tools/gadgetron-client absent";
    const test::GadgetronClients clients = test::build_gadgetron_clients();
    phantom::PhantomSpec s;
    s.nx = s.ny = 64;
    s.coils = 4;
    s.slices = 2;
    const std::string data = (dir_ / "phantom.h5").string();
    phantom::write_dataset(s, data);
    test::ServerProcess server({"--backend", "cpu"});
    for (const std::string& client : {clients.head, clients.v41}) {
        const fs::path out = dir_ / fs::path(client).filename();
        fs::create_directories(out);
        // The clients write DICOM into the current directory; their connect race (support/gadgetron_client.h)
        // gets one retry.
        const std::string cmd = "cd '" + out.string() + "' && HDF5_USE_FILE_LOCKING=FALSE '" + client +
                                "' -a 127.0.0.1 -p " + std::to_string(server.port()) + " -f '" + data +
                                "' -c cartesian_dicom -o out.h5";
        test::ProcessResult r = test::run_process({"bash", "-c", cmd}, 120s);
        if (r.exit_code != 0) r = test::run_process({"bash", "-c", "rm -f '" + out.string() + "'/*; " + cmd}, 120s);
        ASSERT_EQ(r.exit_code, 0) << client << "\n" << r.output;
        size_t dcm = 0;
        for (const auto& e : fs::directory_iterator(out)) {
            if (e.path().extension() != ".dcm") continue;
            ++dcm;
            const std::string verify = output_of("dciodvfy '" + e.path().string() + "'");
            EXPECT_EQ(verify.find("Error"), std::string::npos) << e.path() << "\n" << verify;
        }
        EXPECT_EQ(dcm, 2u) << client << "\n" << r.output;
    }
}

// Gadgetron's chains end FloatToUShortGadget -> DicomFinishGadget: Larmor reads them as image_finish
// (unsigned short) -> dicom_finish, and adds the image stage when a chain lacks it.
TEST(DicomXml, GadgetronDicomFinishGadgetTranslates) {
    const std::string xml = R"(<?xml version="1.0"?>
<gadgetronStreamConfiguration xmlns="http://gadgetron.sf.net/gadgetron">
  <gadget><name>Acc</name><dll>gadgetron_mricore</dll><classname>AccumulatorGadget</classname></gadget>
  <gadget><name>FFT</name><dll>gadgetron_mricore</dll><classname>FFTGadget</classname></gadget>
  <gadget><name>Combine</name><dll>gadgetron_mricore</dll><classname>CombineGadget</classname></gadget>
  <gadget><name>Extract</name><dll>gadgetron_mricore</dll><classname>ExtractGadget</classname></gadget>
  <gadget><name>AutoScale</name><dll>gadgetron_mricore</dll><classname>FloatToUShortGadget</classname></gadget>
  <gadget><name>DicomFinish</name><dll>gadgetron_dicom</dll><classname>DicomFinishGadget</classname></gadget>
</gadgetronStreamConfiguration>)";
    const config::Chain c = translate_gadgetron_xml(xml, "test.xml");
    ASSERT_GE(c.gadget_size(), 2);
    const auto& last = c.gadget(c.gadget_size() - 1);
    const auto& before = c.gadget(c.gadget_size() - 2);
    EXPECT_TRUE(last.has_dicom_finish());
    ASSERT_TRUE(before.has_image_finish());
    EXPECT_EQ(before.image_finish().pixel_type(), config::PIXEL_USHORT);
}

}  // namespace
}  // namespace larmor
