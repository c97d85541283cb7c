#pragma once
// The CG-SENSE problem of one Cartesian k-space buffer (Pruessmann et al., "Advances in sensitivity
// encoding with arbitrary k-space trajectories", MRM 46:638, 2001), set up on the operator core:
//   E = M F S: coil maps S, centred FFT F over x, y (and z), the sampled lines M;
//   x = argmin ||E x - y||^2 + lambda ||x||^2, by CG on (E^H E + lambda I) x = E^H y from x = 0.
// With a second set of maps (ESPIRiT's two sets, Uecker et al. 2014, "soft SENSE") E = M F [S_1 S_2]
// acts on two images one after another, and the image is their root sum of squares.
// With unit-norm maps and a unitary FFT, E^H E has its spectrum in [0, 1], so lambda is relative to
// the data term whatever the scale of the data. The gadget runs the solver's loop (progress,
// deadline); benchmarks and tests use the same set-up.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/iter/cg.h"
#include "core/linops/linop.h"

namespace larmor {

struct CartesianSense {
    LinOp encoding;                          // E: [RO, E1, E2] (two sets: [2 RO E1 E2]) -> [RO, E1, E2, C]
    CArray image;                            // x, updated by the solver
    std::unique_ptr<ConjugateGradient> solver;
    // Which normal operator CG runs on, for the log: "fused", or "composed" with the reason.
    std::string normal;
};

// kspace [RO, E1, E2, C] on the backend, unsampled lines zero; sampled: (e1, e2) lines acquired (E1
// fastest, 1 = sampled); maps (and the second set, when not empty) [RO, E1, E2, C] on the backend.
// fused: CG on the fused normal operator (core/linops/sense_normal.h) where it applies (a 2D slice, one
// set of maps, a phase-encode count the device's kernel has); false: always the composed E^H E (the
// reference the tests and benchmarks compare it with).
CartesianSense cartesian_sense(std::shared_ptr<Backend> backend, const CArray& kspace,
                               const std::vector<uint8_t>& sampled, const CArray& maps, float lambda,
                               CGOptions options, const CArray& second_maps = CArray{}, bool fused = true);

}  // namespace larmor
