// An anatomical reference streamed ahead of the raw data, as a user runs it: larmor-phantom
// --reference-image writes the true object as <group>/reference, larmor-client --send-images reference
// sends it as IMAGE(1022) after the header, and larmor-server hands it down the chain (passthrough
// returns it to the client untouched).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <ismrmrd/dataset.h>
#include <ismrmrd/ismrmrd.h>
#include <ismrmrd/meta.h>

#include "tests/support/server_process.h"
#include "tools/phantom/phantom.h"

namespace larmor {
namespace {

namespace fs = std::filesystem;

std::string phantom_binary() { return std::string(LARMOR_BINARY_DIR) + "/tools/larmor-phantom"; }

// The spec `larmor-phantom --matrix <n> --coils 2 --fov 240` writes (defaults: 2D, 5 mm slice, seed 1).
phantom::PhantomSpec spec_2d(int n) {
    phantom::PhantomSpec s;
    s.nx = s.ny = n;
    s.coils = 2;
    s.fov_mm[0] = s.fov_mm[1] = 240.0;
    return s;
}

// Everything of an image as stored, for comparing what was sent with what came back.
struct StoredImage {
    ISMRMRD::ISMRMRD_ImageHeader head{};
    std::string meta;
    std::vector<float> pixels;
};

StoredImage read_float_image(const std::string& path, const std::string& group, const std::string& var,
                             uint32_t index) {
    ISMRMRD::Dataset d(path.c_str(), group.c_str(), false);
    ISMRMRD::Image<float> im;
    d.readImage(var, index, im);
    StoredImage out;
    out.head = im.getHead();
    im.getAttributeString(out.meta);
    out.pixels.assign(im.getDataPtr(), im.getDataPtr() + im.getNumberOfDataElements());
    return out;
}

uint32_t count_images(const std::string& path, const std::string& group, const std::string& var) {
    ISMRMRD::Dataset d(path.c_str(), group.c_str(), false);
    return d.getNumberOfImages(var);
}

class ReferenceImage : public ::testing::Test {
protected:
    void SetUp() override {
        for (const std::string& bin : {phantom_binary(), test::client_binary(), test::server_binary()})
            if (::access(bin.c_str(), X_OK) != 0) GTEST_SKIP() << bin << " not built";
        std::string tmpl = (fs::temp_directory_path() / "larmor_reference_image_test.XXXXXX").string();
        ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override {
        std::error_code ec;
        if (!dir_.empty()) fs::remove_all(dir_, ec);
    }
    std::string path(const std::string& name) const { return (dir_ / name).string(); }

    test::ProcessResult phantom(std::vector<std::string> args) {
        args.insert(args.begin(), phantom_binary());
        return test::run_process(args, std::chrono::seconds(120));
    }

    // The header, meta and values every reference image must have, against the spec's true object.
    static void expect_reference(const StoredImage& im, const phantom::PhantomSpec& spec) {
        const int nz = spec.dims == 3 ? spec.nz : 1;
        // Packed header fields are copied (int(), float()) before EXPECT_EQ binds references to them.
        EXPECT_EQ(int(im.head.data_type), ISMRMRD::ISMRMRD_FLOAT);
        EXPECT_EQ(int(im.head.image_type), ISMRMRD::ISMRMRD_IMTYPE_MAGNITUDE);
        EXPECT_EQ(int(im.head.matrix_size[0]), spec.nx);
        EXPECT_EQ(int(im.head.matrix_size[1]), spec.ny);
        EXPECT_EQ(int(im.head.matrix_size[2]), nz);
        EXPECT_EQ(int(im.head.channels), 1);
        for (int a = 0; a < 3; ++a)
            EXPECT_FLOAT_EQ(float(im.head.field_of_view[a]), float(spec.fov_mm[a])) << "axis " << a;
        EXPECT_EQ(int(im.head.image_index), 1);
        EXPECT_EQ(int(im.head.image_series_index), 0);
        EXPECT_EQ(int(im.head.repetition), 0);
        EXPECT_EQ(int(im.head.slice), 0);
        ISMRMRD::MetaContainer meta;
        ISMRMRD::deserialize(im.meta.c_str(), meta);
        EXPECT_STREQ(meta.as_str("LarmorRole"), "AnatomicalReference");
        EXPECT_STREQ(meta.as_str("ImageComment"), "anatomical reference (larmor-phantom truth)");

        const std::vector<double> truth = phantom::Phantom(spec).image(0, 3);
        ASSERT_EQ(im.pixels.size(), truth.size());
        size_t differ = 0;
        for (size_t i = 0; i < truth.size(); ++i) {
            EXPECT_GE(im.pixels[i], 0.0f);
            // Float of the truth; overlapping ellipses cancel to about -1e-17, written as 0.
            if (im.pixels[i] != static_cast<float>(std::max(0.0, truth[i]))) ++differ;
        }
        EXPECT_EQ(differ, 0u) << "of " << truth.size() << " pixels";
        // The flat brain (0.2) at the centre, ellipse 5 (0.3) at y = +0.35 of the half-FOV (2D).
        if (spec.dims == 2) {
            EXPECT_NEAR(im.pixels[size_t(spec.ny / 2) * spec.nx + spec.nx / 2], 0.2f, 1e-6f);
            const int y_top = spec.ny / 2 + static_cast<int>(0.35 * spec.ny / 2);
            EXPECT_NEAR(im.pixels[size_t(y_top) * spec.nx + spec.nx / 2], 0.3f, 1e-6f);
        }
    }

    fs::path dir_;
};

TEST_F(ReferenceImage, PhantomWritesTheTrueObjectAsReference2D) {
    const std::string file = path("ref2d.h5");
    const auto w = phantom({"-o", file, "--matrix", "48", "--coils", "2", "--fov", "240", "--reference-image"});
    ASSERT_EQ(w.exit_code, 0) << w.output;
    EXPECT_NE(w.output.find("in /dataset/reference"), std::string::npos) << w.output;
    ASSERT_EQ(count_images(file, "dataset", "reference"), 1u);
    expect_reference(read_float_image(file, "dataset", "reference", 0), spec_2d(48));
    // The acquisitions are as without the flag.
    ISMRMRD::Dataset d(file.c_str(), "dataset", false);
    EXPECT_EQ(d.getNumberOfAcquisitions(), 48u);
}

TEST_F(ReferenceImage, PhantomWritesTheTrueObjectAsReference3D) {
    const std::string file = path("ref3d.h5");
    const auto w = phantom({"-o", file, "--dims", "3", "--matrix", "16", "--matrix-z", "12", "--coils", "1", "--fov",
                            "240", "--reference-image"});
    ASSERT_EQ(w.exit_code, 0) << w.output;
    phantom::PhantomSpec spec = spec_2d(16);
    spec.dims = 3;
    spec.coils = 1;
    spec.nz = 12;
    spec.fov_mm[2] = 240.0 * 12 / 16;
    ASSERT_EQ(count_images(file, "dataset", "reference"), 1u);
    expect_reference(read_float_image(file, "dataset", "reference", 0), spec);
}

TEST_F(ReferenceImage, PhantomRefusesReferenceForMultiSliceAndUltrasound) {
    const auto slices = phantom({"-o", path("ms.h5"), "--matrix", "16", "--slices", "3", "--reference-image"});
    EXPECT_NE(slices.exit_code, 0);
    EXPECT_NE(slices.output.find("--reference-image"), std::string::npos) << slices.output;
    EXPECT_NE(slices.output.find("--slices 3"), std::string::npos) << slices.output;
    EXPECT_FALSE(fs::exists(path("ms.h5")));

    const auto us = phantom({"-o", path("us.h5"), "--ultrasound", "--reference-image"});
    EXPECT_NE(us.exit_code, 0);
    EXPECT_NE(us.output.find("--reference-image"), std::string::npos) << us.output;
    EXPECT_FALSE(fs::exists(path("us.h5")));
}

TEST_F(ReferenceImage, PassthroughReturnsTheSentReferenceUnchanged) {
    const std::string in = path("in.h5");
    const auto w = phantom({"-o", in, "--matrix", "32", "--coils", "2", "--fov", "240", "--reference-image"});
    ASSERT_EQ(w.exit_code, 0) << w.output;
    const StoredImage sent = read_float_image(in, "dataset", "reference", 0);

    test::ServerProcess server;
    auto client = [&](const std::string& chain, const std::string& out) {
        return test::run_process({test::client_binary(), "-a", "127.0.0.1", "-p", std::to_string(server.port()), "-f",
                                  in, "-c", chain, "--send-images", "reference", "-o", out, "-G", "recon"},
                                 std::chrono::seconds(120));
    };
    auto expect_same = [&](const StoredImage& back) {
        // Header byte for byte (attribute length included), meta text and every pixel.
        EXPECT_EQ(0, std::memcmp(&back.head, &sent.head, sizeof sent.head));
        EXPECT_EQ(back.meta, sent.meta);
        ASSERT_EQ(back.pixels.size(), sent.pixels.size());
        EXPECT_EQ(0, std::memcmp(back.pixels.data(), sent.pixels.data(), sent.pixels.size() * sizeof(float)));
        expect_reference(back, spec_2d(32));
    };

    // passthrough hands the image to the end of the chain, which sends it back; it makes no image of
    // the acquisitions (they reach the end unused).
    const std::string out = path("passthrough.h5");
    const auto r = client("passthrough", out);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("sent 1 images and 32 acquisitions ("), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("received 1 images"), std::string::npos) << r.output;
    ASSERT_TRUE(fs::exists(out)) << r.output;
    ASSERT_EQ(count_images(out, "recon", "image_0"), 1u);
    expect_same(read_float_image(out, "recon", "image_0", 0));

