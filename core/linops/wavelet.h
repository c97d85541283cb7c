#pragma once
// The orthogonal multi-level Daubechies-4 wavelet transform (Daubechies, "Orthonormal bases of
// compactly supported wavelets", CPAM 41:909, 1988: the four-tap filter with two vanishing moments),
// the sparsifying transform of l1-SPIRiT (Murphy et al., IEEE TMI 31:1250, 2012) and of l1-wavelet
// SENSE. Separable over the chosen axes with periodic boundaries, so every level is an orthogonal
// matrix and the adjoint is the inverse (W^H W = I to float rounding). The coefficients keep the
// array's shape in Mallat's packing: after each level the low band of every transformed axis sits in
// the first half of that axis and the next level transforms only that block. Axes not transformed
// (coils, an unencoded slice axis) are batched.
#include <array>
#include <vector>

#include "core/linops/linop.h"

namespace larmor {

// Which block each level transforms. An axis takes part in a level while its current length is even
// and at least kMinLength; the levels stop when no axis can go on or `levels` is reached, so one
// axis may keep halving after another has stopped (256 x 64: seven levels along x, five along y).
struct WaveletGeometry {
    static constexpr size_t kMinLength = 4;
    static constexpr size_t kMaxLength = 4096;  // one line fits the CUDA kernel's shared memory
    Shape shape;
    AxisMask axes = 0;
    std::vector<Shape> blocks;        // blocks[l]: the block level l transforms (full extent off `axes`)
    std::vector<AxisMask> level_axes; // the axes level l halves
    Shape coarse;                     // the low band left after the last level

    int levels() const { return static_cast<int>(blocks.size()); }
    // Elements of the low band are not thresholded (they carry the image's smooth content).
};

// levels < 0: as many as the shape allows, an axis stopping once halving it would leave fewer than
// `coarsest` samples (after the first level, which every axis that can takes) (2: down to the kernel's minimum; the reconstructions use kDefaultCoarsest, a
// low band of about 16 samples per axis as BART's wavelet keeps). Throws std::invalid_argument naming
// the shape and axis when an axis is not one of shape's, longer than kMaxLength, or no level is possible.
WaveletGeometry wavelet_geometry(const Shape& shape, AxisMask axes, int levels = -1, size_t coarsest = 2);

// The low band the reconstructions stop at when no level count is given: on 256^2 Poisson-disc
// phantoms four levels (256 -> 16) beat seven by 18 % in NRMSE (bench/RESULTS.md, BART comparison).
constexpr size_t kDefaultCoarsest = 16;

// A circular shift of the transformed axes' samples before the transform (cycle spinning, Coifman and
// Donoho 1995): W R with (R x)_i = x_(i + shift) mod n along each axis. Thresholding in a randomly shifted
// basis every iteration removes the blocking a fixed dyadic grid leaves (BART's pics does the same
// unless -n). Entries of axes not transformed are ignored.
using WaveletShift = std::array<size_t, Shape::kMaxRank>;

// W: shape -> shape (coefficients), adjoint = inverse.
LinOp wavelet(std::shared_ptr<Backend> backend, const WaveletGeometry& geometry);

// The transform without an operator: c = W x (x and c of geometry.shape, no overlap; the first pass
// reads x, so no copy), and x <- W^H x in place. The wavelet threshold's prox composes these with the
// shrinkage writing straight into its output, saving the copies a LinOp's out-of-place adjoint needs.
// With a shift: c = W R x and x <- R^H W^H x; it costs nothing extra (the first level's passes read
// or write their lines turned).
void wavelet_forward(Backend& backend, const WaveletGeometry& geometry, const CArray& x, CArray& c,
                     const WaveletShift& shift = {});
void wavelet_inverse_in_place(Backend& backend, const WaveletGeometry& geometry, CArray& x,
                              const WaveletShift& shift = {});

}  // namespace larmor
