#include "server/header_parse.h"

#include <algorithm>

#include <pugixml.hpp>

#include "server/excerpt.h"

namespace larmor::server {

ISMRMRD::IsmrmrdHeader parse_ismrmrd_header(const std::string& payload) {
    // Some clients count a C string's terminating NUL into the length; it is not part of the XML.
    const std::string xml = payload.substr(0, payload.find_last_not_of('\0') + 1);
    if (xml.find_first_not_of(" \t\r\n") == std::string::npos)
        throw HeaderError("the ISMRMRD XML header (PARAMETER_SCRIPT) is empty");
    pugi::xml_document doc;
    const pugi::xml_parse_result parsed = doc.load_buffer(xml.data(), xml.size());
    if (!parsed) {
        // pugixml may report an offset past the end (found by fuzzing: an embedded NUL); clamp it, or
        // substr below throws instead of naming the problem.
        const size_t at = std::min(static_cast<size_t>(std::max<ptrdiff_t>(parsed.offset, 0)), xml.size());
        const size_t from = at > 20 ? at - 20 : 0;
        throw HeaderError("the ISMRMRD XML header (PARAMETER_SCRIPT) is not well-formed XML: " +
                          std::string(parsed.description()) + " at byte " + std::to_string(at) + " near '" +
                          excerpt(xml.substr(from, 60), 60) + "'");
    }
    if (!doc.child("ismrmrdHeader")) {
        const std::string root = doc.first_child() ? doc.first_child().name() : "";
        throw HeaderError("the ISMRMRD XML header (PARAMETER_SCRIPT) has root element '" + excerpt(root, 60) +
                          "', expected 'ismrmrdHeader'");
    }
    ISMRMRD::IsmrmrdHeader header;
    try {
        // deserialize wants a NUL-terminated string; the payload has no NUL of its own.
        ISMRMRD::deserialize(xml.c_str(), header);
    } catch (const std::exception& e) {
        throw HeaderError(std::string("invalid ISMRMRD XML header (PARAMETER_SCRIPT): ") + e.what());
    }
    return header;
}

}  // namespace larmor::server
