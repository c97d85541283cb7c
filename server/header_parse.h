#pragma once
// The ISMRMRD XML header of a session (PARAMETER_SCRIPT): parsed with ISMRMRD::deserialize, after a
// pugixml pass that can say *where* malformed XML breaks (ISMRMRD's own message does not).
#include <stdexcept>
#include <string>

#include <ismrmrd/xml.h>

namespace larmor::server {

class HeaderError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Throws HeaderError naming the parse problem, its byte offset and the text around it.
ISMRMRD::IsmrmrdHeader parse_ismrmrd_header(const std::string& xml);

}  // namespace larmor::server
