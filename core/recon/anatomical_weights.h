#pragma once
// Edge weights for anatomically constrained regularisation (Haldar et al., "Anatomically constrained
// reconstruction from noisy data", MRM 59:810, 2008): the roughness penalty lambda ||R D rho||^2 stops
// at the edges of a reference image of the same anatomy (a high-resolution scan, or a gridding
// pre-reconstruction of the data themselves), so it smooths noise and undersampling artefacts inside
// each tissue without blurring the boundaries between them. R is diagonal with one weight per finite
// difference: 0 across an edge of the reference, 1 elsewhere (their binary choice).
#include "core/array.h"

namespace larmor {

// reference: the magnitude of the reference image [N0, N1] or [N0, N1, N2] on the host. A difference
// |ref(i + e_a) - ref(i)| above threshold x max |ref| is an edge (periodic ends, as
// core/linops/finite_difference.h). Returns the host weights [image..., dims] in the layout of that
// operator's output. Throws std::invalid_argument naming the value when the reference is empty, not
// 2D/3D, not finite, all zero, or the threshold is outside (0, 1).
RArray anatomical_edge_weights(const RArray& reference, float threshold);

// The fraction of differences that the weights leave unpenalised (weight 0), for logs and tests.
double edge_fraction(const RArray& weights);

}  // namespace larmor
