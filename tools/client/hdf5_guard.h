#pragma once
// The client reads its input on one thread while it writes images on another. HDF5 is only safe for
// that when built thread-safe (Debian's is, others may not be), so every HDF5 call of the client goes
// through this one lock; the calls are short next to the network time.
#include <mutex>
#include <string>

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

}  // namespace larmor::client
