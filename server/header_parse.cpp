#include "server/header_parse.h"

#include <algorithm>

#include <pugixml.hpp>

#include "server/excerpt.h"

namespace larmor::server {
namespace {

// Its own DOM, for messages that say where the XML is broken; gone before ISMRMRD builds its own, so
// the two never take memory at once (server/parse_cost.h counts one).
void check_well_formed(const std::string& xml) {
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
}

}  // namespace

ISMRMRD::IsmrmrdHeader parse_ismrmrd_header(const std::string& payload) {
    // Some clients count a C string's terminating NUL into the length; it is not part of the XML. (The
    // codec strips those already; a copy is made only for a payload that still has one.)
    const bool has_nul = !payload.empty() && payload.back() == '\0';
    const std::string trimmed = has_nul ? payload.substr(0, payload.find_last_not_of('\0') + 1) : std::string();
    const std::string& xml = has_nul ? trimmed : payload;
    if (xml.find_first_not_of(" \t\r\n") == std::string::npos)
        throw HeaderError("the ISMRMRD XML header (PARAMETER_SCRIPT) is empty");
    check_well_formed(xml);
    ISMRMRD::IsmrmrdHeader header;
    try {
        // deserialize wants a NUL-terminated string; std::string's data is one.
        ISMRMRD::deserialize(xml.c_str(), header);
    } catch (const std::exception& e) {
        throw HeaderError(std::string("invalid ISMRMRD XML header (PARAMETER_SCRIPT): ") + e.what());
    }
    return header;
}

}  // namespace larmor::server
