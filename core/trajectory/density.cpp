// Analytic density compensation: radial ramps with their DC corrections and Hoge's spiral formula
// (see density.h for the scaling and the citations; Voronoi weights are in voronoi.cpp).
#include "core/trajectory/density.h"
#include "core/constants.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace larmor::trajectory {
namespace {

// Checks a host [dims, n, readouts] array with dims in [min_dims, 3] and n >= 2.
void check_coords(const RArray& k, int min_dims, const char* who) {
    if (k.device() != Device::Cpu || k.shape().rank() != 3 || k.shape()[0] < static_cast<size_t>(min_dims) ||
        k.shape()[0] > 3 || k.shape()[1] < 2 || k.shape()[2] < 1)
        throw std::invalid_argument(std::string(who) + ": coordinates must be a host [" + std::to_string(min_dims) +
                                    "..3, samples >= 2, readouts] array, got " + k.shape().str());
}

// Distance between the first two samples of readout 0: the sample spacing along a spoke.
double spoke_step(const RArray& k, int dims_used) {
    const size_t d = k.shape()[0];
    const float* p = k.data();
    double s2 = 0.0;
    for (int a = 0; a < dims_used; ++a) s2 += std::pow(static_cast<double>(p[d + a]) - p[a], 2);
    if (!(s2 > 0.0)) throw std::invalid_argument("density: samples 0 and 1 of readout 0 coincide; not a radial spoke");
    return std::sqrt(s2);
}

// Ramp weights for radial spokes: w = c |k|^power outside the centre, `dc` at the centre, where the
// radius uses the first dims_used axes. spokes_per_group is the number of spokes sharing a circle.
RArray ramp(const RArray& k, int dims_used, int power, double c, double dc, double dk) {
    const size_t d = k.shape()[0], n = k.shape()[1], readouts = k.shape()[2];
    RArray w = RArray::host(Shape{n, readouts});
    const float* p = k.data();
    float* out = w.data();
    for (size_t i = 0; i < n * readouts; ++i, p += d) {
        double r2 = 0.0;
        for (int a = 0; a < dims_used; ++a) r2 += static_cast<double>(p[a]) * p[a];
        const double r = std::sqrt(r2);
        out[i] = static_cast<float>(r < 1e-3 * dk ? dc : c * std::pow(r, power));
    }
    return w;
}

}  // namespace

RArray density_radial_2d(const RArray& coords) {
    check_coords(coords, 2, "density_radial_2d");
    const double spokes = static_cast<double>(coords.shape()[2]), dk = spoke_step(coords, 2);
    return ramp(coords, 2, 1, kPi * dk / spokes, kPi * dk * dk / 4.0 / spokes, dk);
}

RArray density_stack_of_stars(const RArray& coords, int partitions) {
    check_coords(coords, 3, "density_stack_of_stars");
    if (partitions < 1 || coords.shape()[2] % static_cast<size_t>(partitions) != 0)
        throw std::invalid_argument("density_stack_of_stars: partitions " + std::to_string(partitions) +
                                    " does not divide the " + std::to_string(coords.shape()[2]) + " readouts");
    const double spokes = static_cast<double>(coords.shape()[2] / static_cast<size_t>(partitions));
    const double dk = spoke_step(coords, 2);
    return ramp(coords, 2, 1, kPi * dk / spokes, kPi * dk * dk / 4.0 / spokes, dk);  // x dkz = 1
}

RArray density_radial_3d(const RArray& coords) {
    check_coords(coords, 3, "density_radial_3d");
    const double spokes = static_cast<double>(coords.shape()[2]), dk = spoke_step(coords, 3);
    return ramp(coords, 3, 2, 2.0 * kPi * dk / spokes, kPi * dk * dk * dk / 6.0 / spokes, dk);
}

RArray density_hoge(const RArray& coords) {
    check_coords(coords, 2, "density_hoge");
    if (coords.shape()[0] != 2) throw std::invalid_argument("density_hoge: needs a 2D trajectory, got " + coords.shape().str());
    const size_t n = coords.shape()[1], arms = coords.shape()[2];
    // Hoge, Kwan & Pike's w = |g| |sin(arg g - arg k)| is the step across the radius, r |dtheta| per
    // dwell; times the radial distance between neighbouring arms, (2 pi / arms) |dr/dtheta|, it is
    // (2 pi / arms) r |dr| per dwell: the area of the annulus swept by the sample's stretch of the arm,
    // shared by the `arms` arms that cross it (each arm crosses every radius once while r grows along
    // it). It is evaluated here in that integrated form, w_j = pi |r_{j+1/2}^2 - r_{j-1/2}^2| / arms with
    // r_{j+-1/2} the mid-radii to the neighbouring samples, rather than from finite differences of g and
    // theta: the two agree to 0.1 % away from the centre, but near k = 0, where the arms turn fastest and
    // the direction of k is undefined at the common start, the finite differences were 10-25 % low on
    // the first samples (and zero on the first sample after k = 0, where atan2(0, 0) = 0 left no
    // spacing): the 16 arms together lost an area of about 1 around DC, which put a 16-interleave spiral's
    // image at NRMSE 0.23 against 0.10 with Voronoi cells (tests/density_defaults_test.cpp). The sample at
    // k = 0 gets the disk up to half the next sample (the DC correction, as before) and the last sample
    // the band up to its own radius, so the weights of a spiral from the centre to kmax sum exactly to
    // the disk pi kmax^2.
    RArray w = RArray::host(Shape{n, arms});
    for (size_t a = 0; a < arms; ++a) {
        const float* k = coords.data() + 2 * n * a;
        auto radius = [&](size_t j) { return std::hypot(static_cast<double>(k[2 * j]), static_cast<double>(k[2 * j + 1])); };
        float* out = w.data() + n * a;
        for (size_t j = 0; j < n; ++j) {
            const double r = radius(j);
            const double inner = j == 0 ? (r < 1e-9 ? 0.0 : r) : 0.5 * (radius(j - 1) + r);
            const double outer = j + 1 == n ? r : 0.5 * (r + radius(j + 1));
            out[j] = static_cast<float>(kPi * std::abs(outer * outer - inner * inner) / static_cast<double>(arms));
        }
    }
    return w;
}

const char* to_string(DensityKind kind) {
    switch (kind) {
        case DensityKind::radial_2d: return "radial_2d";
        case DensityKind::stack_of_stars: return "stack_of_stars";
        case DensityKind::radial_3d: return "radial_3d";
        case DensityKind::voronoi: return "voronoi";
        case DensityKind::hoge: return "hoge";
    }
    return "?";
}

}  // namespace larmor::trajectory
