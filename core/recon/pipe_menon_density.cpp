#include "core/recon/pipe_menon_density.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace larmor {
namespace {

// Integral of the plan's kernel phi over one axis, in grid units: phi(z) = exp(beta (sqrt(1 - z^2) - 1)),
// z = 2x / width (core/linops/nufft_kernels.h). Simpson's rule; phi is smooth inside [-1, 1] and its
// square-root edge costs only a little accuracy at 4096 intervals (relative error ~1e-7 here).
double kernel_integral(const NufftGrid& g) {
    const int n = 4096;
    const double h = 2.0 / n;
    double s = 0;
    for (int i = 0; i <= n; ++i) {
        const double z = -1.0 + i * h;
        const double v = std::exp(static_cast<double>(g.beta) * (std::sqrt(std::max(0.0, 1.0 - z * z)) - 1.0));
        s += v * (i == 0 || i == n ? 1.0 : (i % 2 ? 4.0 : 2.0));
    }
    return s * h / 3.0 * g.width / 2.0;  // dx = width / 2 dz
}

}  // namespace

RArray pipe_menon_density(std::shared_ptr<Backend> be, const Shape& image, const RArray& coords,
                          const PipeMenonOptions& opts) {
    if (opts.iterations < 1 || opts.iterations > 1000)
        throw std::invalid_argument("pipe_menon_density: iterations " + std::to_string(opts.iterations) +
                                    " is outside 1..1000");
    NufftOptions nopts;
    nopts.tolerance = opts.tolerance;
    auto plan = Nufft::create(be, image, 1, coords, nopts);
    LinOp c = plan->interpolation();
    const size_t m = plan->points();

    CArray w_host = CArray::host({m, 1}, be->budgets().host);
    for (size_t i = 0; i < m; ++i) w_host.data()[i] = 1.f;
    CArray grid = be->empty(c->ishape());
    CArray d = be->empty(c->oshape());
    for (int it = 0; it < opts.iterations; ++it) {
        CArray w = be->to_device(w_host);
        c->adjoint(w, grid);   // C^H w: the weighted points spread onto the grid
        c->forward(grid, d);   // C C^H w: the smoothed density at every point
        const CArray dh = be->to_host(d);
        for (size_t i = 0; i < m; ++i) {
            const float den = dh.data()[i].real();
            // Every point contributes phi(0) = 1 to its own density, so den >= w_i > 0 unless the weight
            // underflowed; keep such a point's weight rather than divide by zero.
            if (den > 0.f && std::isfinite(den)) w_host.data()[i] /= den;
        }
    }

    // After convergence sum_j w_j psi(u_i - u_j) = 1 at every point, where psi is the kernel C C^H
    // applies: spreading then interpolating convolves with phi's autocorrelation sampled on the grid,
    // psi(d) = sum_g phi(g - u) phi(g - u - d), whose integral is (integral of phi)^2 per axis (the grid
    // sum of the smooth phi equals its integral). So weight density x (integral of phi)^2 = 1 per grid
    // cell; a grid cell is 1/sigma_a cycles per FOV along axis a. Rescale to weight per unit area in
    // cycles per FOV. (With the integral of phi once, the weights summed to 1/(integral of phi)^2 ~ 1/3.2
    // of the sampled area: the gridded image's scale and cg_sense's effective lambda were off by that.)
    const NufftGrid& g = plan->grid();
    const double phi_integral = kernel_integral(g);
    double per_cell = 1.0;
    for (int a = 0; a < g.dims; ++a)
        per_cell *= phi_integral * phi_integral * static_cast<double>(image[a]) / static_cast<double>(g.n[a]);
    RArray out = RArray::host({m}, be->budgets().host);
    for (size_t i = 0; i < m; ++i) out.data()[i] = static_cast<float>(w_host.data()[i].real() * per_cell);
    return out;
}

}  // namespace larmor
