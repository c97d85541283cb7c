#pragma once
// Translation of Gadgetron XML chains (legacy <gadgetronStreamConfiguration> and
// <configuration><version>2</version>) into Larmor's chain message, by classname.
#include <string>
#include <vector>

#include "chain.pb.h"

namespace larmor {

// Throws ConfigError naming the offending element, classname or property value.
config::Chain translate_gadgetron_xml(const std::string& xml, const std::string& origin);

// Gadgetron classnames Larmor translates (for error messages and docs).
std::vector<std::string> supported_gadgetron_classnames();

}  // namespace larmor
