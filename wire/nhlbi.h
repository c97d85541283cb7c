#pragma once
// Decoder of NHLBI-compressed acquisition data (ISMRMRD flag 54, ACQ_COMPRESSION2), the lossy
// fixed-point format gadgetron_ismrmrd_client uploads with `-P bits` or `-T tolerance`. The facts of
// the format, from Gadgetron's gadgets/mri_core/NHLBICompression.h and CompressedFloatBuffer.cpp
// (HEAD 846ed3fb5; v4.1 writes the same bytes):
//
//   header, 13 bytes, packed, little-endian:
//     u64 elements   number of floats (an acquisition: 2 * number_of_samples * active_channels,
//                    the complex samples as interleaved re, im, channel-major like the plain data)
//     f32 scale      value = integer / scale (v4.1 may send a negative scale: it divides by the
//                    signed largest element)
//     u8  bits       width of each integer, two's complement
//   then ceil(bits * elements / 8) bytes: integer i occupies bits [i*bits, (i+1)*bits) of this
//   block, counted from the least significant bit of byte 0 upwards (the encoder ORs each value
//   into little-endian 64-bit words).
//
// The encoder rounds value * scale to the nearest integer, so every decoded value lies within
// 0.5 / |scale| of the original (plus the float rounding of the encoder's own product; HEAD's
// CompressedFloatBuffer adds one ulp of the largest value to its stated tolerance).
#include <cstddef>
#include <cstdint>

namespace larmor::wire {

constexpr size_t kNhlbiHeaderBytes = 13;
// Widths the format can carry: Gadgetron's encoder refuses more than 31 bits (its masks are 32-bit).
constexpr unsigned kNhlbiMaxBits = 31;

struct NhlbiHeader {
    uint64_t elements = 0;
    float scale = 0;
    uint8_t bits = 0;
};

// Bytes of packed integers that follow the header: ceil(bits * elements / 8), exactly (Gadgetron
// computes it in float, which agrees below 2^24 bits). Returns false when the product overflows.
bool nhlbi_payload_bytes(uint64_t elements, unsigned bits, uint64_t& bytes);

// The largest whole buffer (header included) a valid encoding of `elements` floats can have.
uint64_t nhlbi_max_buffer_bytes(uint64_t elements);

// Reads and checks the header of a buffer of `size` bytes that should hold `expected_elements`
// floats. Throws std::invalid_argument naming the offending value: a buffer shorter than the header,
// a width outside 1..31, a scale that is zero or not finite, an element count other than expected, or
// a size other than the header plus the packed integers.
NhlbiHeader parse_nhlbi_header(const uint8_t* buffer, size_t size, uint64_t expected_elements);

// Decodes a whole buffer (header included) into out[0 .. expected_elements). Throws as
// parse_nhlbi_header; writes nothing then.
void decode_nhlbi(const uint8_t* buffer, size_t size, uint64_t expected_elements, float* out);

}  // namespace larmor::wire
