#pragma once
// An NHLBI compressed-float encoder written for the tests from the format's specification (Gadgetron's
// gadgets/mri_core/NHLBICompression.h: 13-byte header u64 elements, f32 scale, u8 bits; then the
// values as `bits`-wide two's complement integers round(value * scale), packed from the least
// significant bit of the first byte upwards, ceil(bits * elements / 8) bytes). Independent of
// wire/nhlbi.cpp, so the decoder is checked against the format and not against itself.
#include <cstdint>
#include <vector>

namespace larmor::test {

struct NhlbiEncoding {
    std::vector<uint8_t> bytes;  // header + packed integers: the buffer as it goes on the wire
    float scale = 0;
    unsigned bits = 0;
    float tolerance = 0;         // the largest error the encoding allows: 0.5 / |scale| + one ulp of the max
};

// Packs integers (each must fit `bits`) with the given header values, as they are.
std::vector<uint8_t> nhlbi_pack(const std::vector<int64_t>& ints, float scale, unsigned bits, uint64_t elements);

// The encoder's precision mode (gadgetron_ismrmrd_client -P bits): the largest magnitude maps to the
// largest integer 2^(bits-1) - 1.
NhlbiEncoding nhlbi_encode_precision(const std::vector<float>& values, unsigned bits);

// Its tolerance mode (-T): the fewest bits that hold the largest value scaled by 0.5 / tolerance (less
// the float spacing there) and a sign, then the largest scale those bits allow, as in precision mode.
NhlbiEncoding nhlbi_encode_tolerance(const std::vector<float>& values, float tolerance);

// Encodes with a given scale and width (any sign of scale: Gadgetron 4.1 may send a negative one).
NhlbiEncoding nhlbi_encode(const std::vector<float>& values, float scale, unsigned bits);

}  // namespace larmor::test
