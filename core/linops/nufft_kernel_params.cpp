#include "core/linops/nufft_kernel_params.h"

#include <algorithm>
#include <cmath>

namespace larmor::nufft_detail {
namespace {

// Gauss-Legendre nodes and weights on [-1, 1] (Newton's method on the Legendre recurrence, started at
// the Chebyshev-like guesses cos(pi (i - 1/4) / (q + 1/2))).
void gauss_legendre(int q, std::vector<double>& x, std::vector<double>& wt) {
    x.assign(size_t(q), 0.0);
    wt.assign(size_t(q), 0.0);
    const double pi = std::acos(-1.0);
    for (int i = 0; i < q; ++i) {
        double z = std::cos(pi * (i + 0.75) / (q + 0.5)), dp = 1.0;
        for (int it = 0; it < 100; ++it) {
            double p0 = 1.0, p1 = z;  // P_0, P_1
            for (int k = 2; k <= q; ++k) {
                const double p2 = ((2.0 * k - 1.0) * z * p1 - (k - 1.0) * p0) / k;
                p0 = p1;
                p1 = p2;
            }
            dp = q * (z * p1 - p0) / (z * z - 1.0);  // P_q'(z)
            const double dz = p1 / dp;
            z -= dz;
            if (std::abs(dz) < 1e-15) break;
        }
        x[size_t(i)] = z;
        wt[size_t(i)] = 2.0 / ((1.0 - z * z) * dp * dp);
    }
}

}  // namespace

KernelShape choose_kernel(double tolerance, double sigma) {
    const double pi = std::acos(-1.0);
    KernelShape k;
    const double w = std::log(10.0 / tolerance) / (pi * std::sqrt(1.0 - 1.0 / sigma));
    k.width = std::clamp(int(std::ceil(w - 1e-9)), 2, 16);
    k.beta = 0.98 * pi * k.width * (1.0 - 1.0 / (2.0 * sigma));
    return k;
}

long long next_smooth_even(double x) {
    long long n = std::max(2LL, (long long)std::ceil(x - 1e-9));
    if (n % 2) ++n;
    for (;; n += 2) {
        long long r = n;
        for (long long p : {2LL, 3LL, 5LL})
            while (r % p == 0) r /= p;
        if (r == 1) return n;
    }
}

std::vector<double> kernel_fourier(const KernelShape& k, long long N, long long n) {
    // psi_hat(xi) = (w/2) int_{-1}^{1} phi(z) cos(pi w xi z) dz (substituting t = w z / 2). The
    // integrand has at most ~w/2 oscillations on [-1, 1] (|xi| <= 1/2); 2 w + 40 nodes resolve it
    // and phi's sqrt edge (where phi is exp(-beta), negligible) far below float precision.
    std::vector<double> z, wt;
    gauss_legendre(2 * k.width + 40, z, wt);
    const double pi = std::acos(-1.0);
    std::vector<double> phi(z.size());
    for (size_t i = 0; i < z.size(); ++i) phi[i] = std::exp(k.beta * (std::sqrt(1.0 - z[i] * z[i]) - 1.0));
    std::vector<double> out(size_t(N), 0.0);
    for (long long idx = 0; idx < N; ++idx) {
        const double xi = double(idx - N / 2) / double(n);
        double s = 0.0;
        for (size_t i = 0; i < z.size(); ++i) s += wt[i] * phi[i] * std::cos(pi * k.width * xi * z[i]);
        out[size_t(idx)] = 0.5 * k.width * s;
    }
    return out;
}

}  // namespace larmor::nufft_detail
