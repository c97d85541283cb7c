#pragma once
// The ISMRMRD XML header of a small synthetic Cartesian scan, for tests that speak the wire protocol
// by hand: one encoding, `x` x `y` x `z` encoded (and reconstructed) matrix, `channels` receivers,
// every phase-encode line of y sampled with the centre at y/2.
#include <cstdint>
#include <string>

#include "wire/messages.h"

namespace larmor::test {

std::string cartesian_header_xml(unsigned x = 32, unsigned y = 16, unsigned z = 1, unsigned channels = 2);

// Line `line` of such a scan (its scan_counter too), the centre sample in the middle, LAST_IN_SLICE
// on the last line; `samples` x `channels` zeros for the caller to fill.
wire::Acquisition cartesian_readout(uint16_t samples, uint16_t channels, uint16_t line, bool last = false);

}  // namespace larmor::test
