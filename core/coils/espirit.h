#pragma once
// ESPIRiT coil sensitivities (Uecker et al., "ESPIRiT: an eigenvalue approach to autocalibrating
// parallel MRI", MRM 71:990, 2014), in two steps:
//  1. kernels: the signal subspace V of the calibration matrix A (core/coils/calibration_matrix.h),
//     the right singular vectors whose singular values are at least `threshold` times the largest,
//     from the eigendecomposition of the Gram matrix on the backend (core/dense/dense.h);
//  2. maps: the projection P = V V^H, applied to every window of k-space and averaged (the operator W
//     of the paper, section "Theory"), is a pointwise C x C matrix G(r) in image space:
//        G(r) = sum_d K(d) exp(+2 pi i d . r / N),  K(d)_{c c'} = k^-2 sum_p P[(p, c), (p - d, c')]
//     over the (2k - 1)^2 window offsets d and pixel coordinates r relative to the image centre. The
//     sensitivities are G's eigenvectors of eigenvalue 1; where G's largest eigenvalue is below `crop`
//     no coil sees signal and the maps are zero (the paper's support mask, BART's `ecalib -c`).
//     Where the FOV is smaller than the object, two sensitivity vectors (of the pixel and of the object
//     folded onto it) both have eigenvalue 1: a second set of maps, G's second eigenvector cropped alike
//     (the paper's "soft SENSE" with two maps, BART's `ecalib -m2`), lets the reconstruction keep both.
// The eigenvector of each pixel is found by power iteration on G(r), which the backend evaluates
// separably (along x, then y). Its phase is rotated so that its projection on the first principal
// component of the calibration data is real and positive (as BART does), which makes the phase smooth
// across the image and the same from frame to frame.
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "core/backend.h"

namespace larmor::coils {

struct EspiritSettings {
    int kernel = 6;             // k: kernel width along each axis (BART ecalib -k)
    size_t calibration = 24;    // the most calibration samples used along each axis (BART ecalib -r)
    // Singular values kept: sigma >= threshold * sigma_max (BART ecalib -t). 0.02 as SigPy's
    // EspiritCalib: BART's 0.001 also keeps near-null vectors, whose eigenvalues crowd the top one and
    // stall the power iteration (larmor-phantom 128^2, 8 coils, 30 iterations: mean agreement with the
    // true maps 0.938 at 0.001, 0.99997 at 0.02; tests/core_espirit_test.cpp).
    float threshold = 0.02f;
    float crop = 0.8f;          // maps zeroed where G's largest eigenvalue is below this (BART ecalib -c)
    int iterations = 30;        // power iterations per pixel
    int sets = 1;               // sets of maps, 1 or 2 (BART ecalib -m)
};

// Calibration data ESPIRiT cannot use: no signal, or samples that are not finite (k-space that
// overflowed float). Other failures (memory, devices) keep their own types.
class EspiritError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Throws std::invalid_argument naming the first setting outside its range.
void check(const EspiritSettings& s);

// Step 1. block: host [cx, cy, C]; kernel and threshold from `s`. The block is divided by its largest
// magnitude first: the subspace does not depend on the data's scale, and the Gram matrix squares it,
// which would underflow or overflow float for data at 1e-12 or 1e14 (tests/scale_robustness_test.cpp).
// Throws EspiritError for a block without signal or with non-finite samples.
struct EspiritKernels {
    int kernel = 0;
    size_t coils = 0;
    std::vector<float> singular_values;  // of A / (the block's largest magnitude), descending
    size_t kept = 0;                     // how many span the signal subspace
    CArray subspace;                     // host [k * k * C, kept]: an orthonormal basis of the signal subspace
    std::vector<cfloat> principal;       // host [C]: first principal component of the block's coils
};
EspiritKernels espirit_kernels(Backend& be, const CArray& block, const EspiritSettings& s);

// Step 2. maps [N1, N2, C] (on the backend, x fastest) and G's largest eigenvalue [N1, N2]; with two
// sets also the second set and G's second eigenvalue, of the same shapes (empty with one set).
struct EspiritMaps {
    CArray maps;
    RArray eigenvalues;
    CArray second;
    RArray second_eigenvalues;
};
EspiritMaps espirit_maps(Backend& be, const EspiritKernels& kernels, size_t n1, size_t n2, const EspiritSettings& s);

// Both steps for a Cartesian k-space buffer [RO, E1, 1, C] (on the backend) whose lines
// [e1_lo, e1_hi) are fully sampled: maps (and the second set) [RO, E1, 1, C] on the backend.
EspiritMaps espirit_maps(Backend& be, const CArray& kspace, size_t e1_lo, size_t e1_hi, const EspiritSettings& s);

// 3D Cartesian k-space [RO, E1, E2, C] (on the backend, E2 > 1) whose lines [e1_lo, e1_hi) x
// [e2_lo, e2_hi) are fully sampled: the fully sampled readout is transformed to image space first, which
// decouples the readout positions, and each position x gets the 2D maps [E1, E2] of its own calibration
// block. Positions whose block holds less than threshold^2 of the strongest block's energy (where no
// singular value would survive the threshold of a joint calibration) get zero maps. One phase reference
// for all: the principal component of the whole calibration region, so the phase is continuous along x.
// maps [RO, E1, E2, C] and eigenvalues [RO, E1, E2] on the backend (the second set alike).
EspiritMaps espirit_maps_3d(Backend& be, const CArray& kspace, size_t e1_lo, size_t e1_hi, size_t e2_lo, size_t e2_hi,
                            const EspiritSettings& s);

}  // namespace larmor::coils
