#pragma once
// Progress of a long reconstruction step (an iterative solver), reported to the client as TEXT.
// The line is meant for people first: a stock Gadgetron client prints TEXT verbatim, and
//     progress cg_sense: iteration 5/30, residual 3.20e-04
// reads fine there. larmor-client recognises the same line (parse_progress) and keeps it on one
// status line instead of scrolling. Defined here, once, so the server side that writes it and the
// client that reads it cannot drift apart.
#include <cstdint>
#include <optional>
#include <string>

namespace larmor::wire {

struct Progress {
    std::string stage;        // what is iterating, e.g. "cg_sense": letters, digits, '_', '-', '.', '/'
    uint32_t iteration = 0;   // iterations done so far
    uint32_t iterations = 0;  // iterations planned (the solver may stop earlier on its tolerance)
    double residual = 0;      // relative residual ||r|| / ||b|| after `iteration`
};

// "progress <stage>: iteration <i>/<n>, residual <r>\n", the residual with 3 significant digits
// (%.2e). Throws std::invalid_argument naming the stage when it is empty or has a character outside
// the set above (it would make the line ambiguous to parse).
std::string format_progress(const Progress& p);

// The Progress of a TEXT in exactly that form (the final newline optional), nullopt for any other
// text, so ordinary messages are never taken for progress.
std::optional<Progress> parse_progress(const std::string& text);

}  // namespace larmor::wire
