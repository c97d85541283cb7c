#pragma once
// ISMRMRD HDF5 files for tests that drive real clients: scans read, rewritten (another measurement id,
// another noise dependency, the noise or the imaging part alone) and written back, and the images a
// client wrote, whatever their pixel type.
#include <cstdint>
#include <string>
#include <vector>

#include <ismrmrd/ismrmrd.h>

#include "wire/messages.h"

namespace larmor::test {

struct ScanFile {
    std::string xml;                               // the ISMRMRD header
    std::vector<ISMRMRD::Acquisition> acquisitions;
};

// Reads /dataset/xml and /dataset/data of `path`.
ScanFile read_scan(const std::string& path);

// Writes a new file (replacing one that is there) with the header and acquisitions.
void write_scan(const std::string& path, const ScanFile& scan);

// The header with measurementInformation.measurementID = `id` and its measurementDependency list
// replaced by one Noise dependency on `noise_dependency` (none when empty).
std::string with_measurement(const std::string& xml, const std::string& id, const std::string& noise_dependency);

// An acquisition read from a file as the wire carries it.
wire::Acquisition to_wire(const ISMRMRD::Acquisition& a);

// The noise scans (flag 19) of a scan, or everything else, under the same header.
ScanFile noise_part(const ScanFile& scan);
ScanFile imaging_part(const ScanFile& scan);

struct FileImage {
    std::string name;      // "image_<series>"
    uint16_t data_type = 0;
    uint16_t matrix[3] = {0, 0, 0};
    uint16_t channels = 0;
    std::vector<double> values;  // magnitude for complex types, the value otherwise
};

// Every image under `group` of an output file (all image_* datasets, in name then index order).
std::vector<FileImage> read_images(const std::string& path, const std::string& group);

// ||x - ref|| / ||ref||; infinity when the sizes differ.
double nrmse(const std::vector<double>& ref, const std::vector<double>& x);

}  // namespace larmor::test
