// The NHLBI compressed-float decoder (wire/nhlbi.h) against the format: hand-packed bytes, every
// integer width, and the format's own encoder in both of its modes (tests/support/nhlbi_encoder.h,
// written from the specification) to the tolerance the encoding states.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/nhlbi_encoder.h"
#include "wire/nhlbi.h"

namespace larmor {
namespace {

using test::NhlbiEncoding;

std::vector<float> decode(const std::vector<uint8_t>& buffer, uint64_t elements) {
    std::vector<float> out(elements, std::numeric_limits<float>::quiet_NaN());
    wire::decode_nhlbi(buffer.data(), buffer.size(), elements, out.data());
    return out;
}

std::string error_of(const std::vector<uint8_t>& buffer, uint64_t elements) {
    std::vector<float> out(elements + 1);
    try {
        wire::decode_nhlbi(buffer.data(), buffer.size(), elements, out.data());
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    ADD_FAILURE() << "the buffer was accepted";
    return {};
}

// Interleaved re/im of complex Gaussian samples with a wide dynamic range, as raw k-space has.
std::vector<float> kspace_like(size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = g(rng) * (i % 97 == 0 ? 300.0f : 2.0f);
    return v;
}

float max_error(const std::vector<float>& a, const std::vector<float>& b) {
    float m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
    return m;
}

TEST(Nhlbi, HandPackedBytesDecodeAsTheFormatSays) {
    // 1, -1, 3 as 3-bit integers, scale 1: 001, 111, 011 from bit 0 up -> 0b1111'1001, then bit 8 = 0.
    std::vector<uint8_t> b = {3, 0, 0, 0, 0, 0, 0, 0};  // elements
    const float scale = 1.0f;
    b.resize(12);
    std::memcpy(b.data() + 8, &scale, 4);
    b.push_back(3);  // bits
    b.push_back(0xF9);
    b.push_back(0x00);
    EXPECT_EQ(decode(b, 3), (std::vector<float>{1.0f, -1.0f, 3.0f}));
    // The same with scale 0.5: values are integer / scale.
    const float half = 0.5f;
    std::memcpy(b.data() + 8, &half, 4);
    EXPECT_EQ(decode(b, 3), (std::vector<float>{2.0f, -2.0f, 6.0f}));
}

TEST(Nhlbi, EveryWidthDecodesItsExtremesAndOddCounts) {
    for (unsigned bits = 1; bits <= wire::kNhlbiMaxBits; ++bits) {
        const int64_t top = (int64_t{1} << (bits - 1)) - 1, bottom = -top - 1;
        // Seven values: the packed block ends mid-byte and the last values sit in its final bytes.
        std::vector<int64_t> ints = {bottom, top, 0, -1, top / 2, bottom / 3, bottom};
        if (bits == 1) ints = {-1, 0, -1, 0, 0, -1, -1};
        const auto bytes = test::nhlbi_pack(ints, 1.0f, bits, ints.size());
        ASSERT_EQ(bytes.size(), 13 + (bits * ints.size() + 7) / 8) << bits;
        const auto got = decode(bytes, ints.size());
        for (size_t i = 0; i < ints.size(); ++i)
            EXPECT_EQ(got[i], static_cast<float>(ints[i])) << bits << " bits, value " << i;
    }
}

TEST(Nhlbi, PrecisionModeRoundTripsWithinItsTolerance) {
    const std::vector<float> v = kspace_like(2 * 512 * 8 + 6, 1);
    for (unsigned bits : {8u, 12u, 16u, 24u, 31u}) {
        const NhlbiEncoding e = test::nhlbi_encode_precision(v, bits);
        const auto got = decode(e.bytes, v.size());
        const float err = max_error(got, v);
        EXPECT_LE(err, e.tolerance) << bits << " bits";
        EXPECT_GT(err, 0.0f) << bits << " bits: lossy at this range, so an exact result would be suspicious";
    }
}

TEST(Nhlbi, ToleranceModeKeepsTheRequestedTolerance) {
    const std::vector<float> v = kspace_like(2 * 384 * 14, 2);
    for (float tol : {1.0f, 0.1f, 0.01f, 0.001f}) {
        const NhlbiEncoding e = test::nhlbi_encode_tolerance(v, tol);
        EXPECT_LE(e.tolerance, tol);
        EXPECT_LE(max_error(decode(e.bytes, v.size()), v), tol) << "tolerance " << tol << ", " << e.bits << " bits";
    }
}

TEST(Nhlbi, NegativeScaleOfGadgetron41) {
    // 4.1 divides by the signed largest element, so its scale is negative when that one is.
    const std::vector<float> v = {-8.0f, 1.0f, 2.5f, -3.25f};
    const NhlbiEncoding e = test::nhlbi_encode(v, -100.0f, 12);
    EXPECT_LE(max_error(decode(e.bytes, v.size()), v), e.tolerance);
}

TEST(Nhlbi, BrokenBuffersNameTheOffendingValue) {
    const std::vector<float> v = {1.0f, -2.0f, 3.0f, 4.0f};
    const auto good = test::nhlbi_encode(v, 100.0f, 12).bytes;
    EXPECT_EQ(decode(good, 4).size(), 4u);

    EXPECT_NE(error_of({1, 2, 3}, 4).find("3 bytes is shorter than its 13-byte header"), std::string::npos);
    auto b = good;
    b[12] = 0;
    EXPECT_NE(error_of(b, 4).find("bits 0 outside 1..31"), std::string::npos) << error_of(b, 4);
    b[12] = 32;
    EXPECT_NE(error_of(b, 4).find("bits 32"), std::string::npos);
    for (float bad : {0.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
        b = good;
        std::memcpy(b.data() + 8, &bad, 4);
        EXPECT_NE(error_of(b, 4).find("zero or not finite"), std::string::npos) << bad;
    }
    EXPECT_NE(error_of(good, 6).find("holds 4 floats, the acquisition header says 6"), std::string::npos)
        << error_of(good, 6);
    b = good;
    b.push_back(0);
    EXPECT_NE(error_of(b, 4).find("buffer of 20 bytes: 4 floats of 12 bits need 13 + 6"), std::string::npos)
        << error_of(b, 4);
    b.resize(good.size() - 1);
    EXPECT_NE(error_of(b, 4).find("need 13 + 6"), std::string::npos);
}

TEST(Nhlbi, PayloadSizeIsExactBeyondFloatPrecision) {
    uint64_t bytes = 0;
    ASSERT_TRUE(wire::nhlbi_payload_bytes((uint64_t{1} << 24) + 1, 1, bytes));
    EXPECT_EQ(bytes, (uint64_t{1} << 21) + 1);
    EXPECT_FALSE(wire::nhlbi_payload_bytes(UINT64_MAX, 31, bytes));
    EXPECT_EQ(wire::nhlbi_max_buffer_bytes(8), 13u + 31u);
}

}  // namespace
}  // namespace larmor
