#include "tests/support/ismrmrd_files.h"

#include <hdf5.h>

#include <cmath>
#include <complex>
#include <cstdio>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include <ismrmrd/dataset.h>
#include <ismrmrd/xml.h>

namespace larmor::test {

ScanFile read_scan(const std::string& path) {
    ISMRMRD::Dataset d(path.c_str(), "dataset", false);
    ScanFile s;
    d.readHeader(s.xml);
    const uint32_t n = d.getNumberOfAcquisitions();
    s.acquisitions.resize(n);
    for (uint32_t i = 0; i < n; ++i) d.readAcquisition(i, s.acquisitions[i]);
    return s;
}

void write_scan(const std::string& path, const ScanFile& scan) {
    std::remove(path.c_str());
    ISMRMRD::Dataset d(path.c_str(), "dataset", true);
    d.writeHeader(scan.xml);
    for (const auto& a : scan.acquisitions) d.appendAcquisition(a);
}

std::string with_measurement(const std::string& xml, const std::string& id, const std::string& noise_dependency) {
    ISMRMRD::IsmrmrdHeader h;
    ISMRMRD::deserialize(xml.c_str(), h);
    ISMRMRD::MeasurementInformation m = h.measurementInformation ? *h.measurementInformation
                                                                  : ISMRMRD::MeasurementInformation{};
    if (!h.measurementInformation) m.patientPosition = "HFS";
    m.measurementID = id;
    m.measurementDependency.clear();
    if (!noise_dependency.empty()) {
        ISMRMRD::MeasurementDependency d;
        d.dependencyType = "Noise";
        d.measurementID = noise_dependency;
        m.measurementDependency.push_back(d);
    }
    h.measurementInformation = m;
    std::ostringstream out;
    ISMRMRD::serialize(h, out);
    return out.str();
}

namespace {
ScanFile part(const ScanFile& scan, bool noise) {
    ScanFile out{scan.xml, {}};
    for (const auto& a : scan.acquisitions)
        if (((a.getHead().flags >> (ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT - 1)) & 1) == uint64_t{noise})
            out.acquisitions.push_back(a);
    return out;
}

template <class T>
void append_values(const void* data, size_t n, std::vector<double>& out) {
    const T* p = static_cast<const T*>(data);
    for (size_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>)
            out.push_back(std::abs(p[i]));
        else
            out.push_back(static_cast<double>(p[i]));
    }
}

// Names of the image_* members of a group (HDF5 link iteration).
std::vector<std::string> image_names(const std::string& path, const std::string& group) {
    std::vector<std::string> names;
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) throw std::runtime_error("cannot open " + path);
    const hid_t g = H5Gopen2(f, group.c_str(), H5P_DEFAULT);
    if (g >= 0) {
        H5G_info_t info{};
        if (H5Gget_info(g, &info) >= 0)
            for (hsize_t i = 0; i < info.nlinks; ++i) {
                char name[256] = {};
                if (H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT) > 0 &&
                    std::string(name).rfind("image_", 0) == 0)
                    names.push_back(name);
            }
        H5Gclose(g);
    }
    H5Fclose(f);
    if (g < 0) throw std::runtime_error("no group '" + group + "' in " + path);
    return names;
}
}  // namespace

wire::Acquisition to_wire(const ISMRMRD::Acquisition& a) {
    wire::Acquisition w;
    w.head = a.getHead();
    w.traj.assign(a.getTrajPtr(), a.getTrajPtr() + a.getNumberOfTrajElements());
    w.data.assign(a.getDataPtr(), a.getDataPtr() + a.getNumberOfDataElements());
    return w;
}

ScanFile noise_part(const ScanFile& scan) { return part(scan, true); }
ScanFile imaging_part(const ScanFile& scan) { return part(scan, false); }

std::vector<FileImage> read_images(const std::string& path, const std::string& group) {
    using namespace ISMRMRD;  // ISMRMRD's C API, declared in its namespace when compiled as C++
    std::vector<FileImage> images;
    const std::vector<std::string> names = image_names(path, group);
    ISMRMRD_Dataset d;
    ismrmrd_init_dataset(&d, path.c_str(), group.c_str());
    if (ismrmrd_open_dataset(&d, false) != ISMRMRD_NOERROR) throw std::runtime_error("cannot open " + path);
    for (const std::string& name : names) {
        const uint32_t n = ismrmrd_get_number_of_images(&d, name.c_str());
        for (uint32_t i = 0; i < n; ++i) {
            ISMRMRD_Image im;
            ismrmrd_init_image(&im);
            if (ismrmrd_read_image(&d, name.c_str(), i, &im) != ISMRMRD_NOERROR) {
                ismrmrd_cleanup_image(&im);
                ismrmrd_close_dataset(&d);
                throw std::runtime_error("cannot read " + name + " of " + path);
            }
            FileImage out;
            out.name = name;
            out.data_type = im.head.data_type;
            for (int k = 0; k < 3; ++k) out.matrix[k] = im.head.matrix_size[k];
            out.channels = im.head.channels;
            const size_t count = size_t{im.head.matrix_size[0]} * im.head.matrix_size[1] * im.head.matrix_size[2] *
                                 im.head.channels;
            switch (im.head.data_type) {
                case ISMRMRD::ISMRMRD_USHORT: append_values<uint16_t>(im.data, count, out.values); break;
                case ISMRMRD::ISMRMRD_SHORT: append_values<int16_t>(im.data, count, out.values); break;
                case ISMRMRD::ISMRMRD_UINT: append_values<uint32_t>(im.data, count, out.values); break;
                case ISMRMRD::ISMRMRD_INT: append_values<int32_t>(im.data, count, out.values); break;
                case ISMRMRD::ISMRMRD_FLOAT: append_values<float>(im.data, count, out.values); break;
                case ISMRMRD::ISMRMRD_DOUBLE: append_values<double>(im.data, count, out.values); break;
                case ISMRMRD::ISMRMRD_CXFLOAT: append_values<std::complex<float>>(im.data, count, out.values); break;
                case ISMRMRD::ISMRMRD_CXDOUBLE: append_values<std::complex<double>>(im.data, count, out.values); break;
                default: break;
            }
            ismrmrd_cleanup_image(&im);
            images.push_back(std::move(out));
        }
    }
    ismrmrd_close_dataset(&d);
    return images;
}

double nrmse(const std::vector<double>& ref, const std::vector<double>& x) {
    if (ref.size() != x.size() || ref.empty()) return std::numeric_limits<double>::infinity();
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        num += (x[i] - ref[i]) * (x[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace larmor::test
