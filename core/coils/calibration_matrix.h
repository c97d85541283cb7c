#pragma once
// The calibration (Hankel) matrix of a fully sampled block of multi-coil k-space, the object every
// autocalibrating method starts from (GRAPPA, SPIRiT, ESPIRiT): one row per position of a kernel window
// inside the block, one column per sample of the window and coil (Uecker et al., "ESPIRiT: an
// eigenvalue approach to autocalibrating parallel MRI", MRM 71:990, 2014, section "Theory", matrix A).
#include <cstddef>

#include <vector>

#include "core/backend.h"

namespace larmor::coils {

// A block [cx, cy, C] (x fastest) of host k-space cut out of k-space [RO, E1, E2 = 1, C] (host): cx
// samples along RO centred on RO / 2 and cy lines along E1 centred on the middle of [e1_lo, e1_hi),
// each no more than the requested size and no more than what is there. Throws std::invalid_argument
// naming the shapes when the lines are outside k-space.
CArray calibration_block(const CArray& kspace, size_t e1_lo, size_t e1_hi, size_t cx, size_t cy);

// The 3D block [cx, cy, cz, C] of host k-space [RO, E1, E2, C]: cx samples centred on RO / 2, cy and cz
// lines centred on the middles of [e1_lo, e1_hi) and [e2_lo, e2_hi), each no more than what is there.
CArray calibration_block_3d(const CArray& kspace, size_t e1_lo, size_t e1_hi, size_t e2_lo, size_t e2_hi, size_t cx,
                            size_t cy, size_t cz);

// The calibration region of 3D k-space [RO, E1, E2, C] (on the backend) after an inverse FFT along the
// readout, which decouples the readout positions: per position x a 2D block [cy, cz, C] of the lines
// [e1_lo, e1_hi) x [e2_lo, e2_hi), each axis cut to at most `most` lines around the region's middle.
// ESPIRiT and SPIRiT calibrate each position of a 3D scan on its own block.
struct HybridBlocks {
    size_t ro = 0, cy = 0, cz = 0, coils = 0;
    CArray all;                  // host [cy, RO, cz, C]: every position's block side by side
    std::vector<double> energy;  // per position: the block's energy
    // Position x's block, host [cy, cz, C].
    CArray block(size_t x) const;
};
HybridBlocks hybrid_calibration_blocks(Backend& be, const CArray& kspace, size_t e1_lo, size_t e1_hi, size_t e2_lo,
                                       size_t e2_hi, size_t most, const char* who);

// A [rows, k * k * C] (rows fastest, i.e. column-major) with rows = (cx - k + 1) (cy - k + 1): row
// (wx + (cx - k + 1) wy) holds block[wx + px, wy + py, c] in column px + k py + k^2 c. Throws
// std::invalid_argument naming the block and kernel when the kernel does not fit. A 3D block
// [cx, cy, cz, C] gives k^3 windows: column px + k (py + k (pz + k c)), rows over the window positions
// x fastest.
CArray calibration_matrix(const CArray& block, int kernel);

}  // namespace larmor::coils
