#include "tools/client/hdf5_guard.h"

#include <ismrmrd/ismrmrd.h>

namespace larmor::client {

void silence_ismrmrd_error_printing() {
    ISMRMRD::ismrmrd_set_error_handler([](const char*, int, const char*, int, const char*) {});
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace larmor::client
