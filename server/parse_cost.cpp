#include "server/parse_cost.h"

namespace larmor::server {
namespace {

constexpr uint64_t kNodeBytes = 64;       // pugi::xml_node_struct on a 64-bit host
constexpr uint64_t kAttributeBytes = 40;  // pugi::xml_attribute_struct
constexpr uint64_t kPageBytes = 64u << 10;  // pugixml allocates in 32 KiB pages: one or two beyond the nodes
constexpr uint64_t kProtobufTextFactor = 10;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

}  // namespace

uint64_t xml_dom_bound(std::string_view xml) {
    uint64_t nodes = 1, attributes = 0;  // the document node
    bool in_tag = false, in_text = false;
    char quote = 0;  // inside a quoted attribute value of a tag: '<', '>' and '=' there are text
    for (size_t i = 0; i < xml.size(); ++i) {
        const char c = xml[i];
        if (quote) {
            if (c == quote) quote = 0;
        } else if (in_tag && (c == '"' || c == '\'')) {
            quote = c;
        } else if (c == '<') {
            in_tag = true;
            in_text = false;
            if (i + 1 >= xml.size() || xml[i + 1] != '/') ++nodes;
        } else if (c == '>') {
            in_tag = false;
        } else if (in_tag) {
            attributes += c == '=';
        } else if (!in_text && !is_space(c)) {
            in_text = true;  // pugixml keeps no node for whitespace between tags
            ++nodes;
        }
    }
    return nodes * kNodeBytes + attributes * kAttributeBytes + xml.size() + kPageBytes;
}

uint64_t ismrmrd_header_parse_bound(std::string_view xml) {
    // The checking DOM is gone before ISMRMRD's is built; the header object holds at most the text.
    return xml_dom_bound(xml) + xml.size();
}

uint64_t chain_script_parse_bound(std::string_view text) {
    // Gadgetron XML: its DOM, then the translated chain (at most protobuf's cost of text that size).
    return xml_dom_bound(text) + kProtobufTextFactor * text.size();
}

}  // namespace larmor::server
