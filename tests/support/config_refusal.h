#pragma once
// A gadget's settings message edited by `edit` and given to its factory `make`: the ConfigError's text
// when the factory refuses it, else "accepted". The tests of every gadget's range checks use it.
#include <string>

#include "gadgets/chain_config.h"

namespace larmor::test {

template <class Config, class Make, class Edit>
std::string refusal_of(Make make, Edit edit) {
    Config c;
    edit(c);
    try {
        make(c);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "accepted";
}

}  // namespace larmor::test
