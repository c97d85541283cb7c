#pragma once
// l1-wavelet SENSE on Cartesian data, what BART's `pics -l1` computes: the image
//     x = argmin 1/2 ||M F S x - y||^2 + lambda ||W x||_1
// (Lustig, Donoho & Pauly, "Sparse MRI", MRM 58:1182, 2007, with SENSE encoding; Block et al. 2007)
// by FISTA (core/iter/fista.h) with the step 1 / L, L = ||E^H E|| by the power method, and the
// Daubechies-4 wavelet W over the encoded axes. lambda is relative: the threshold is lambda times the
// RMS of the zero-filled image E^H y, so it does not depend on the data's scale.
#include <cstdint>
#include <memory>

#include "core/iter/fista.h"
#include "core/linops/wavelet.h"

namespace larmor {

struct L1WaveletSenseSettings {
    float lambda = 0.01f;   // relative (above); tests/core_l1_recon_test.cpp measured it
    int iterations = 50;
    int levels = -1;           // wavelet levels (< 0: down to a low band of kDefaultCoarsest, core/linops/wavelet.h)
    int power_iterations = 20;
    bool cycle_spinning = true;  // a new random shift of the wavelet basis every iteration (BART's default)
    size_t coarsest = kDefaultCoarsest;  // with levels < 0: the low band's size per axis (core/linops/wavelet.h)
    uint64_t shift_seed = 1;     // the shifts' generator (core/iter/wavelet_threshold.h)
};

struct L1WaveletSense {
    LinOp encoding;            // E = M F S: [RO, E1, E2] -> [RO, E1, E2, C]
    CArray image;              // x, updated by the solver
    std::unique_ptr<Fista> solver;
    float threshold = 0.f;     // lambda in the data's units
    float lipschitz = 0.f;     // the power method's ||E^H E|| (times a 1 % margin)
    WaveletGeometry wavelet;
};

// kspace [RO, E1, E2, C] on the backend, unsampled samples zero; mask [RO, E1, E2] host 0/1; maps
// [RO, E1, E2, C] on the backend. Throws std::invalid_argument naming what does not fit.
L1WaveletSense l1_wavelet_sense(std::shared_ptr<Backend> backend, const CArray& kspace, const RArray& mask,
                                const CArray& maps, const L1WaveletSenseSettings& settings);

}  // namespace larmor
