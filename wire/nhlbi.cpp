// NHLBI compressed-float decoder (format described in nhlbi.h).
#include "wire/nhlbi.h"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace larmor::wire {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the NHLBI bit stream is read as little-endian words");

// The 64 bits starting at byte `at` of a block of `size` bytes, bytes past its end read as zero.
inline uint64_t load_word(const uint8_t* block, uint64_t size, uint64_t at) {
    uint64_t w = 0;
    if (at + sizeof w <= size) {
        std::memcpy(&w, block + at, sizeof w);
    } else if (at < size) {
        std::memcpy(&w, block + at, static_cast<size_t>(size - at));
    }
    return w;
}

}  // namespace

bool nhlbi_payload_bytes(uint64_t elements, unsigned bits, uint64_t& bytes) {
    uint64_t total_bits = 0;
    if (__builtin_mul_overflow(elements, uint64_t{bits}, &total_bits)) return false;
    bytes = total_bits / 8 + (total_bits % 8 != 0);
    return true;
}

uint64_t nhlbi_max_buffer_bytes(uint64_t elements) {
    uint64_t bytes = 0;
    if (!nhlbi_payload_bytes(elements, kNhlbiMaxBits, bytes) || bytes > UINT64_MAX - kNhlbiHeaderBytes)
        return UINT64_MAX;
    return kNhlbiHeaderBytes + bytes;
}

NhlbiHeader parse_nhlbi_header(const uint8_t* buffer, size_t size, uint64_t expected_elements) {
    if (size < kNhlbiHeaderBytes)
        throw std::invalid_argument("NHLBI buffer of " + std::to_string(size) + " bytes is shorter than its " +
                                    std::to_string(kNhlbiHeaderBytes) + "-byte header");
    NhlbiHeader h;
    std::memcpy(&h.elements, buffer, 8);
    std::memcpy(&h.scale, buffer + 8, 4);
    h.bits = buffer[12];
    if (h.bits < 1 || h.bits > kNhlbiMaxBits)
        throw std::invalid_argument("NHLBI buffer: bits " + std::to_string(h.bits) + " outside 1.." + std::to_string(kNhlbiMaxBits));
    if (!std::isfinite(h.scale) || h.scale == 0.0f)
        throw std::invalid_argument("NHLBI buffer: scale " + std::to_string(h.scale) + " is zero or not finite");
    if (h.elements != expected_elements)
        throw std::invalid_argument("NHLBI buffer holds " + std::to_string(h.elements) + " floats, the acquisition header says " +
                                    std::to_string(expected_elements) + " (2 x samples x channels)");
    uint64_t payload = 0;
    if (!nhlbi_payload_bytes(h.elements, h.bits, payload) || payload != size - kNhlbiHeaderBytes)
        throw std::invalid_argument("NHLBI buffer of " + std::to_string(size) + " bytes: " + std::to_string(h.elements) + " floats of " +
                                    std::to_string(h.bits) + " bits need " + std::to_string(kNhlbiHeaderBytes) + " + " + std::to_string(payload));
    return h;
}

void decode_nhlbi(const uint8_t* buffer, size_t size, uint64_t expected_elements, float* out) {
    const NhlbiHeader h = parse_nhlbi_header(buffer, size, expected_elements);
    const uint8_t* block = buffer + kNhlbiHeaderBytes;
    const uint64_t block_size = size - kNhlbiHeaderBytes;
    const unsigned bits = h.bits;
    const uint64_t mask = (uint64_t{1} << bits) - 1;
    const uint64_t sign = uint64_t{1} << (bits - 1);
    // A value starts at most 7 bits into its first byte and is at most 31 bits wide, so one 64-bit
    // load from that byte always holds it whole.
    uint64_t bit = 0;
    for (uint64_t i = 0; i < h.elements; ++i, bit += bits) {
        const uint64_t raw = (load_word(block, block_size, bit >> 3) >> (bit & 7)) & mask;
        // Two's complement of width `bits`.
        const int64_t v = (raw & sign) ? static_cast<int64_t>(raw) - static_cast<int64_t>(mask) - 1
                                       : static_cast<int64_t>(raw);
        // As the format's own decoder: the integer converted to float, then divided in float.
        out[i] = static_cast<float>(v) / h.scale;
    }
}

}  // namespace larmor::wire
