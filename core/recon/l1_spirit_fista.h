#pragma once
// l1-SPIRiT in its penalised form, for noisy data: the coil images
//     x = argmin 1/2 ||M F x - y||^2 + (beta / 2) ||(G - I) x||^2 + lambda sum_v ||(W x)_v||_2
// (Lustig & Pauly, MRM 64:457, 2010, Eq. 10 with the joint l1 term of their Eq. 12 and of Murphy et
// al. 2012, Eq. 3) by FISTA (core/iter/fista.h) on the stacked operator [M F; sqrt(beta) (G - I)]
// (core/recon/cg_spirit.h), step 1 / L with L = ||E^H E|| from the power method.
//
// Why a second l1-SPIRiT next to POCS (core/recon/l1_spirit.h): POCS projects onto the samples, so
// every iterate keeps the acquired noise exactly, and with noise the POCS answer stays behind
// l1-wavelet SENSE (128^2 x 8 coils, Poisson R = 4, noise 10 %: 0.041 against 0.037 NRMSE). Relaxing
// POCS's projection does not fix it: the iteration of G, shrinkage and a partial projection has no
// anchor and decays towards zero (0.33 NRMSE at a weight of 0.7). The penalised form lets the prior
// average the samples' noise too, and reaches 0.034 on the same data (tests/core_l1_recon_test.cpp).
// Each iteration costs about twice a POCS iteration (G and G^H, two FFTs, the wavelet pair).
#include <memory>

#include "core/iter/fista.h"
#include "core/linops/wavelet.h"

namespace larmor {

struct L1SpiritFistaSettings {
    float lambda = 0.01f;           // relative to the zero-filled coil vector's RMS (as l1_spirit's)
    float consistency_lambda = 2.f; // beta, SPIRiT consistency against the data
    int iterations = 50;
    int levels = -1;                // wavelet levels (< 0: down to a low band of kDefaultCoarsest)
    int power_iterations = 20;
    bool cycle_spinning = true;
    double tolerance = 0.0;         // stop on ||x_k - x_{k-1}|| / ||x_k|| (core/iter/fista.h); 0: never
    bool track_residuals = true;    // false: no per-iteration read back (a timed benchmark)
};

struct L1SpiritFista {
    LinOp encoding;           // [M F; sqrt(beta) (G - I)]
    CArray images;            // x: coil images [RO, E1, E2, C], updated by the solver
    std::unique_ptr<Fista> solver;
    float threshold = 0.f;    // lambda in the data's units
    float lipschitz = 0.f;    // ||E^H E|| from the power method, with a 1 % margin
    WaveletGeometry wavelet;
};

// Shapes as l1_spirit's (2D, or 3D with the readout transformed: independent (E1, E2) slices).
// Throws std::invalid_argument naming the shapes or settings that do not fit.
L1SpiritFista l1_spirit_fista(std::shared_ptr<Backend> backend, const CArray& kspace, const RArray& mask,
                              const CArray& g, const L1SpiritFistaSettings& settings);

}  // namespace larmor
