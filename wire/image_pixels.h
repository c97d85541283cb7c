#pragma once
// Reading the pixels of a wire image whatever its ISMRMRD data_type, for what displays or re-encodes
// them: larmor-client's PNGs, the server's status-page thumbnails, the DICOM writer.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace larmor::wire {

// Bytes per pixel of ISMRMRD data_type (1 ushort ... 8 complex double); 0 for an unknown type.
size_t pixel_bytes(uint16_t data_type);

// Pixel i as displayed: the number itself for real types, the magnitude for complex ones. Throws
// std::invalid_argument naming an unknown data_type.
double pixel_value(const uint8_t* data, uint16_t data_type, size_t i);

// The 0.5th..99.5th percentile window of v mapped to 0..255 (a few hot pixels do not darken the
// picture); a flat image is black.
std::vector<uint8_t> window_to_8bit(const std::vector<float>& v);

}  // namespace larmor::wire
