// Fuzz target: the ISMRMRD XML header (PARAMETER_SCRIPT) as a session takes it: parsed by
// server/header_parse (pugixml, then ISMRMRD::deserialize), then the encoding geometry every
// Cartesian gadget derives from it (gadgets/encoding). Both may refuse a header, but only with the
// exceptions they document: anything else would escape the session's error reporting.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "gadgets/encoding.h"
#include "server/header_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string xml(reinterpret_cast<const char*>(data), size);
    ISMRMRD::IsmrmrdHeader header;
    try {
        header = larmor::server::parse_ismrmrd_header(xml);
    } catch (const larmor::server::HeaderError&) {
        return 0;
    }
    // One index past the end too: a chain asking for a missing encoding space must be told so.
    for (size_t i = 0; i <= header.encoding.size(); ++i) {
        try {
            const larmor::EncodingGeometry g = larmor::encoding_geometry(header, i);
            volatile int sink = larmor::e1_offset(g) + larmor::e2_offset(g) +
                                larmor::readout_offset(g.encoded_matrix[0], g.encoded_matrix[0] / 2, 0);
            (void)sink;
        } catch (const std::runtime_error&) {
        }
    }
    return 0;
}
