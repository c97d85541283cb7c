#include "core/recon/l1_wavelet_sense.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/iter/power_method.h"
#include "core/iter/wavelet_threshold.h"
#include "core/linops/algebra.h"
#include "core/linops/sampled_fft.h"
#include "core/linops/sense.h"

namespace larmor {

L1WaveletSense l1_wavelet_sense(std::shared_ptr<Backend> backend, const CArray& kspace, const RArray& mask,
                                const CArray& maps, const L1WaveletSenseSettings& settings) {
    const Shape& s = kspace.shape();
    if (s.rank() != 4) throw std::invalid_argument("pics_l1: k-space " + s.str() + " should be [RO, E1, E2, C]");
    if (maps.shape() != s)
        throw std::invalid_argument("pics_l1: coil maps " + maps.shape().str() + " do not match k-space " + s.str());
    const Shape image{s[0], s[1], s[2]};
    if (mask.shape() != image)
        throw std::invalid_argument("pics_l1: mask " + mask.shape().str() + " does not match k-space " + s.str());
    if (!(settings.lambda >= 0.f)) throw std::invalid_argument("pics_l1: lambda " + std::to_string(settings.lambda) + " < 0");
    if (settings.power_iterations < 1)
        throw std::invalid_argument("pics_l1: power_iterations " + std::to_string(settings.power_iterations) + " < 1");
    AxisMask axes = 0;
    for (int a = 0; a < 3; ++a)
        if (image[a] > 1) axes |= 1u << a;

    L1WaveletSense p;
    p.encoding = compose(sampled_fft(backend, s, axes, mask), sense(backend, maps));
    if (settings.coarsest < 2)
        throw std::invalid_argument("pics_l1: wavelet coarsest band " + std::to_string(settings.coarsest) + " < 2");
    p.wavelet = wavelet_geometry(image, axes, settings.levels, settings.coarsest);
    CArray aty = backend->empty(image);
    p.encoding->adjoint(kspace, aty);
    CArray n = backend->zeros({1});
    backend->norm2(aty, n);
    const double e = std::real(backend->to_host(n).data()[0]);
    p.threshold = float(settings.lambda * std::sqrt(e / double(image.size())));
    p.lipschitz = float(1.01 * max_eigenvalue(normal(p.encoding), settings.power_iterations));
    if (!(p.lipschitz > 0.f))
        throw std::invalid_argument("pics_l1: the encoding has no energy (empty mask or zero coil maps)");
    p.image = backend->zeros(image);
    FistaOptions o;
    o.max_iterations = settings.iterations;
    p.solver = std::make_unique<Fista>(p.encoding, aty, wavelet_threshold_prox(backend, p.wavelet, p.threshold, 1, settings.cycle_spinning, settings.shift_seed),
                                       p.image, 1.f / p.lipschitz, o);
    return p;
}

}  // namespace larmor
