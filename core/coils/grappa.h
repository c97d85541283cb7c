#pragma once
// GRAPPA (Griswold et al., "Generalized autocalibrating partially parallel acquisitions", MRM 47:1202,
// 2002), applied in image space as Gadgetron and most vendors do:
//  1. kernels: on the fully sampled calibration (ACS) block, each missing k-space point of a lattice
//     cell (R1 x R2 points, one of them acquired) is fitted as a linear combination of the acquired
//     points around it (kernel_ro samples x kernel_e1 acquired lines x kernel_e2 acquired partitions,
//     all coils) by Tikhonov-regularised least squares, W = (A^H A + lambda' I)^-1 A^H B, one Cholesky
//     for every target (core/dense/dense.h). lambda' = lambda * trace(A^H A) / columns, so lambda does not
//     depend on the data's scale or the coil count.
//  2. unmixing: the fitted weights are one convolution kernel K_dc over the zero-filled k-space (the
//     targets of one lattice offset take only the acquired points, so the offsets never mix). By the
//     convolution theorem its image-space form is a pointwise C x C matrix U(r) = sqrt(N) IFFT(K)(r)
//     that maps aliased coil images onto unaliased ones; combined with unit-norm coil maps s(r) this is
//     one weight per coil and pixel, u_c(r) = sum_d conj(s_d(r)) U_dc(r) (Breuer et al., "Dynamic
//     autocalibrated parallel imaging using temporal GRAPPA", MRM 53:981, 2005, for the image-space
//     form). A frame then costs one inverse FFT and a weighted coil sum, on the backend's device.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/coils/calibration.h"

namespace larmor::coils {

struct GrappaSettings {
    // Gadgetron's defaults (GenericReconCartesianGrappaGadget: grappa_kSize_RO/E1/E2, grappa_reg_lamda).
    int kernel_ro = 5;       // samples along the readout, odd
    int kernel_e1 = 4;       // acquired lines along E1
    int kernel_e2 = 4;       // acquired partitions along E2 (3D with R2 > 1 only)
    float lambda = 5e-4f;    // Tikhonov weight relative to the mean of diag(A^H A)
    // The most calibration-matrix rows used (positions of the kernel in the ACS block); beyond it the
    // positions are thinned evenly. Keeps 3D calibration's memory bounded.
    size_t max_rows = 65536;
};

// Calibration data or sampling GRAPPA cannot use: a region too small for the kernel, no regular
// lattice, no signal, samples that are not finite.
class GrappaError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Throws std::invalid_argument naming the first setting outside its range.
void check(const GrappaSettings& s);

// The regular undersampling of the imaging lines: every line (e1, e2) with e1 = o1 (mod r1) and
// e2 = o2 (mod r2) is on the lattice. A 1 x 1 lattice is full sampling.
struct GrappaLattice {
    size_t r1 = 1, r2 = 1, o1 = 0, o2 = 0;
    bool on(size_t e1, size_t e2) const { return e1 % r1 == o1 && e2 % r2 == o2; }
    std::string str() const;  // "R=3" or "R=2x2"
};

// The lattice of a mask of sampled lines (E1 fastest, 1 = sampled): the most common spacing of
// consecutive sampled lines along E1 (and E2), and the most common residue. Lines off the lattice
// (calibration lines sent as imaging lines) are what `off_lattice` counts; GRAPPA ignores them in the
// unmixing. Throws GrappaError naming the mask when no line is sampled.
GrappaLattice grappa_lattice(const std::vector<uint8_t>& sampled, size_t e1, size_t e2, size_t* off_lattice = nullptr);

// Step 1. calibration: k-space [RO, E1, E2, C] on the backend whose region is fully sampled. The
// weights: host [sources, targets] column-major, sources = kernel_ro * kernel_e1 * kernel_e2' * C
// (kernel_e2' = 1 unless r2 > 1) ordered (ro, e1, e2, coil) fastest first, targets = (r1 r2 - 1) * C
// ordered (lattice offset t1 + r1 t2 without (0, 0), coil). Throws GrappaError for a region smaller than
// the kernel's span or data without signal.
struct GrappaKernels {
    GrappaSettings settings;
    GrappaLattice lattice;
    size_t coils = 0, rows = 0;
    int kernel_e2 = 1;           // kernel_e2 as used (1 for 2D or r2 = 1)
    std::vector<cfloat> weights; // [sources, targets]
    // Relative residual of the fit on the calibration data, ||A W - B|| / ||B||: how well the kernel
    // predicts the ACS it was fitted on (small for good calibration; near 1 for noise).
    double fit_residual = 0;
};
GrappaKernels grappa_kernels(Backend& be, const CArray& kspace, const CalibrationRegion& region,
                             const GrappaLattice& lattice, const GrappaSettings& s);

// Step 2. Unmixing weights for images of shape [RO, E1, E2] and unit-norm maps [RO, E1, E2, C] (on the
// backend): returns conj(u) [RO, E1, E2, C] on the backend, the form grappa_apply takes.
CArray grappa_unmixing(Backend& be, const GrappaKernels& kernels, const CArray& maps);

// A frame: kspace [RO, E1, E2, C] on the backend with only the lattice's lines (others zero): the
// combined image [RO, E1, E2] = sum_c u_c IFFT(kspace)_c. `coil_images` is scratch of kspace's shape.
void grappa_apply(Backend& be, const CArray& unmixing_conj, const CArray& kspace, CArray& coil_images, CArray& image);

}  // namespace larmor::coils
