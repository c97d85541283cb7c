#pragma once
// The typed messages that flow through a chain. Wire messages (acquisition, waveform, image, text)
// keep the ISMRMRD C structs byte-for-byte; buffers and image arrays are the chain's internal
// currency and hold their samples on the session's backend (host or GPU).
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <ismrmrd/ismrmrd.h>
#include <ismrmrd/meta.h>
#include <ismrmrd/waveform.h>

#include "core/carray.h"

namespace larmor {

// Per-readout linear operations that gadgets before the accumulator request but do not apply one
// line at a time: the accumulator applies them to the whole buffer at once on the session backend
// (one GEMM and one batched FFT instead of thousands of small ones). Any other consumer calls
// materialize() (gadgets/line_ops.h), which applies them on the host.
struct PendingLineOps {
    // Coil mixing matrix, row-major [out_channel][in_channel] (noise prewhitening); empty = none.
    std::shared_ptr<const std::vector<cfloat>> coil_mix;
    // Halve the readout by cropping the centre half of the image-domain FOV.
    bool remove_ro_oversampling = false;

    bool empty() const { return !coil_mix && !remove_ro_oversampling; }
};

struct Acquisition {
    ISMRMRD::ISMRMRD_AcquisitionHeader head{};
    std::vector<float> traj;   // [number_of_samples][trajectory_dimensions]
    std::vector<cfloat> data;  // [active_channels][number_of_samples], sample fastest
    PendingLineOps pending;

    bool flag(int bit) const { return (head.flags & (uint64_t{1} << (bit - 1))) != 0; }
};

struct Waveform {
    ISMRMRD::ISMRMRD_WaveformHeader head{};
    std::vector<uint32_t> data;  // [channels][number_of_samples]
};

// An image as it goes on the wire: header, meta XML, raw pixels in head.data_type.
struct Image {
    ISMRMRD::ISMRMRD_ImageHeader head{};
    std::string meta;               // ISMRMRD meta XML (<ismrmrdMeta>...), may be empty
    std::vector<uint8_t> pixels;    // matrix_size[0]*[1]*[2]*channels*sizeof(data_type), x fastest
};

// Free text for the client (reported as TEXT, message 5).
struct Text {
    std::string text;
};

// Encoding geometry of one encoding space, from the ISMRMRD XML header.
struct EncodingGeometry {
    uint16_t encoded_matrix[3] = {1, 1, 1};
    float encoded_fov[3] = {0, 0, 0};  // mm
    uint16_t recon_matrix[3] = {1, 1, 1};
    float recon_fov[3] = {0, 0, 0};    // mm
    // Encoding limits of kspace_encode_step_1/2 and their centres (centre = the k=0 line).
    uint16_t e1_min = 0, e1_max = 0, e1_centre = 0;
    uint16_t e2_min = 0, e2_max = 0, e2_centre = 0;
};

// k-space accumulated for one trigger (one slice/contrast/phase/repetition/set), by AccumulateTrigger.
struct KSpaceBuffer {
    CArray data;  // [RO, E1, E2, CH] on the session backend, unsampled points zero
    EncodingGeometry geometry;
    // Header of a representative line (the centre line when sampled): geometry, indices, time stamps.
    ISMRMRD::ISMRMRD_AcquisitionHeader reference{};
    // Mask of sampled (E1, E2) lines, E1 fastest, 1 = sampled.
    std::vector<uint8_t> sampled;
    // True when the buffer holds calibration (ACS) lines only.
    bool calibration_only = false;
};

// Complex image data on the session backend, with the header the finished image will carry.
struct ImageArray {
    CArray data;  // [X, Y, Z, CH]
    ISMRMRD::ISMRMRD_ImageHeader head{};
    // Meta attributes, kept parsed between gadgets: XML only once, when ImageFinish makes the wire image.
    ISMRMRD::MetaContainer meta;
};

using Message = std::variant<Acquisition, Waveform, KSpaceBuffer, ImageArray, Image, Text>;

const char* message_kind(const Message& m);

}  // namespace larmor