    // A reconstructing chain passes the reference on as well and still makes the acquisitions' image
    // (cartesian: series 1).
    const std::string recon = path("cartesian.h5");
    const auto c = client("cartesian", recon);
    EXPECT_EQ(c.exit_code, 0) << c.output;
    EXPECT_NE(c.output.find("received 2 images"), std::string::npos) << c.output;
    ASSERT_TRUE(fs::exists(recon)) << c.output;
    ASSERT_EQ(count_images(recon, "recon", "image_0"), 1u);
    expect_same(read_float_image(recon, "recon", "image_0", 0));
    ASSERT_EQ(count_images(recon, "recon", "image_1"), 1u);
    const StoredImage image = read_float_image(recon, "recon", "image_1", 0);
    EXPECT_EQ(int(image.head.matrix_size[0]), 32);
    EXPECT_EQ(int(image.head.matrix_size[1]), 32);
    EXPECT_EQ(int(image.head.matrix_size[2]), 1);
}

TEST_F(ReferenceImage, SendImagesOfAMissingVariableFailsBeforeConnecting) {
    const std::string in = path("in.h5");
    const auto w = phantom({"-o", in, "--matrix", "16", "--coils", "1"});
    ASSERT_EQ(w.exit_code, 0) << w.output;
    // Port 1: nothing listens there, so reaching the network would fail with another message.
    const auto r = test::run_process(
        {test::client_binary(), "-a", "127.0.0.1", "-p", "1", "-f", in, "--send-images", "nosuchvar"},
        std::chrono::seconds(60));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.output.find("no image variable 'nosuchvar' in group '/dataset' of '" + in + "'"), std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("cannot connect"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("HDF5"), std::string::npos) << "library noise: " << r.output;
}

}  // namespace
}  // namespace larmor
