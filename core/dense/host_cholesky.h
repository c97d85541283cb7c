#pragma once
// Cholesky factorisation of one small Hermitian matrix in double precision on the host, row-major, for
// the noise prewhitener (gadgets/noise_covariance.cpp), through LAPACK's zpotrf.
#include <complex>
#include <cstddef>

namespace larmor::dense {

// Replaces the row-major n x n Hermitian matrix a (lower triangle read) by its lower Cholesky factor L,
// a = L L^H, with a real positive diagonal; the strict upper triangle is set to 0.
// A pivot counts as failed when it is not positive (LAPACK's test) or when L_jj^2 <= relative_floor *
// max_i a_ii (a channel whose noise is negligible beside the others' is as unusable as one without
// any). Throws NotPositiveDefinite (core/dense/dense.h; batch_index 0, minor = j + 1) for the first
// failing column j, its message naming j and n; a is then unspecified.
void host_cholesky_lower(std::complex<double>* a, size_t n, double relative_floor = 0.0);

}  // namespace larmor::dense
