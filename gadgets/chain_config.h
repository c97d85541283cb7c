#pragma once
// Loading and validating chain configurations: Larmor's Protobuf text format (config/*.pbtxt,
// schema proto/chain.proto) and Gadgetron XML chains (legacy gadgetronStreamConfiguration and
// <configuration><version>2), translated by classname into the same message.
#include <stdexcept>
#include <string>
#include <vector>

#include "chain.pb.h"

namespace larmor {

// A user-facing configuration error; the message names the offending value and, for unknown
// names, lists the valid ones.
class ConfigError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Parses a chain from text: XML (first non-space character '<') or Protobuf text format.
config::Chain parse_chain(const std::string& text, const std::string& origin = "inline chain");

// Resolves a CONFIG_FILE name inside `config_dir` only: no '/', no "..", no NUL; tries the name
// itself, then name + ".pbtxt" (so "default.xml" and "cartesian" both work). Throws ConfigError.
config::Chain load_chain_file(const std::string& config_dir, const std::string& name);

// Throws ConfigError unless `name` is a plain file name (CONFIG_FILE names come from the network).
void check_config_name(const std::string& name);

// Names of the chains available in `config_dir` (for the info query and error messages).
std::vector<std::string> list_chains(const std::string& config_dir);

// Gadget type names Larmor knows (the oneof fields of larmor.config.Gadget).
std::vector<std::string> known_gadget_types();

// Where a parameter of a chain message went when it moved into a shared settings message (its old
// name reserved in proto/chain.proto): "solver.iterations" for CgSense's "iterations"; empty for any
// other name.
std::string moved_parameter(const google::protobuf::Descriptor& message, const std::string& field);

// Display name of one gadget of a chain: its `name` if set, else its type.
std::string gadget_display_name(const config::Gadget& g);

}  // namespace larmor
