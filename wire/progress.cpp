#include "wire/progress.h"

#include <charconv>
#include <cstring>
#include <stdexcept>
#include <string_view>

namespace larmor::wire {
namespace {

constexpr std::string_view kPrefix = "progress ";
constexpr std::string_view kIteration = ": iteration ";
constexpr std::string_view kResidual = ", residual ";

bool stage_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || std::strchr("_-./", c);
}

bool valid_stage(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s)
        if (c == '\0' || !stage_char(c)) return false;
    return true;
}

// Consumes `literal` at the front of `s`.
bool eat(std::string_view& s, std::string_view literal) {
    if (s.substr(0, literal.size()) != literal) return false;
    s.remove_prefix(literal.size());
    return true;
}

// Consumes a decimal uint32 (digits only: no sign, no spaces) at the front of `s`.
bool eat_uint(std::string_view& s, uint32_t& out) {
    if (s.empty() || s.front() < '0' || s.front() > '9') return false;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec != std::errc()) return false;
    s.remove_prefix(static_cast<size_t>(end - s.data()));
    return true;
}

}  // namespace

std::string format_progress(const Progress& p) {
    if (!valid_stage(p.stage))
        throw std::invalid_argument("progress stage '" + p.stage +
                                    "' must be non-empty and use only letters, digits and _ - . /");
    // to_chars, not printf: the decimal point must not depend on the process locale.
    char residual[32];
    const auto r = std::to_chars(residual, residual + sizeof residual, p.residual, std::chars_format::scientific, 2);
    return std::string(kPrefix) + p.stage + std::string(kIteration) + std::to_string(p.iteration) + "/" +
           std::to_string(p.iterations) + std::string(kResidual) + std::string(residual, r.ptr) + "\n";
}

std::optional<Progress> parse_progress(const std::string& text) {
    std::string_view s = text;
    if (!s.empty() && s.back() == '\n') s.remove_suffix(1);
    Progress p;
    if (!eat(s, kPrefix)) return std::nullopt;
    const size_t colon = s.find(':');
    if (colon == std::string_view::npos || !valid_stage(s.substr(0, colon))) return std::nullopt;
    p.stage = std::string(s.substr(0, colon));
    s.remove_prefix(colon);
    if (!eat(s, kIteration) || !eat_uint(s, p.iteration) || !eat(s, "/") || !eat_uint(s, p.iterations) ||
        !eat(s, kResidual) || s.empty())
        return std::nullopt;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), p.residual);
    if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
    return p;
}

}  // namespace larmor::wire
