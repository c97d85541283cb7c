#include "tests/support/nhlbi_encoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace larmor::test {
namespace {

float max_abs(const std::vector<float>& v) {
    float m = 0;
    for (float x : v) m = std::max(m, std::abs(x));
    return m;
}

// One ulp below the largest magnitude: the float rounding the encoder's product may add.
float ulp_at(float m) { return m - std::nextafter(m, 0.0f); }

}  // namespace

std::vector<uint8_t> nhlbi_pack(const std::vector<int64_t>& ints, float scale, unsigned bits, uint64_t elements) {
    const uint64_t total_bits = uint64_t{bits} * ints.size();
    std::vector<uint8_t> out(13 + (total_bits + 7) / 8, 0);
    std::memcpy(out.data(), &elements, 8);
    std::memcpy(out.data() + 8, &scale, 4);
    out[12] = static_cast<uint8_t>(bits);
    const uint64_t mask = (uint64_t{1} << bits) - 1;
    uint64_t bit = 0;
    for (int64_t v : ints) {
        const uint64_t u = static_cast<uint64_t>(v) & mask;  // two's complement of width `bits`
        for (unsigned k = 0; k < bits; ++k, ++bit)
            if ((u >> k) & 1) out[13 + bit / 8] |= static_cast<uint8_t>(1u << (bit % 8));
    }
    return out;
}

NhlbiEncoding nhlbi_encode(const std::vector<float>& values, float scale, unsigned bits) {
    NhlbiEncoding e;
    e.scale = scale;
    e.bits = bits;
    const int64_t top = (int64_t{1} << (bits - 1)) - 1;
    std::vector<int64_t> ints;
    for (float v : values) {
        const int64_t i = static_cast<int64_t>(std::round(v * scale));
        if (i > top || i < -top - 1)
            throw std::invalid_argument("value " + std::to_string(v) + " does not fit " + std::to_string(bits) + " bits");
        ints.push_back(i);
    }
    e.bytes = nhlbi_pack(ints, scale, bits, values.size());
    e.tolerance = 0.5f / std::abs(scale) + ulp_at(max_abs(values));
    return e;
}

NhlbiEncoding nhlbi_encode_precision(const std::vector<float>& values, unsigned bits) {
    const float m = max_abs(values);
    const uint64_t top = (uint64_t{1} << (bits - 1)) - 1;
    // The largest scale whose rounding of the largest value still fits.
    float scale = float(top) / m;
    for (uint64_t i = 1; static_cast<uint64_t>(std::round(m * scale)) > top; ++i) scale = float(top - i) / m;
    return nhlbi_encode(values, scale, bits);
}

NhlbiEncoding nhlbi_encode_tolerance(const std::vector<float>& values, float tolerance) {
    const float m = max_abs(values);
    const float scale = 0.5f / (tolerance - ulp_at(m));
    uint64_t top = static_cast<uint64_t>(std::ceil(scale * m));
    unsigned bits = 1;  // the sign
    while (top) {
        ++bits;
        top >>= 1;
    }
    return nhlbi_encode_precision(values, bits);
}

}  // namespace larmor::test
