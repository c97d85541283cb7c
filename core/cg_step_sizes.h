#pragma once
// The step sizes of conjugate gradients in the form of Chronopoulos & Gear (1989, J. Comput. Appl.
// Math. 25:153, Algorithm 2), from the two inner products of one pass (Backend::cg_coefficients):
// with gamma = ||r_k||^2 and delta = <r_k, N r_k>,
//   beta_k  = gamma_k / gamma_{k-1},
//   alpha_k = gamma_k / (delta_k - beta_k gamma_k / alpha_{k-1}),
// the denominator being <p_k, N p_k> rewritten through the recurrences of p and s = N p (Hestenes &
// Stiefel's alpha, so the iterates are CG's in exact arithmetic). Written once for the CPU backend
// and the CUDA kernel, in double (a ratio of squared norms may be far below float's range).
#ifdef __CUDACC__
#define LARMOR_HOST_DEVICE __host__ __device__
#else
#define LARMOR_HOST_DEVICE
#endif

namespace larmor {

struct CgCoefficients {
    double alpha;
    double beta;
};

// A zero denominator gives 0: the all-zero start (gamma_previous = alpha_previous = 0) gives beta 0
// and the steepest-descent step alpha = gamma / delta; a zero residual gives alpha 0 (x stays).
LARMOR_HOST_DEVICE inline CgCoefficients cg_step_sizes(double gamma, double delta, double gamma_previous,
                                                       double alpha_previous) {
    const double beta = gamma_previous != 0.0 ? gamma / gamma_previous : 0.0;
    const double carried = beta != 0.0 && alpha_previous != 0.0 ? beta * gamma / alpha_previous : 0.0;
    const double curvature = delta - carried;
    return {curvature != 0.0 ? gamma / curvature : 0.0, beta};
}

}  // namespace larmor
