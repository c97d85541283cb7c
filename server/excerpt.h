#pragma once
// Client-supplied strings quoted in logs and error messages: bounded in length and with control
// bytes escaped, so a hostile 64 MiB "name" or a binary blob cannot flood a log line or a terminal.
#include <cstdio>
#include <string>

namespace larmor::server {

inline std::string excerpt(const std::string& s, size_t max_chars = 120) {
    std::string out;
    for (size_t i = 0; i < s.size() && i < max_chars; ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c != 0x7f) {
            out += static_cast<char>(c);
        } else {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02x", c);
            out += hex;
        }
    }
    if (s.size() > max_chars) out += "... (" + std::to_string(s.size()) + " bytes)";
    return out;
}

}  // namespace larmor::server
