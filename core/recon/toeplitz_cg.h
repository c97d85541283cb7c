#pragma once
// Iterative reconstruction of arbitrary-trajectory data by regularised least squares (Stone et al.,
// J. Parallel Distrib. Comput. 68:1307, 2008, eq. 2; Sutton, Noll & Fessler, IEEE TMI 22:178, 2003):
//   rho = argmin ||W^1/2 (F S rho - d)||^2 + lambda ||R rho||^2,
// solved by CG on the normal equations (S^H F^H W F S + lambda R^H R) rho = S^H F^H W d, with
//   F^H W d   exactly, by the non-uniform DFT with the voxel basis (core/linops/nudft.h: "FHd"), or by the
//             NUFFT (its tolerance is then the error of the right-hand side);
//   F^H W F   as the Toeplitz convolution with the trajectory's kernel Q (core/linops/toeplitz.h), or by
//             the NUFFT pair (forward then adjoint) for comparison;
//   S         coil sensitivities (core/linops/sense.h), or none for single-coil data;
//   R         the identity (Tikhonov), first-order finite differences along every image axis, or those
//             differences weighted by the edges of an anatomical reference (core/recon/anatomical_weights.h).
// The operator is built from the core's algebra: E = W^1/2 F S with F's normal replaced by Q
// (with_normal), so E's normal is S^H Q S without this file knowing how.
//
// lambda is relative: it multiplies the mean of diag(E^H E) = q(0) mean_n sum_c |s_c(n)|^2 (q(0) =
// N^-1 sum_m w_m |phi_m|^2), so the same value regularises a dense or a sparse trajectory, one coil or
// thirty-two, data at any scale, equally.
#include <memory>
#include <string>

#include "core/iter/cg.h"
#include "core/linops/nudft.h"
#include "core/linops/nufft.h"
#include "core/linops/toeplitz.h"

namespace larmor {

struct ToeplitzCgSetup {
    enum class Adjoint { Exact, Nufft };
    enum class Normal { Toeplitz, NufftPair };
    enum class Regularizer { Identity, FiniteDifference, AnatomicalFiniteDifference };
    VoxelBasis basis = VoxelBasis::Dirac;
    Adjoint adjoint = Adjoint::Exact;
    Normal normal = Normal::Toeplitz;
    ToeplitzOptions::Method q = ToeplitzOptions::Method::Exact;
    bool accurate_sincos = false;
    NufftOptions nufft;  // the NUFFT's accuracy where one is used (adjoint, Q, the pair)
    Regularizer regularizer = Regularizer::Identity;
    // AnatomicalFiniteDifference: one weight per difference, [image..., dims] (anatomical_edge_weights).
    RArray edge_weights;
    float lambda = 0.01f;
    CGOptions cg{60, 1e-6};
};

struct ToeplitzCg {
    CArray image;                                // rho [image...], updated by the solver
    std::unique_ptr<ConjugateGradient> solver;
    CArray spectrum;                             // Q's spectrum, for reuse with the same trajectory (Toeplitz only)
    double lambda_absolute = 0.0;                // lambda x mean diag(E^H E)
    double data_term_scale = 0.0;                // mean diag(E^H E)
};

// image: [N0, N1] or [N0, N1, N2]; coords [dims, M] (cycles per FOV); data [M, C] on be; maps
// [image..., C] on be, or empty for single-coil data (C = 1); weights [M] (>= 0), or empty for W = I;
// spectrum: Q's spectrum for these coords, image, weights, basis and method (from an earlier call),
// or empty to compute it. Throws std::invalid_argument naming the offending shape or value.
ToeplitzCg toeplitz_cg(const std::shared_ptr<Backend>& be, const Shape& image, const RArray& coords, const CArray& data,
                       const CArray& maps, const RArray& weights, const ToeplitzCgSetup& setup, CArray spectrum = {});

const char* regularizer_name(ToeplitzCgSetup::Regularizer r);

// The options toeplitz_cg computes Q's spectrum with, for a caller that computes (and keeps) it itself.
ToeplitzOptions toeplitz_options(const ToeplitzCgSetup& setup);

}  // namespace larmor
