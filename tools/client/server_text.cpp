#include "server_text.h"

#include "wire/progress.h"

namespace larmor::client {

std::string trimmed(const std::string& s) {
    size_t end = s.find_last_not_of("\r\n");
    return end == std::string::npos ? std::string() : s.substr(0, end + 1);
}

bool ServerTextDisplay::show(const std::string& text) {
    const std::string line = "[server] " + trimmed(text);
    const bool progress = wire::parse_progress(text).has_value();
    if (!progress || !terminal_) {
        end_status_line();
        out_ << line << std::endl;
        return progress;
    }
    // Spaces over what is left of a longer previous status line (no terminal escape codes needed).
    const size_t pad = status_width_ > line.size() ? status_width_ - line.size() : 0;
    out_ << '\r' << line << std::string(pad, ' ') << std::flush;
    status_width_ = line.size();
    return true;
}

void ServerTextDisplay::end_status_line() {
    if (status_width_ == 0) return;
    out_ << '\n' << std::flush;
    status_width_ = 0;
}

}  // namespace larmor::client
