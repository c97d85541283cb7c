#pragma once
// The shapes a SPIRiT reconstruction (CG-SPIRiT, l1-SPIRiT) takes, checked once for both:
// 2D k-space [RO, E1, 1, C] with mask [RO, E1] and kernels [RO, E1, C, C]; 3D k-space [RO, E1, E2, C]
// whose readout is already in image space, mask [RO, E1, E2], kernels [RO, E1, E2, C, C].
#include "core/backend.h"

namespace larmor {

struct SpiritProblem {
    size_t ro = 0, e1 = 0, e2 = 0, coils = 0;
    bool volume = false;
    AxisMask kspace_axes = 0;  // the axes still in k-space: E1 (and E2)
};

// Throws std::invalid_argument "<who>: ..." naming the array whose shape does not fit.
SpiritProblem spirit_problem(const char* who, const CArray& kspace, const RArray& mask, const CArray& g);

}  // namespace larmor
