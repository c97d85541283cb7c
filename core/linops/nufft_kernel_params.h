#pragma once
// The NUFFT's kernel choice and deapodisation, computed once per plan on the host (core/linops/nufft.h).
// Kernel: the "exponential of semicircle" (ES) of Barnett, Magland & af Klinteberg, SIAM J. Sci.
// Comput. 41:C479 (2019), phi(z) = exp(beta (sqrt(1 - z^2) - 1)) on |z| <= 1.
#include <vector>

namespace larmor::nufft_detail {

struct KernelShape {
    int width = 0;   // support in grid points
    double beta = 0;  // shape parameter
};

// Width and beta for a relative accuracy `tolerance` on a grid oversampled by `sigma` (1.25 .. 2).
// The paper's error estimate (sec. 4, eq. 4.4 and the discussion around it) decays as
// exp(-pi w sqrt(1 - 1/sigma)); the constant in front, measured against the exact NUDFT in
// tests/core_nufft_test.cpp, is about 10 (w from ln(1/eps) alone gave 1.3x to 2x the tolerance at
// sigma = 2 in 2D / 3D, and up to 80x at sigma = 1.25), so w = ceil(ln(10/eps) / (pi sqrt(1 - 1/sigma))):
// one point wider than the paper's w = ceil(log10(1/eps)) + 1 at sigma = 2 for eps = 1e-3.
// beta = gamma pi w (1 - 1/(2 sigma)) with gamma = 0.98 puts the kernel's Fourier transform cut-off
// at the edge of the aliased band (sec. 4.1); at sigma = 2 that is the paper's beta = 2.30 w.
KernelShape choose_kernel(double tolerance, double sigma);

// The smallest even integer >= x of the form 2^a 3^b 5^c (a >= 1): FFT-friendly grid sizes.
long long next_smooth_even(double x);

// phi's Fourier transform in grid units, psi_hat(xi) = int phi(2 t / w) exp(-2 pi i xi t) dt over
// |t| < w/2, at xi = j / n for the image offsets j = -N/2 .. N - 1 - N/2 (N/2 integer division):
// N values, by Gauss-Legendre quadrature in double (the integrand is smooth and even).
std::vector<double> kernel_fourier(const KernelShape& k, long long N, long long n);

}  // namespace larmor::nufft_detail
