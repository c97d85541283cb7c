#pragma once
// l1-SPIRiT by POCS (Lustig & Pauly, MRM 64:457, 2010; Murphy et al., "Fast l1-SPIRiT compressed
// sensing parallel imaging MRI", IEEE TMI 31:1250, 2012, Figure 1) on Cartesian coil images: from the
// zero-filled images, each iteration applies
//   1. SPIRiT consistency   x <- G x          (image-space G, core/linops/spirit.h)
//   2. joint sparsity       x <- W^H S(W x)   (Daubechies-4, shrinkage joint over coils, Murphy Eq. 3)
//   3. data consistency     x <- F^H (F x + M (y - F x))
// so every iterate agrees with the acquired samples. The threshold is lambda times the RMS of the
// zero-filled coil vector per voxel, so lambda does not depend on the data's scale.
#include <memory>

#include "core/iter/pocs.h"
#include "core/linops/wavelet.h"

namespace larmor {

struct L1SpiritSettings {
    float lambda = 0.02f;  // relative threshold (above); tests/core_l1_recon_test.cpp measured it
    int iterations = 50;
    int levels = -1;       // wavelet levels (< 0: down to a low band of kDefaultCoarsest, core/linops/wavelet.h)
    bool cycle_spinning = true;  // a new random shift of the wavelet basis every iteration (BART's default)
    bool track_residuals = true;
    double tolerance = 0.0;  // stop on the relative change (core/iter/pocs.h); 0: run every iteration
    // >= 0: the absolute threshold to apply instead of lambda's (a slab of a split volume takes the
    // whole volume's, core/recon/l1_spirit_slabs.h).
    float threshold = -1.f;
};

struct L1Spirit {
    CArray images;               // x: coil images [RO, E1, E2, C], updated by the solver
    std::unique_ptr<Pocs> solver;
    float threshold = 0.f;       // the absolute threshold applied
    WaveletGeometry wavelet;
};

// 2D: kspace [RO, E1, 1, C] on the backend, unsampled samples zero; mask [RO, E1] host 0/1 (the
// sampled samples); g [RO, E1, C, C] from spirit_image_kernels.
// 3D (E2 > 1): kspace [RO, E1, E2, C] with the readout already transformed to image space, which
// decouples the RO positions into independent (E1, E2) slices (Murphy et al. Section III.A); mask
// [RO, E1, E2]; g [RO, E1, E2, C, C], each slice's own kernels. FFTs and wavelets then run over E1 and
// E2 only, batched over all slices.
// Throws std::invalid_argument naming the shapes or settings that do not fit.
L1Spirit l1_spirit(std::shared_ptr<Backend> backend, const CArray& kspace, const RArray& mask, const CArray& g,
                   const L1SpiritSettings& settings);

}  // namespace larmor
