#pragma once
// The ISMRMRD HDF5 dataset the client streams: header, acquisitions, waveforms and images, read one at a time.
#include <cstdint>
#include <memory>
#include <string>

#include "wire/messages.h"

namespace ISMRMRD {
class Dataset;
}

namespace larmor::client {

class InputFile {
public:
    // Opens file/group; throws std::runtime_error naming the file when it is missing or not ISMRMRD.
    InputFile(const std::string& file, const std::string& group);
    ~InputFile();

    const std::string& header_xml() const { return header_xml_; }
    uint32_t acquisitions() const { return acquisitions_; }
    uint32_t waveforms() const { return waveforms_; }

    // Fills out (reusing its buffers) with acquisition / waveform i.
    void read_acquisition(uint32_t i, wire::Acquisition& out);
    void read_waveform(uint32_t i, wire::Waveform& out);

    // Images stored under <group>/var (ISMRMRD appendImage); 0 when there is no such variable.
    uint32_t images(const std::string& var);
    // Image i of var as the wire carries it, whatever its pixel type.
    void read_image(const std::string& var, uint32_t i, wire::Image& out);

private:
    std::string file_;
    std::unique_ptr<ISMRMRD::Dataset> dataset_;
    std::string header_xml_;
    uint32_t acquisitions_ = 0;
    uint32_t waveforms_ = 0;
};

// True when the ISMRMRD header lists a measurementDependency of type Noise (Gadgetron's client then
// opens a separate noise connection first). False also when the header does not parse.
bool has_noise_dependency(const std::string& header_xml);

}  // namespace larmor::client
