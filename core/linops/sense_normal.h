#pragma once
// The normal operator of Cartesian CG-SENSE on one 2D slice, fused:
//     N x = S^H F_y^H M F_y S x + lambda x
// with S the coil maps, F_y the centred orthonormal FFT along the phase-encoding axis E1 and M the
// weights of the sampled lines (Pruessmann et al., MRM 46:638, 2001, eq. 8 with the readout transform
// cancelled: core/linops/sampled_fft.h). The composed operator streams the coil array through memory
// ten times (bench/FLOORS-cg-sense.md); here each column of the image (fixed readout position) is
// expanded to the coils, transformed, masked, transformed back and combined without leaving the
// chip, so the maps are read once and the image once: 1 pass over the coil array instead of 10.
//
// Two facts make the column pipeline short: the centring shifts of F_y cancel in F_y^H M F_y up to a
// shift of the mask (a circulant matrix commutes with cyclic shifts), so the kernels run plain DFTs
// against M shifted by E1/2; and the 1/E1 of the transform pair is folded into that mask.
//
// CUDA: a column's E1 samples are held by a few threads as a two-factor Cooley-Tukey transform in
// registers (E1 = N1 x N2; one exchange through shared memory per direction), coils are dealt to the
// blocks of a thread-block cluster, and the cluster sums its partial images in distributed shared
// memory in a fixed order (deterministic). E1 of 64, 128 or 256. CPU: tiles of columns through FFTW
// (estimate plans, so every session runs the same plan and gets bit-identical images), any E1.
#include <memory>
#include <string>
#include <vector>

#include "core/linops/linop.h"

namespace larmor {

// Empty when sense_normal() takes maps of `maps_shape` on `device`; otherwise why not (for the log).
// maps: [RO, E1, C] or [RO, E1, 1, C].
std::string sense_normal_unsupported(const Shape& maps_shape, Device device);

// maps on (or for) the backend; lines: E1 non-negative weights, 1 for a sampled line and 0 for a
// missing one; lambda >= 0. The operator acts on images of maps' shape without the coil axis, and is
// Hermitian (forward = adjoint). Throws std::invalid_argument naming the unsupported value.
LinOp sense_normal(std::shared_ptr<Backend> backend, const CArray& maps, const std::vector<float>& lines, float lambda);

}  // namespace larmor
