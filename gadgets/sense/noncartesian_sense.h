#pragma once
// Non-Cartesian CG-SENSE (Pruessmann, Weiger, Boernert & Boesiger, "Advances in sensitivity encoding
// with arbitrary k-space trajectories", MRM 46:638, 2001) on the operator core:
//   E = W^1/2 F_nu S: coil maps S, the NUFFT F_nu at the trajectory, density weights W;
//   x = argmin ||E x - W^1/2 y||^2 + lambda ||x||^2 by CG from x = 0.
// The density weighting is the paper's (its eq. 12 uses D = the density compensation in E^H D E): it
// makes E^H E close to the identity where k-space is covered, so CG converges in few iterations and
// lambda stays relative to the data term as in the Cartesian case.
// Coil maps: Walsh's method (core/coils/calibration.h) on low-resolution coil images gridded from
// the samples within `calibration_radius` cycles/FOV of the k-space centre, tapered by a Hann window in
// |k| (no ringing in the maps); those samples are measured by every radial or spiral readout, so no
// separate calibration scan is needed.
#include <memory>

#include "core/coils/espirit.h"
#include "core/iter/cg.h"
#include "core/linops/nufft.h"
#include "gadgets/message.h"

namespace larmor {

struct NoncartesianSenseSetup {
    float calibration_radius = 12.f;  // cycles per FOV
    int map_kernel = 7, map_stride = 7;
    // ESPIRiT maps (noncartesian_espirit_maps) instead of Walsh's.
    bool espirit = false;
    coils::EspiritSettings espirit_settings;
    float lambda = 0.01f;
    CGOptions cg;
    // Q's spectrum for these points, grid and weights (core/linops/toeplitz.h): F^H W F is then the
    // Toeplitz embedding instead of the NUFFT pair (core/recon/normal_choice.h says when that pays).
    // Empty: the pair.
    CArray toeplitz_spectrum;
};

struct NoncartesianSense {
    LinOp encoding;  // E: image [X, Y(, Z)] -> [M, C]
    CArray maps;     // [X, Y, Z, C]
    CArray image;    // x [X, Y(, Z)], updated by the solver
    std::unique_ptr<ConjugateGradient> solver;
};

// Walsh coil maps [X, Y, Z, C] from the low-resolution coil images of the samples within `radius`
// (cycles/FOV) of the k-space centre, gridded by `plan` (tb's image x coils at tb's points) with the
// density weights (host [M]) times a Hann taper in |k|.
CArray noncartesian_coil_maps(const std::shared_ptr<Backend>& be, const TrajectoryBuffer& tb, Nufft& plan,
                              const RArray& weights_host, float radius, int map_kernel, int map_stride);

// ESPIRiT maps [X, Y, Z, C] (core/coils/espirit.h) from the gridded k-space centre: the samples within
// half the calibration block's diagonal (plus one cycle) of the centre, density-weighted and untapered,
// gridded onto the image grid by `plan` and transformed back to Cartesian k-space, whose central
// calibration x calibration block (x calibration in 3D) ESPIRiT calibrates on.
CArray noncartesian_espirit_maps(const std::shared_ptr<Backend>& be, const TrajectoryBuffer& tb, Nufft& plan,
                                 const RArray& weights_host, const coils::EspiritSettings& s);

// W^1/2 F_nu: image x coils -> [M, coils], the part of E whose normal the Toeplitz embedding replaces.
// weights [M] on the backend.
LinOp weighted_nufft(const std::shared_ptr<Backend>& be, const std::shared_ptr<Nufft>& plan, const RArray& weights);

// plan: a NUFFT of tb's image x coils at tb's points (M = samples x readouts); weights [M] on the
// backend, per unit k-space area (gadgets/noncart/density_weights.h).
NoncartesianSense noncartesian_sense(const std::shared_ptr<Backend>& be, const TrajectoryBuffer& tb,
                                     const std::shared_ptr<Nufft>& plan, const RArray& weights,
                                     const NoncartesianSenseSetup& setup);

}  // namespace larmor
