#pragma once
// What a call refuses with: the text of the exception of type E (std::invalid_argument unless said)
// that f() throws, or "accepted" when it returns. Tests of "refused, naming the offending value" check
// the text with find() or compare it whole.
#include <stdexcept>
#include <string>

namespace larmor::test {

template <class E = std::invalid_argument, class F>
std::string refusal_text(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    }
    return "accepted";
}

}  // namespace larmor::test
