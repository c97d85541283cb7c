#pragma once
// F^H W F as a Toeplitz convolution (Wajer & Pruessmann, ISMRM 2001; Fessler et al., IEEE TSP 53:3393,
// 2005; the "Q" of Stone et al. 2008): for the non-uniform DFT F (core/linops/nudft.h) and real sample
// weights W, (F^H W F)[n, n'] = q(n - n') with
//   q(j) = N^-1 sum_m w_m |phi(k_m)|^2 exp(2 pi i sum_a k[a, m] j_a / N_a),   j_a in [-N_a, N_a),
// a kernel that depends on the trajectory only. Embedded in a circulant matrix on the 2N grid, it is
// applied with two FFTs of twice the size per axis and one pointwise product:
//   F^H W F x = crop(F_c^-1 (K . F_c(pad(x)))),   K = sqrt(L) F_c(Q),  L = prod 2 N_a,
// with F_c the centred orthonormal FFT (core/backend.h) and Q the kernel centred on the 2N grid. The
// result is F^H W F exactly, to float rounding: no gridding error, whichever way Q was computed.
//
// Q itself is an adjoint NUDFT onto the 2N grid (O(2^d N M)): exactly by the NUDFT's kernels, or by
// the NUFFT (core/linops/nufft.h) at a tolerance, which is then the error of Q and of F^H W F.
#include <memory>

#include "core/linops/linop.h"
#include "core/linops/nudft.h"

namespace larmor {

struct ToeplitzOptions {
    enum class Method { Exact, Nufft };
    VoxelBasis basis = VoxelBasis::Dirac;  // must be the basis of the F it stands for
    Method method = Method::Exact;
    bool accurate_sincos = false;  // Exact: as NudftOptions
    double nufft_tolerance = 1e-6;  // Nufft: the NUFFT's tolerance (1e-6 .. 1e-1)
};

// K for an image of `image`'s shape (1 to 3 axes), points coords [dims, M] (cycles per FOV, on the host
// or the backend's device) and weights [M] (empty: all 1). Returns K [2 N_0, 2 N_1, ...] on the
// backend's device. Method::Nufft needs every point within [-N_a/2, N_a/2].
CArray toeplitz_spectrum(const std::shared_ptr<Backend>& be, const Shape& image, const RArray& coords,
                         const RArray& weights, const ToeplitzOptions& opts = {});

// F^H W F on [image..., batch] (each batch entry, e.g. each coil, convolved alike) from its spectrum.
// Hermitian and positive semi-definite: forward and adjoint are the same operation. Two work arrays of
// [2N..., batch] are allocated on first use.
LinOp toeplitz_normal(const std::shared_ptr<Backend>& be, const Shape& image, size_t batch, CArray spectrum);

}  // namespace larmor
