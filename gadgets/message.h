#pragma once
// The typed messages that flow through a chain. Wire messages (acquisition, waveform, image, text)
// are the wire library's (wire/messages.h); pending acquisitions, buffers and image arrays are the
// chain's internal currency, the latter two holding their samples on the session's backend.
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <ismrmrd/ismrmrd.h>
#include <ismrmrd/meta.h>

#include "core/array.h"
#include "wire/messages.h"

namespace larmor {

// The wire messages, under the names the chain has always used. wire::Acquisition carries samples
// as std::complex<float>, the same type as cfloat.
using wire::Acquisition;
using wire::DicomWithName;
using wire::Image;
using wire::Text;
using wire::Waveform;
static_assert(std::is_same_v<cfloat, std::complex<float>>, "acquisition samples go into CArrays unconverted");

// Per-readout linear operations that gadgets before the accumulator request but do not apply one
// line at a time: the accumulator applies them to the whole buffer at once on the session backend
// (one GEMM and one batched FFT instead of thousands of small ones); for any gadget that only takes
// plain acquisitions, the typed gadget base applies them on the host first (gadgets/line_ops.h).
struct LineOps {
    // Coil mixing matrix, row-major [out_channel][in_channel] (noise prewhitening); empty = none.
    std::shared_ptr<const std::vector<cfloat>> coil_mix;
    // Halve the readout by cropping the centre half of the image-domain FOV.
    bool remove_ro_oversampling = false;

    bool empty() const { return !coil_mix && !remove_ro_oversampling; }
};

// An acquisition whose data still await `ops`: head and data describe the readout as received
// (before the operations), so nothing downstream can mistake it for processed data, and it cannot
// reach the wire (it is no wire message).
struct PendingAcquisition {
    Acquisition acq;
    LineOps ops;
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

// One k-space of a recon buffer, on the session backend.
struct KSpace {
    CArray data;  // [RO, E1, E2, CH], unsampled points zero
    // Mask of the (E1, E2) lines present, E1 fastest, 1 = sampled.
    std::vector<uint8_t> sampled;
    // Header of a representative line (the centre line when sampled): geometry, indices, time stamps.
    ISMRMRD::ISMRMRD_AcquisitionHeader reference{};

    bool empty() const { return data.empty(); }
};

// What the accumulator hands a reconstruction for one trigger (one slice/contrast/phase/repetition/
// set), after Gadgetron's IsmrmrdReconBit: the imaging data together with its parallel-calibration
// (ACS) lines and the header fields a solver needs, so a parallel-imaging gadget finds everything in
// one message instead of pairing two.
struct ReconBuffer {
    KSpace data;  // imaging lines (flag 21 lines included); empty when only calibration lines came
    KSpace ref;   // calibration lines (flags 20 and 21), when the accumulator keeps them; else empty
    EncodingGeometry geometry;  // of data and ref alike
    // The header's parallelImaging section: nominal accelerations (1 = none) and calibration mode
    // ("embedded", "interleaved", "separate", "external", "other"; empty when absent).
    uint16_t acceleration_e1 = 1, acceleration_e2 = 1;
    std::string calibration_mode;
    // Acquisitions of the stream in this buffer (imaging and calibration lines), for the session's
    // summary: they reach an image when the image made from this buffer leaves the chain.
    uint64_t acquisitions = 0;
};

// What the readout accumulator (accumulate_readouts) hands a non-Cartesian reconstruction: readouts
// kept in the order they came, each with its k-space trajectory, for one trigger (slice, repetition,
// ...) or one frame of a real-time sliding window.
struct TrajectoryBuffer {
    CArray data;    // [samples, readouts, coils] on the session backend
    RArray coords;  // [dims, samples, readouts] on the host, cycles per FOV of the image (core's units)
    // Density weights that came with the data (accumulate_readouts trajectory_weights: each sample's
    // last traj component), [samples, readouts] on the host, as sent; empty when the stream has none.
    RArray weights;
    Shape image;    // the image grid the coordinates refer to: [X, Y] or [X, Y, Z]
    // Stack of stars: the Cartesian kz partitions (coords' third axis is the partition index about the
    // centre, readouts in arrival order); 1 otherwise.
    size_t partitions = 1;
    EncodingGeometry geometry;
    // Header of the newest readout: geometry, indices and time stamps for the image (a real-time
    // frame's latency is measured from its newest readout).
    ISMRMRD::ISMRMRD_AcquisitionHeader reference{};
    // The header's trajectory type ("radial", "goldenangle", "spiral", "other", ...).
    std::string trajectory;
    // Real-time frames: this frame's index in the session (0, 1, ...).
    uint32_t frame = 0;
    // Readouts that no earlier frame held (all of them without a sliding window), for the summary.
    uint64_t acquisitions = 0;
};

// Complex image data on the session backend, with the header the finished image will carry.
struct ImageArray {
    CArray data;  // [X, Y, Z, CH]
    ISMRMRD::ISMRMRD_ImageHeader head{};
    // Meta attributes, kept parsed between gadgets: XML only once, when ImageFinish makes the wire image.
    ISMRMRD::MetaContainer meta;
    // Acquisitions that reach an image with this one (its buffer's; 0 on further images of a buffer).
    uint64_t acquisitions = 0;
};

using Message = std::variant<Acquisition, PendingAcquisition, Waveform, ReconBuffer, TrajectoryBuffer, ImageArray, Image,
                             Text, DicomWithName>;

// "acquisition", "pending acquisition", ... for logs and errors.
const char* message_kind(const Message& m);

// Host memory a message's wire payload takes (samples, trajectory, pixels, text); 0 for the messages
// whose data live in backend arrays (those are charged to the budgets where they are allocated).
uint64_t host_payload_bytes(const Message& m);

}  // namespace larmor
