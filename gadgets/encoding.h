#pragma once
// Encoding geometry of the ISMRMRD XML header (<encoding>: encodedSpace, reconSpace, encodingLimits)
// and where a readout of that encoding lands in an [RO, E1, E2] k-space buffer.
#include <cstddef>
#include <cstdint>

#include <ismrmrd/xml.h>

#include "gadgets/message.h"

namespace larmor {

// Geometry of encoding space `index` of the header. Missing encodingLimits for kspace_encoding_step_1/2
// default to the whole matrix with the centre at matrix/2. Throws std::runtime_error naming the
// offending value when the header has no such encoding, a zero matrix size, or minimum > maximum.
EncodingGeometry encoding_geometry(const ISMRMRD::IsmrmrdHeader& header, size_t index = 0);

// Bytes of one complex-float k-space buffer [RO, E1, E2, CH] of the largest encoded space the header
// declares (receiverChannels; 1 when absent), times `copies`, saturating at UINT64_MAX: what the
// gadgets' working_set() estimates are made of. Reads only the header, never fails.
uint64_t declared_kspace_bytes(const ISMRMRD::IsmrmrdHeader& header, uint64_t copies = 1);
// The same for a coil-combined image [RO, E1, E2] (one channel).
uint64_t declared_image_bytes(const ISMRMRD::IsmrmrdHeader& header, uint64_t copies = 1);

// Offset added to kspace_encode_step_1 (resp. _2) so that the k-space centre line of the encoding
// limits lands at index E1/2 (resp. E2/2) of the encoded matrix: the centred-FFT convention of
// core/backend.h. Partial Fourier then leaves the unsampled part zero-filled on the right side.
inline int e1_offset(const EncodingGeometry& g) { return int(g.encoded_matrix[1] / 2) - int(g.e1_centre); }
inline int e2_offset(const EncodingGeometry& g) { return int(g.encoded_matrix[2] / 2) - int(g.e2_centre); }

// Offset of the first sample of a readout in an RO-long buffer: symmetric readouts (samples == RO)
// start at 0; asymmetric echoes are placed so that center_sample lands at RO/2.
inline int readout_offset(size_t ro, size_t number_of_samples, size_t center_sample) {
    if (number_of_samples == ro) return 0;
    return int(ro / 2) - int(center_sample);
}

}  // namespace larmor
