#include "input_file.h"

#include <filesystem>
#include <mutex>
#include <stdexcept>

#include <hdf5.h>
#include <ismrmrd/dataset.h>
#include <ismrmrd/xml.h>

#include "hdf5_guard.h"

namespace larmor::client {

InputFile::InputFile(const std::string& file, const std::string& group) : file_(file) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) throw std::runtime_error("input file '" + file + "' not found");
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    try {
        dataset_ = open_dataset(file, group, false);
        dataset_->readHeader(header_xml_);
        acquisitions_ = dataset_->getNumberOfAcquisitions();
        waveforms_ = dataset_->getNumberOfWaveforms();
    } catch (const std::exception& e) {
        throw std::runtime_error("cannot read ISMRMRD dataset '" + file + "' group '" + group +
                                 "': " + first_line(e.what()));
    }
}

InputFile::~InputFile() {
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    dataset_.reset();
}

void InputFile::read_acquisition(uint32_t i, wire::Acquisition& out) {
    ISMRMRD::Acquisition acq;
    {
        std::lock_guard<std::mutex> lock(hdf5_mutex());
        try {
            dataset_->readAcquisition(i, acq);
        } catch (const std::exception& e) {
            throw std::runtime_error("reading acquisition " + std::to_string(i) + " of '" + file_ +
                                     "': " + first_line(e.what()));
        }
    }
    out.head = acq.getHead();
    out.traj.assign(acq.getTrajPtr(), acq.getTrajPtr() + acq.getNumberOfTrajElements());
    out.data.assign(acq.getDataPtr(), acq.getDataPtr() + acq.getNumberOfDataElements());
}

void InputFile::read_waveform(uint32_t i, wire::Waveform& out) {
    ISMRMRD::Waveform wav;
    {
        std::lock_guard<std::mutex> lock(hdf5_mutex());
        try {
            dataset_->readWaveform(i, wav);
        } catch (const std::exception& e) {
            throw std::runtime_error("reading waveform " + std::to_string(i) + " of '" + file_ +
                                     "': " + first_line(e.what()));
        }
    }
    out.head = wav.head;
    out.data.assign(wav.begin_data(), wav.end_data());
}

uint32_t InputFile::images(const std::string& var) {
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    uint32_t n = 0;
    // A missing variable makes HDF5 print its error stack (H5Lexists on <group>/var/header) before
    // ISMRMRD answers 0; the caller reports that once.
    H5E_BEGIN_TRY { n = dataset_->getNumberOfImages(var); }
    H5E_END_TRY;
    return n;
}

void InputFile::read_image(const std::string& var, uint32_t i, wire::Image& out) {
    // ISMRMRD sizes an Image<T>'s buffer from the stored header, whatever T: only the bytes are used.
    ISMRMRD::Image<float> im;
    {
        std::lock_guard<std::mutex> lock(hdf5_mutex());
        try {
            dataset_->readImage(var, i, im);
        } catch (const std::exception& e) {
            throw std::runtime_error("reading image " + std::to_string(i) + " of '" + var + "' in '" + file_ +
                                     "': " + first_line(e.what()));
        }
    }
    out.head = im.getHead();
    im.getAttributeString(out.meta);
    const auto* pixels = reinterpret_cast<const uint8_t*>(im.getDataPtr());
    out.pixels.assign(pixels, pixels + im.getDataSize());
}

bool has_noise_dependency(const std::string& header_xml) {
    try {
        ISMRMRD::IsmrmrdHeader h;
        ISMRMRD::deserialize(header_xml.c_str(), h);
        if (!h.measurementInformation) return false;
        for (const auto& dep : h.measurementInformation->measurementDependency)
            if (dep.dependencyType == "Noise" || dep.dependencyType == "noise") return true;
    } catch (const std::exception&) {
        // The server validates the header; this check is only for a note.
    }
    return false;
}

}  // namespace larmor::client
