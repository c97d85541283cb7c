#include "gadgets/sense/noncartesian_sense.h"
#include "core/constants.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/coils/calibration.h"
#include "core/coils/espirit.h"
#include "core/linops/algebra.h"
#include "core/linops/diag.h"
#include "core/linops/sense.h"
#include "core/linops/toeplitz.h"

namespace larmor {
namespace {

// Weights of the calibration image: the density weights times a Hann taper in |k| that reaches zero at
// the radius (k beyond it contributes nothing), or, untapered, a hard cut at the radius.
RArray calibration_weights(const RArray& coords, const RArray& weights_host, float radius, bool taper = true) {
    const size_t dims = coords.shape()[0], m = coords.size() / dims;
    RArray w = RArray::host({m});
    for (size_t i = 0; i < m; ++i) {
        double r2 = 0;
        for (size_t d = 0; d < dims; ++d) r2 += double(coords.data()[i * dims + d]) * coords.data()[i * dims + d];
        const double r = std::sqrt(r2);
        const double window = taper ? 0.5 * (1 + std::cos(kPi * r / radius)) : 1.0;
        w.data()[i] = r < radius ? static_cast<float>(weights_host.data()[i] * window) : 0.f;
    }
    return w;
}

// W^1/2 on the host; negative weights (none should reach here) count as zero.
RArray sqrt_weights(const RArray& weights_host) {
    RArray s = RArray::host({weights_host.size()});
    for (size_t i = 0; i < weights_host.size(); ++i) s.data()[i] = std::sqrt(std::max(weights_host.data()[i], 0.f));
    return s;
}

// The coil images [X, Y, Z, C] of the samples within `radius` of the k-space centre, density-weighted
// (and Hann-tapered in |k| with `taper`), gridded onto the image grid by `plan`.
CArray gridded_centre(Backend& b, const TrajectoryBuffer& tb, Nufft& plan, const RArray& weights_host, float radius,
                      bool taper) {
    const Shape& ds = tb.data.shape();  // [S, R, C]
    const size_t m = ds[0] * ds[1], coils = ds[2];
    const Shape& image = tb.image;
    const size_t nz = image.rank() == 3 ? image[2] : 1;
    const RArray coords = tb.coords.reshaped({tb.coords.shape()[0], m});
    const RArray wcal = b.to_device(calibration_weights(coords, weights_host, radius, taper));
    CArray ycal = b.empty({m, coils});
    b.mul(tb.data.reshaped({m, coils}), wcal, ycal);
    Shape coil_shape = image;
    coil_shape.push_back(coils);
    CArray low = b.empty(coil_shape);
    plan.adjoint(ycal, low);
    return low.reshaped({image[0], image[1], nz, coils});
}

}  // namespace

CArray noncartesian_coil_maps(const std::shared_ptr<Backend>& be, const TrajectoryBuffer& tb, Nufft& plan,
                              const RArray& weights_host, float radius, int map_kernel, int map_stride) {
    return coils::sense_maps(*be, gridded_centre(*be, tb, plan, weights_host, radius, true), map_kernel, map_stride);
}

CArray noncartesian_espirit_maps(const std::shared_ptr<Backend>& be, const TrajectoryBuffer& tb, Nufft& plan,
                                 const RArray& weights_host, const coils::EspiritSettings& s) {
    Backend& b = *be;
    const Shape& image = tb.image;
    const bool three_d = image.rank() == 3 && image[2] > 1;
    const size_t nz = image.rank() == 3 ? image[2] : 1;
    // The calibration block must be gridded k-space throughout: its corners lie at half the block's
    // diagonal from the centre, so the samples out to that radius (and one cycle more for the gridding
    // kernel's reach) are gridded, untapered, and nothing beyond.
    size_t cal = s.calibration;
    for (size_t a = 0; a < (three_d ? 3u : 2u); ++a) cal = std::min(cal, image[a]);
    const float radius = float(0.5 * double(cal) * std::sqrt(three_d ? 3.0 : 2.0) + 1.0);
    const CArray low = gridded_centre(b, tb, plan, weights_host, radius, false);
    // Back to k-space on the image grid: the Cartesian samples ESPIRiT calibrates on.
    CArray kspace = b.empty(low.shape());
    b.fft(low, kspace, three_d ? 0b111u : 0b011u, FFTDirection::Forward);
    const size_t e1_lo = image[1] / 2 - cal / 2, e1_hi = e1_lo + cal;
    if (!three_d) return coils::espirit_maps(b, kspace, e1_lo, e1_hi, s).maps;
    const size_t e2_lo = nz / 2 - cal / 2, e2_hi = e2_lo + cal;
    return coils::espirit_maps_3d(b, kspace, e1_lo, e1_hi, e2_lo, e2_hi, s).maps;
}

LinOp weighted_nufft(const std::shared_ptr<Backend>& be, const std::shared_ptr<Nufft>& plan, const RArray& weights) {
    Backend& b = *be;
    if (weights.size() != plan->points())
        throw std::invalid_argument("cg_sense: " + std::to_string(weights.size()) + " density weights for " +
                                    std::to_string(plan->points()) + " samples");
    return compose(diag(be, plan->oshape(), b.to_device(sqrt_weights(b.to_host(weights)))), plan);
}

NoncartesianSense noncartesian_sense(const std::shared_ptr<Backend>& be, const TrajectoryBuffer& tb,
                                     const std::shared_ptr<Nufft>& plan, const RArray& weights,
                                     const NoncartesianSenseSetup& setup) {
    const Shape& ds = tb.data.shape();  // [S, R, C]
    const size_t m = ds[0] * ds[1], coils = ds[2];
    if (plan->points() != m || plan->oshape() != Shape{m, coils})
        throw std::invalid_argument("cg_sense: NUFFT plan " + plan->describe() + " does not fit the data " + ds.str());
    if (weights.size() != m)
        throw std::invalid_argument("cg_sense: " + std::to_string(weights.size()) + " density weights for " +
                                    std::to_string(m) + " samples");
    if (!(setup.calibration_radius > 0.f))
        throw std::invalid_argument("cg_sense: calibration radius " + std::to_string(setup.calibration_radius));
    Backend& b = *be;
    const Shape& image = tb.image;
    const CArray y = tb.data.reshaped({m, coils});
    const RArray wh = b.to_host(weights);
    Shape coil_shape = image;
    coil_shape.push_back(coils);
    NoncartesianSense p;
    p.maps = setup.espirit ? noncartesian_espirit_maps(be, tb, *plan, wh, setup.espirit_settings)
                           : noncartesian_coil_maps(be, tb, *plan, wh, setup.calibration_radius, setup.map_kernel,
                                                    setup.map_stride);

    // E = W^1/2 F_nu S and the weighted data W^1/2 y.
    const RArray sw = b.to_device(sqrt_weights(wh));
    CArray yw = b.empty({m, coils});
    b.mul(y, sw, yw);
    LinOp wf = compose(diag(be, Shape{m, coils}, sw), plan);
    if (!setup.toeplitz_spectrum.empty())
        wf = with_normal(wf, toeplitz_normal(be, image, coils, setup.toeplitz_spectrum));
    p.encoding = compose(wf, sense(be, p.maps.reshaped(coil_shape)));
    p.image = b.zeros(image);
    p.solver = cg_least_squares(p.encoding, yw, p.image, setup.lambda, setup.cg);
    return p;
}

}  // namespace larmor
