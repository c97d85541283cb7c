#pragma once
// The SPIRiT consistency operator in image space (Lustig & Pauly, MRM 64:457, 2010, Eq. 4 moved to image
// space by the convolution theorem): (G - I) x, with G(r) the per-pixel C x C matrix of the calibrated
// kernels (core/coils/spirit.h, spirit_image_kernels), y_i(r) = sum_j G_ij(r) x_j(r) - x_i(r), and its
// adjoint x_j(r) = sum_i conj(G_ij(r)) y_i(r) - y_j(r). A SPIRiT-consistent set of coil images has
// (G - I) x = 0; CG-SPIRiT minimises ||(G - I) x||^2 with the data, l1-SPIRiT projects onto it (Murphy
// et al., IEEE TMI 31:1250, 2012, Fig. 1).
#include "core/linops/linop.h"

namespace larmor {

// g: [X, Y..., C_source, C_target] as spirit_image_kernels gives it; the operator maps coil images
// [X, Y..., C] to [X, Y..., C]. The kernels are copied to the backend's device in the two layouts the
// forward and adjoint products read (core/linops/spirit_kernels.h: one pass over each per-pixel matrix).
LinOp spirit_consistency(std::shared_ptr<Backend> backend, const CArray& g);

// G itself, x <- G x: the SPIRiT step of POCS (l1-SPIRiT), one kernel without the identity's passes.
// g on the backend's device is used in place (not copied).
LinOp spirit_g(std::shared_ptr<Backend> backend, const CArray& g);

}  // namespace larmor
