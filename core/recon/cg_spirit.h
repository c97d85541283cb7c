#pragma once
// CG-SPIRiT on Cartesian data (Lustig & Pauly, "SPIRiT: iterative self-consistent parallel imaging
// reconstruction from arbitrary k-space", MRM 64:457, 2010, Eq. 10 with the data-consistency term as a
// penalty, as their reference code's image-domain solver does): the coil images
//     x = argmin ||M F x - y||^2 + lambda ||(G - I) x||^2
// with M F the sampled centred FFT (core/linops/sampled_fft.h) and (G - I) the image-space SPIRiT
// operator (core/linops/spirit.h), by CG on the stacked operator [M F; sqrt(lambda) (G - I)]. Unlike
// SENSE, no coil maps: the coil images come out unaliased and are combined afterwards.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/iter/cg.h"
#include "core/linops/linop.h"

namespace larmor {

struct CgSpirit {
    LinOp encoding;    // [M F; sqrt(lambda) (G - I)]: [RO, E1, 1, C] -> the k-space and the consistency residual, flat
    CArray images;     // x, [RO, E1, 1, C], updated by the solver
    std::unique_ptr<ConjugateGradient> solver;
};

// The stacked operator [M F; sqrt(lambda) (G - I)] of the penalised SPIRiT problem (CG-SPIRiT's, and
// the smooth part of l1-SPIRiT's penalised form, core/recon/l1_spirit_fista.h); shapes as cg_spirit
// below, checked with `who` in the messages.
LinOp spirit_encoding(std::shared_ptr<Backend> backend, const CArray& kspace, const RArray& mask, const CArray& g,
                      float lambda, const char* who);

// kspace [RO, E1, 1, C] on the backend, unsampled lines zero; sampled: the E1 lines acquired (1 =
// sampled); g [RO, E1, C, C] from spirit_image_kernels; lambda > 0 weighs SPIRiT consistency against
// the data. Throws std::invalid_argument naming the shapes when they do not agree.
CgSpirit cg_spirit(std::shared_ptr<Backend> backend, const CArray& kspace, const std::vector<uint8_t>& sampled,
                   const CArray& g, float lambda, CGOptions options);

// The same with any sampling pattern: mask [RO, E1] host 0/1. 3D (E2 > 1): kspace [RO, E1, E2, C] with
// the readout already transformed (independent (E1, E2) slices, as core/recon/l1_spirit.h), mask
// [RO, E1, E2], g [RO, E1, E2, C, C] (spirit_image_kernels_3d); the FFTs then run over E1 and E2.
CgSpirit cg_spirit(std::shared_ptr<Backend> backend, const CArray& kspace, const RArray& mask, const CArray& g,
                   float lambda, CGOptions options);

}  // namespace larmor
