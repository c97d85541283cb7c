#pragma once
// The ISMRMRD XML header of a small synthetic Cartesian scan, for tests that speak the wire protocol
// by hand: one encoding, `x` x `y` x `z` encoded (and reconstructed) matrix, `channels` receivers,
// every phase-encode line of y sampled with the centre at y/2.
#include <string>

namespace larmor::test {

std::string cartesian_header_xml(unsigned x = 32, unsigned y = 16, unsigned z = 1, unsigned channels = 2);

}  // namespace larmor::test
