#include "hdf5_guard.h"

#include <stdexcept>

#include <hdf5.h>
#include <ismrmrd/dataset.h>
#include <ismrmrd/ismrmrd.h>

namespace larmor::client {

void silence_ismrmrd_error_printing() {
    ISMRMRD::ismrmrd_set_error_handler([](const char*, int, const char*, int, const char*) {});
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

namespace {

// H5Fopen / H5Fcreate without HDF5 printing its error stack (the caller reports the failure once).
hid_t quiet_open(const std::string& file, unsigned flags) {
    hid_t id = H5I_INVALID_HID;
    H5E_BEGIN_TRY { id = H5Fopen(file.c_str(), flags, H5P_DEFAULT); }
    H5E_END_TRY;
    return id;
}

hid_t quiet_create(const std::string& file) {
    hid_t id = H5I_INVALID_HID;
    H5E_BEGIN_TRY { id = H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT); }
    H5E_END_TRY;
    return id;
}

}  // namespace

std::unique_ptr<ISMRMRD::Dataset> open_dataset(const std::string& file, const std::string& group, bool create) {
    // ismrmrd_open_dataset (1.8) tries read-write, then read-only when it may not create, else creates
    // the file (truncating whatever was there). Whatever opens here opens there too.
    hid_t id = create ? quiet_open(file, H5F_ACC_RDWR) : quiet_open(file, H5F_ACC_RDONLY);
    if (id < 0 && create) {
        id = quiet_create(file);
        if (id < 0) throw std::runtime_error("cannot create the HDF5 file");
    }
    if (id < 0) {
        htri_t is_hdf5 = -1;
#if H5_VERSION_GE(1, 12, 0)
        H5E_BEGIN_TRY { is_hdf5 = H5Fis_accessible(file.c_str(), H5P_DEFAULT); }
#else
        H5E_BEGIN_TRY { is_hdf5 = H5Fis_hdf5(file.c_str()); }
#endif
        H5E_END_TRY;
        throw std::runtime_error(is_hdf5 == 0 ? "not an HDF5 file"
                                              : "cannot open the HDF5 file (unreadable, or locked by another process)");
    }
    H5Fclose(id);
    return std::make_unique<ISMRMRD::Dataset>(file.c_str(), group.c_str(), create);
}

}  // namespace larmor::client
