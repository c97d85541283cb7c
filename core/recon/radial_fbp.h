#pragma once
// Filtered backprojection (FBP) for 2D radial MRI: the direct reconstruction of Schiwietz, Chang,
// Speier & Westermann ("MR image reconstruction using the GPU", Proc. SPIE 6142, 2006), with the
// filters of Kak & Slaney ("Principles of Computerized Tomographic Imaging", 1988, ch. 3).
//
// By the Fourier slice theorem the 1D inverse Fourier transform of a spoke (a line through the k-space
// centre at angle theta) is the projection of the image along the perpendicular direction. Writing the
// 2D inverse transform in polar coordinates,
//     x(r) = int_0^pi int_R X(rho, theta) |rho| exp(2 pi i rho t) d rho d theta,  t = r . (cos, sin)(theta),
// each spoke is multiplied by the ramp |rho| (times a window), inverse transformed (a filtered
// projection), and the image is the sum over spokes of the filtered projection at t, read with linear
// interpolation (Kak & Slaney ch. 3.3, filtered backprojection of parallel projections).
//
// Real spokes are not sampled at k = 0: BART's radial trajectory puts samples at (i - N/2 + 0.5) dk,
// a gradient-delay correction shifts each spoke along (and, with anisotropic delays, slightly across)
// its direction by a fraction of a sample that depends on its angle, and an asymmetric echo puts k = 0
// far from samples/2. The batched FFT still treats sample m as (m - samples/2) dk u; a spoke whose
// samples sit at that plus a shift s_j has, by the Fourier shift theorem, the projection of the FFT
// times exp(2 pi i s_j . r), which the backprojection applies per pixel. With the ramp evaluated at
// each sample's true position (the area element |rho + e'(theta)| of lines that pass e(theta) beside
// k = 0, and the polar area of its cell where that cell straddles k = 0) this is the density-weighted
// adjoint of the samples where they actually are, up to the interpolation in t, not an approximation
// of them by the nearest centred spoke. Whole samples of shift are taken out before the interpolation
// (the projection is recentred, and for asymmetric echoes the FFT zero-padded so the long half fits),
// since linear interpolation is accurate only for a projection whose spectrum is centred. The shift
// model is that of gradient delays (Peters, Derbyshire & McVeigh, MRM 50:1, 2003; anisotropic delays
// as in RING, Rosenzweig, Holme & Uecker, MRM 81:1898, 2019, the model BART's `traj -q` applies); the
// correction is the Fourier shift theorem (Bracewell, "The Fourier Transform and Its Applications").
//
// Units follow core's conventions: k in cycles per FOV, pixel n of an axis of N at (n - N/2)/N FOV,
// samples s(k) = N_total^{-1/2} sum_n x[n] exp(-2 pi i k.(n - N/2)/N) (the NUFFT's forward model), so the
// reconstruction of fully sampled data is the object in the same units as the Cartesian (orthonormal
// inverse FFT) reconstruction.
#include <cstddef>
#include <memory>

#include "core/backend.h"

namespace larmor {

// Apodisation of the ramp |rho| (Kak & Slaney ch. 3.3; rho_max = the largest |k| of any sample):
//  RamLak      |rho| alone (sharpest, most noise);
//  SheppLogan  |rho| sinc(rho / (2 rho_max)), sinc(x) = sin(pi x) / (pi x);
//  Hann        |rho| (1 + cos(pi rho / rho_max)) / 2 (smoothest).
enum class RampWindow { RamLak, SheppLogan, Hann };

const char* to_string(RampWindow w);

struct RadialFbpOptions {
    RampWindow window = RampWindow::RamLak;
};

class RadialFbp {
public:
    // image [N0, N1]: x along axis 0, y along axis 1. The data are `spokes` readouts of `samples` points
    // each, for `coils` coils. coords RArray [2, samples, spokes] (k0, k1 of each sample, coordinate
    // fastest), cycles per FOV, on the host or the backend's device. Each spoke must be a straight line
    // of uniformly spaced samples, spacing dk <= 1 cycle/FOV (readout oversampling dk < 1 is allowed),
    // one dk for all spokes (the projections share one length and one ramp; a spoke of another dk is
    // refused, not resampled). Where k = 0 lies on it is free, within these limits of what FBP can
    // reconstruct:
    //  - along the spoke, k = 0 anywhere within its samples' span (to half a sample beyond the end
    //    ones): centred, BART's half-sample offset, per-spoke gradient-delay shifts, asymmetric echoes
    //    (the k = 0 sample anywhere, down to centre-out half spokes). Beyond the radius both halves of
    //    every spoke reach, each sample is weighted by the directions its half-spoke actually covers,
    //    so asymmetric echoes over 2 pi are complete; over pi the unsampled half plane of the outer
    //    k-space stays zero (no partial-Fourier estimate), so such an image is blurred along it;
    //  - across the spoke, the line may pass up to dk/2 from k = 0 (anisotropic gradient delays): then
    //    a sample of the spoke still covers the centre. Farther, the centre of k-space is unsampled by
    //    that spoke and the spoke is refused. How the offset varies with the angle (which sets the
    //    area element) is taken from a fit of the linear gradient-delay model to all spokes.
    // Costs per call: centred spokes as before; a shift of under half a sample (BART's) a phase per
    // pixel and shifted spoke in the backprojection; whole samples of shift a pointwise multiply of
    // the projections; asymmetric echoes also a zero-padding copy and an FFT of up to twice the
    // samples (the workspace is sized once, here).
    // Spokes may come in any order and at any angles (uniform, golden angle, over pi or 2 pi): each is
    // weighted by the angle it covers. Violations throw std::invalid_argument naming the spoke, the
    // sample and the values that are wrong.
    static std::unique_ptr<RadialFbp> create(std::shared_ptr<Backend> be, const Shape& image, size_t samples,
                                             size_t spokes, size_t coils, const RArray& coords,
                                             RadialFbpOptions opts = {});
    ~RadialFbp();
    RadialFbp(const RadialFbp&) = delete;
    RadialFbp& operator=(const RadialFbp&) = delete;

    // data CArray [samples, spokes, coils] on the backend's device -> coil images [N0, N1, coils].
    void reconstruct(const CArray& data, CArray& coil_images);
    // The same, then the root-sum-of-squares over coils, fused into the backprojection (the coil
    // images are never stored): image CArray [N0, N1], the RSS in the real part, imaginary part 0
    // (the layout of the other coil combinations, core/coils/coil_combination.h).
    void reconstruct_rss(const CArray& data, CArray& image);

    const Shape& image_shape() const;
    // Readout spacing dk (cycles/FOV) shared by all spokes.
    float spacing() const;
    // The largest spoke shift |s_j| the Fourier shift undoes, in samples (dk): 0 for centred spokes,
    // 0.5 for BART's, the distance of k = 0 from samples/2 for an asymmetric echo.
    double max_spoke_shift() const;

    struct State;

private:
    explicit RadialFbp(std::unique_ptr<State> s);
    std::unique_ptr<State> s_;
};

}  // namespace larmor
