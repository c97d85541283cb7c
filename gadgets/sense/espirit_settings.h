#pragma once
// The ESPIRiT settings message (proto/chain.proto: EspiritSettings) read once for every gadget that
// estimates ESPIRiT maps: defaults filled in, ranges checked, refusals worded alike.
#include <string>

#include "chain.pb.h"
#include "core/coils/espirit.h"

namespace larmor {

// Throws ConfigError "<gadget>: <field>.<knob> <value> is outside <range>".
coils::EspiritSettings espirit_settings(const config::EspiritSettings& s, const std::string& gadget,
                                        const std::string& field = "espirit");

// "ESPIRiT (kernel 6, calibration 24, threshold 0.001, crop 0.8)": the maps' provenance.
std::string describe(const coils::EspiritSettings& s);

}  // namespace larmor
