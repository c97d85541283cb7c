#include "input_file.h"

#include <filesystem>
#include <mutex>
#include <stdexcept>

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
