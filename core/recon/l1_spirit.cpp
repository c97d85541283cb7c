#include "core/recon/l1_spirit.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/iter/wavelet_threshold.h"
#include "core/linops/algebra.h"
#include "core/linops/fft_op.h"
#include "core/recon/spirit_problem.h"

namespace larmor {
namespace {

// lambda * sqrt(||x||^2 / voxels): the threshold relative to the zero-filled images' RMS coil vector.
float relative_threshold(Backend& be, const CArray& x, size_t voxels, float lambda) {
    CArray n = be.zeros({1});
    be.norm2(x, n);
    const double e = std::real(be.to_host(n).data()[0]);
    return float(lambda * std::sqrt(e / double(voxels)));
}

}  // namespace

L1Spirit l1_spirit(std::shared_ptr<Backend> backend, const CArray& kspace, const RArray& mask, const CArray& g,
                   const L1SpiritSettings& settings) {
    const Shape& s = kspace.shape();
    const SpiritProblem sp = spirit_problem("l1_spirit", kspace, mask, g);
    const size_t ro = sp.ro, e1 = sp.e1, e2 = sp.e2, nc = sp.coils;
    if (!(settings.lambda >= 0.f))
        throw std::invalid_argument("l1_spirit: lambda " + std::to_string(settings.lambda) + " < 0");

    L1Spirit p;
    const AxisMask axes = sp.kspace_axes;
    p.wavelet = wavelet_geometry(s, axes, settings.levels, kDefaultCoarsest);
    const LinOp fft = fft_op(backend, s, axes);
    p.images = backend->empty(s);
    fft->adjoint(kspace, p.images);
    p.threshold = settings.threshold >= 0.f ? settings.threshold
                                            : relative_threshold(*backend, p.images, ro * e1 * e2, settings.lambda);

    std::vector<std::unique_ptr<Prox>> steps;
    steps.push_back(spirit_step(backend, g.reshaped({ro, e1, e2, nc, nc})));
    steps.push_back(wavelet_threshold_prox(backend, p.wavelet, p.threshold, nc, settings.cycle_spinning));
    steps.push_back(in_basis(fft, data_consistency_projection(backend, mask, kspace)));
    p.solver = std::make_unique<Pocs>(std::move(steps), p.images, settings.iterations, settings.track_residuals,
                                      settings.tolerance);
    return p;
}

}  // namespace larmor
