// The status page's thumbnails (server/thumbnail.h): a BMP a browser can show, box-averaged to at most
// the requested side, windowed so the picture's range is used, and nothing for an unreadable image.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "server/thumbnail.h"

namespace larmor::server {
namespace {

std::string decoded(const std::string& uri) {
    const std::string prefix = "data:image/bmp;base64,";
    EXPECT_EQ(uri.compare(0, prefix.size(), prefix), 0) << uri.substr(0, 40);
    const std::string k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    uint32_t bits = 0;
    int n = 0;
    for (size_t i = prefix.size(); i < uri.size() && uri[i] != '='; ++i) {
        bits = bits << 6 | uint32_t(k.find(uri[i]));
        if ((n += 6) >= 8) out.push_back(char((bits >> (n -= 8)) & 0xff));
    }
    return out;
}

int32_t le32(const std::string& s, size_t at) {
    uint32_t v = 0;
    for (int b = 3; b >= 0; --b) v = v << 8 | uint8_t(s[at + b]);
    return int32_t(v);
}

wire::Image ramp(uint16_t nx, uint16_t ny) {
    wire::Image im;
    im.head.data_type = 5;  // float
    im.head.matrix_size[0] = nx, im.head.matrix_size[1] = ny, im.head.matrix_size[2] = 1;
    im.head.channels = 1;
    im.pixels.resize(size_t(nx) * ny * 4);
    for (size_t i = 0; i < size_t(nx) * ny; ++i) {
        const float v = float(i % nx);  // brighter to the right
        std::memcpy(im.pixels.data() + 4 * i, &v, 4);
    }
    return im;
}

TEST(Thumbnail, IsABmpOfTheReducedImageWindowedToItsRange) {
    const std::string bmp = decoded(thumbnail_data_uri(ramp(200, 100), 96));
    ASSERT_GT(bmp.size(), 54u);
    EXPECT_EQ(bmp.substr(0, 2), "BM");
    EXPECT_EQ(le32(bmp, 2), int32_t(bmp.size()));
    // 200 x 100 by boxes of 3: 67 x 34, rows top-down (negative height), 8 bits with a palette.
    EXPECT_EQ(le32(bmp, 18), 67);
    EXPECT_EQ(le32(bmp, 22), -34);
    EXPECT_EQ(uint8_t(bmp[28]), 8);
    const size_t pixels = size_t(le32(bmp, 10)), stride = 68;
    ASSERT_EQ(bmp.size(), pixels + stride * 34);
    const uint8_t left = uint8_t(bmp[pixels + 0]), right = uint8_t(bmp[pixels + 66]);
    EXPECT_LT(left, 10);
    EXPECT_GT(right, 245);
    EXPECT_EQ(uint8_t(bmp[pixels + 67]), 0);  // row padding
}

TEST(Thumbnail, NothingForAnImageItCannotRead) {
    wire::Image im = ramp(16, 16);
    im.head.data_type = 42;
    EXPECT_EQ(thumbnail_data_uri(im), "");
    im = ramp(16, 16);
    im.pixels.resize(10);
    EXPECT_EQ(thumbnail_data_uri(im), "");
}

}  // namespace
}  // namespace larmor::server
