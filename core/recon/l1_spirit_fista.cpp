#include "core/recon/l1_spirit_fista.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/iter/power_method.h"
#include "core/iter/wavelet_threshold.h"
#include "core/linops/algebra.h"
#include "core/recon/cg_spirit.h"
#include "core/recon/spirit_problem.h"

namespace larmor {

L1SpiritFista l1_spirit_fista(std::shared_ptr<Backend> backend, const CArray& kspace, const RArray& mask,
                              const CArray& g, const L1SpiritFistaSettings& settings) {
    const char* who = "l1_spirit_fista";
    const SpiritProblem sp = spirit_problem(who, kspace, mask, g);
    if (!(settings.lambda >= 0.f))
        throw std::invalid_argument(std::string(who) + ": lambda " + std::to_string(settings.lambda) + " < 0");
    if (settings.iterations < 1)
        throw std::invalid_argument(std::string(who) + ": iterations " + std::to_string(settings.iterations) + " < 1");
    if (settings.power_iterations < 1)
        throw std::invalid_argument(std::string(who) + ": power_iterations " +
                                    std::to_string(settings.power_iterations) + " < 1");
    const Shape& s = kspace.shape();

    L1SpiritFista p;
    p.encoding = spirit_encoding(backend, kspace, mask, g, settings.consistency_lambda, who);
    p.wavelet = wavelet_geometry(s, sp.kspace_axes, settings.levels, kDefaultCoarsest);
    // E^H [y; 0] = (M F)^H y: the zero-filled coil images, also the start.
    CArray stacked = backend->zeros(p.encoding->oshape());
    CArray head = stacked.view(0, s);
    backend->copy(kspace, head);
    CArray aty = backend->empty(s);
    p.encoding->adjoint(stacked, aty);

    CArray n = backend->zeros({1});
    backend->norm2(aty, n);
    const double e = std::real(backend->to_host(n).data()[0]);
    p.threshold = float(settings.lambda * std::sqrt(e / double(sp.ro * sp.e1 * sp.e2)));
    p.lipschitz = float(1.01 * max_eigenvalue(normal(p.encoding), settings.power_iterations));
    if (!(p.lipschitz > 0.f)) throw std::invalid_argument(std::string(who) + ": the encoding has no energy (empty mask)");

    p.images = backend->empty(s);
    backend->copy(aty, p.images);
    FistaOptions o;
    o.max_iterations = settings.iterations;
    o.tolerance = settings.tolerance;
    o.track_residuals = settings.track_residuals;
    p.solver = std::make_unique<Fista>(
        p.encoding, aty,
        wavelet_threshold_prox(backend, p.wavelet, p.threshold, sp.coils, settings.cycle_spinning), p.images,
        1.f / p.lipschitz, o);
    return p;
}

}  // namespace larmor
