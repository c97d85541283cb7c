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
// Units follow core's conventions: k in cycles per FOV, pixel n of an axis of N at (n - N/2)/N FOV,
// samples s(k) = N_total^{-1/2} sum_n x[n] exp(-2 pi i k.(n - N/2)/N) (the NUFFT's forward model), so the
// reconstruction of fully sampled data is the object in the same units as the Cartesian (orthonormal
// inverse FFT) reconstruction.
#include <cstddef>
#include <memory>

#include "core/backend.h"

namespace larmor {

// Apodisation of the ramp |rho| (Kak & Slaney ch. 3.3; rho_max = the largest |k| of a spoke):
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
    // through the k-space centre, sample samples/2 at k = 0 (the centred FFT's origin), with uniform
    // spacing dk <= 1 cycle/FOV (readout oversampling dk < 1 is allowed); all spokes share dk. Spokes
    // may come in any order and at any angles (uniform, golden angle, over pi or 2 pi): each is
    // weighted by the angle it covers. Violations throw std::invalid_argument naming the spoke, the
    // sample and what is wrong.
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
    // (the layout of the other coil combinations, gadgets/kernels/coil_combination.h).
    void reconstruct_rss(const CArray& data, CArray& image);

    const Shape& image_shape() const;
    // Readout spacing dk (cycles/FOV) shared by all spokes.
    float spacing() const;

    struct State;

private:
    explicit RadialFbp(std::unique_ptr<State> s);
    std::unique_ptr<State> s_;
};

}  // namespace larmor
