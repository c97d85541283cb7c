#pragma once
// What parsing a client's text costs in memory, known before it is parsed, so that it can be charged
// to the session's budget (and refused) first: a header of 60 MiB of `<a/>` once took a gigabyte while
// pugixml built its tree (issue 19, finding 3). The bounds are exact upper bounds of the allocators'
// work, not estimates of typical use (measured on libpugixml 1.13 and protobuf 3.21: 17x the input for
// a flood of empty elements, 4.5-5x for real ISMRMRD headers; 8x for protobuf text of empty messages).
#include <cstdint>
#include <string_view>

namespace larmor::server {

// Bytes pugixml's DOM of `xml` takes at most, its copy of the text included: a 64-byte node per
// element, comment or declaration ('<' not followed by '/') and per text run between tags, 40 bytes
// per attribute ('='), the text once, and its allocator's pages.
uint64_t xml_dom_bound(std::string_view xml);

// The whole of parse_ismrmrd_header (server/header_parse.h) for a payload of that text: the DOM that
// checks it, then ISMRMRD's own (one at a time), and the header object (at most the text's size).
uint64_t ismrmrd_header_parse_bound(std::string_view xml);

// A CONFIG_SCRIPT: Gadgetron XML (a DOM, then the chain it translates to) or protobuf text (at most
// 8x its size in messages, counted as 10x).
uint64_t chain_script_parse_bound(std::string_view text);

}  // namespace larmor::server
