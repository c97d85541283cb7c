#pragma once
// Which F^H W F a CG over a trajectory uses: the NUFFT pair (a forward and an adjoint NUFFT per
// iteration: spreading and interpolation of every sample and two FFTs of the oversampled grid) or the
// Toeplitz embedding (core/linops/toeplitz.h: two FFTs of the 2N grid and a product with Q's spectrum,
// no sample touched, but Q to compute once per trajectory; Wajer & Pruessmann, ISMRM 2001; Fessler et
// al., IEEE TSP 53:3393, 2005). Neither wins everywhere: the pair's cost grows with the samples and the
// kernel width, Toeplitz's with the grid, and a trajectory that never repeats pays Q every buffer.
// So the choice is measured on the problem itself: one application of each, and Q's time.
#include "core/linops/linop.h"

namespace larmor {

struct NormalTimes {
    double pair = 0;      // seconds per application of the NUFFT pair's normal
    double toeplitz = 0;  // seconds per application of the Toeplitz normal
    double q = 0;         // seconds to compute Q's spectrum once
};

// Times one application of each operator (square, ishape = oshape) after one untimed application each
// (plans, first-touch allocation), the backend synchronised around each.
NormalTimes time_normals(LinearOperator& pair, LinearOperator& toeplitz, double q_seconds);

// True when Toeplitz costs less over `iterations` applications: with Q already at hand only the
// applications count; without it, Q's time is added to Toeplitz's side.
bool toeplitz_is_faster(const NormalTimes& t, int iterations, bool q_at_hand);

}  // namespace larmor
