#pragma once
// How the server's TEXT messages appear on the client's stderr, as "[server] <text>" lines.
//
// Progress lines (wire/progress.h) of an iterative reconstruction come many times a second. On a
// terminal they share one status line, rewritten in place with '\r', so the scrollback keeps only
// the messages that matter; any other output first ends that line. Into a file or a pipe there is
// no "in place": each progress line is printed as a plain line, as every other TEXT, so a log keeps
// the convergence history (the chain's report interval decides how many lines that is).
#include <cstddef>
#include <ostream>
#include <string>

namespace larmor::client {

// Server text without its trailing line breaks (it usually ends in one; printed as one line either way).
std::string trimmed(const std::string& s);

class ServerTextDisplay {
public:
    // `terminal`: `out` is an interactive terminal (isatty), where '\r' returns to the line start.
    ServerTextDisplay(std::ostream& out, bool terminal) : out_(out), terminal_(terminal) {}

    // Shows one TEXT from the server. Returns true when it was a progress line.
    bool show(const std::string& text);

    // Ends an open status line with a newline; call before anything else is written to the terminal.
    void end_status_line();

private:
    std::ostream& out_;
    bool terminal_;
    size_t status_width_ = 0;  // characters on the open status line; 0 = none open
};

}  // namespace larmor::client
