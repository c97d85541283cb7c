#pragma once
// Iterative density compensation of Pipe & Menon ("Sampling density compensation in MRI: rationale and
// an iterative numerical solution", MRM 41:179, 1999): with C the gridding kernel's interpolation from
// the oversampled grid to the points, w <- w / (C C^H w) (their eq. 17) drives the kernel-smoothed
// density of the weighted points towards 1 everywhere, for any trajectory, with the same kernel the
// reconstruction grids with; so it also corrects the kernel's own blurring of the density, which an
// analytic |k| ramp ignores.
#include <cstdint>
#include <memory>

#include "core/backend.h"
#include "core/linops/nufft.h"

namespace larmor {

struct PipeMenonOptions {
    int iterations = 20;
    // Kernel of the iteration's plan (only its width matters here: a wider kernel smooths the density
    // estimate over more grid points).
    double tolerance = 1e-3;
};

// Weights [M] (host) for the points of coords [dims, M] (cycles per FOV of `image`), scaled per unit
// k-space area in cycles per FOV: a weighted sum over the points approximates the integral over the
// sampled region, so that an adjoint NUFFT of weighted data has the units of the image (A^H W A ~ I
// where k-space is fully covered). Runs on `be` (the spreading and interpolation are the plan's).
RArray pipe_menon_density(std::shared_ptr<Backend> be, const Shape& image, const RArray& coords,
                          const PipeMenonOptions& opts = {});

}  // namespace larmor
