#pragma once
// The data messages of the Gadgetron / MRD streaming protocol as they go on the wire: ISMRMRD C
// headers byte-for-byte plus their payloads. Plain data that the server, the chain and the client all
// share; nothing here knows about reconstruction (see ../shared/docs/design.md, "Layers").
#include <complex>
#include <cstdint>
#include <string>
#include <vector>

#include <ismrmrd/ismrmrd.h>
#include <ismrmrd/waveform.h>

#include "wire/samples.h"

namespace larmor::wire {

// ISMRMRD's channel masks hold 1024 channels: the most any acquisition, buffer or noise store takes.
inline constexpr uint32_t kMaxChannels = 1024;

struct Acquisition {
    ISMRMRD::ISMRMRD_AcquisitionHeader head{};
    std::vector<float> traj;                 // [number_of_samples][trajectory_dimensions]
    Samples data;                            // [active_channels][number_of_samples], sample fastest

    // ISMRMRD flag bits are numbered from 1 (ISMRMRD_ACQ_IS_NOISE_MEASUREMENT = 19).
    bool flag(int bit) const { return (head.flags & (uint64_t{1} << (bit - 1))) != 0; }
    // " (acquisition scan_counter N)": how error messages name the acquisition they refuse.
    std::string scan_text() const { return " (acquisition scan_counter " + std::to_string(head.scan_counter) + ")"; }
};

struct Waveform {
    ISMRMRD::ISMRMRD_WaveformHeader head{};
    std::vector<uint32_t> data;  // [channels][number_of_samples]
};

// An image: header, meta XML, raw pixels in head.data_type.
struct Image {
    ISMRMRD::ISMRMRD_ImageHeader head{};
    std::string meta;               // ISMRMRD meta XML (<ismrmrdMeta>...), may be empty
    std::vector<uint8_t> pixels;    // matrix_size[0]*[1]*[2]*channels*sizeof(data_type), x fastest
};

// Free text (TEXT, message 5): errors, notes, progress lines (wire/progress.h).
struct Text {
    std::string text;
};

// A DICOM file with its name and the image's meta XML (DICOM_WITHNAME, message 1018, server to client).
struct DicomWithName {
    std::vector<uint8_t> dicom;
    std::string filename;
    std::string meta_xml;
};

}  // namespace larmor::wire
