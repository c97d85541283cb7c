#pragma once
// Where returned images go: an ISMRMRD HDF5 file laid out like Gadgetron's client writes it
// (<group>/image_<series>/{header,attributes,data}), and optionally 8-bit PNGs for a quick look.
#include <memory>
#include <set>
#include <string>

#include "wire/messages.h"

namespace ISMRMRD {
class Dataset;
}

namespace larmor::client {

class Hdf5ImageWriter {
public:
    Hdf5ImageWriter(std::string file, std::string group);
    ~Hdf5ImageWriter();
    // Appends the image to <group>/image_<image_series_index>; the file is created on the first image.
    void write(const wire::Image& im);

private:
    std::string file_, group_;
    std::unique_ptr<ISMRMRD::Dataset> dataset_;
};

class PngImageWriter {
public:
    explicit PngImageWriter(std::string dir);
    // One greyscale PNG per 2D slice (and channel): magnitude for complex data, windowed to the
    // 0.5th..99.5th percentile. Named <series>_<index>.png, with _<z> / _c<channel> when there are
    // several, and a _<n> suffix should a name repeat within the session.
    void write(const wire::Image& im);

private:
    std::string dir_;
    std::set<std::string> used_;
};

// DICOM files the server sends (DICOM_WITHNAME, from a chain with DicomFinish), saved as they came
// into a directory under the name the server gave, reduced to a plain file name (no directories, no
// "..": a server cannot make the client write elsewhere), with a _<n> suffix should one repeat.
class DicomFileWriter {
public:
    explicit DicomFileWriter(std::string dir);
    // Returns the path written.
    std::string write(const wire::DicomWithName& d);

private:
    std::string dir_;
    std::set<std::string> used_;
};

}  // namespace larmor::client
