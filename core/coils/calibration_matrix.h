#pragma once
// The calibration (Hankel) matrix of a fully sampled block of multi-coil k-space, the object every
// autocalibrating method starts from (GRAPPA, SPIRiT, ESPIRiT): one row per position of a kernel window
// inside the block, one column per sample of the window and coil (Uecker et al., "ESPIRiT: an
// eigenvalue approach to autocalibrating parallel MRI", MRM 71:990, 2014, section "Theory", matrix A).
#include <cstddef>

#include "core/array.h"

namespace larmor::coils {

// A block [cx, cy, C] (x fastest) of host k-space cut out of k-space [RO, E1, E2 = 1, C] (host): cx
// samples along RO centred on RO / 2 and cy lines along E1 centred on the middle of [e1_lo, e1_hi),
// each no more than the requested size and no more than what is there. Throws std::invalid_argument
// naming the shapes when the lines are outside k-space.
CArray calibration_block(const CArray& kspace, size_t e1_lo, size_t e1_hi, size_t cx, size_t cy);

// A [rows, k * k * C] (rows fastest, i.e. column-major) with rows = (cx - k + 1) (cy - k + 1): row
// (wx + (cx - k + 1) wy) holds block[wx + px, wy + py, c] in column px + k py + k^2 c. Throws
// std::invalid_argument naming the block and kernel when the kernel does not fit.
CArray calibration_matrix(const CArray& block, int kernel);

}  // namespace larmor::coils
