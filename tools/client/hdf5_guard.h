#pragma once
// The client reads its input on one thread while it writes images on another. HDF5 is only safe for
// that when built thread-safe (Debian's is, others may not be), so every HDF5 call of the client goes
// through this one lock; the calls are short next to the network time.
#include <memory>
#include <mutex>
#include <string>

namespace ISMRMRD {
class Dataset;
}

namespace larmor::client {

inline std::mutex& hdf5_mutex() {
    static std::mutex m;
    return m;
}

// ISMRMRD's C library prints every error to stderr as well as raising it; the client reports the
// exception itself once, so that printing is switched off (called once at start-up).
void silence_ismrmrd_error_printing();

// First line of an ISMRMRD exception message (the rest is the HDF5 error stack).
std::string first_line(const std::string& s);

// Opens group `group` of the ISMRMRD file `file` (creating the file when `create` and it does not open);
// call with hdf5_mutex() held. Throws std::runtime_error when the file cannot be opened or created.
//
// ISMRMRD::Dataset's constructor cannot be used for that check: when the file does not open it throws
// after ismrmrd_init_dataset allocated the file and group names, and since the destructor that frees them
// never runs, every failed open leaks them. So the file is first opened here the way ismrmrd_open_dataset
// would open it, with HDF5 directly, and the Dataset is only constructed once that works.
std::unique_ptr<ISMRMRD::Dataset> open_dataset(const std::string& file, const std::string& group, bool create);

}  // namespace larmor::client
