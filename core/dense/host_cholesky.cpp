#include "core/dense/host_cholesky.h"

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>

#include "core/dense/dense.h"
#include "core/dense/lapacke_cpp.h"

namespace larmor::dense {
namespace {

[[noreturn]] void fail(size_t column, size_t n) {
    throw NotPositiveDefinite("host_cholesky_lower: the " + std::to_string(n) + " x " + std::to_string(n) +
                                  " matrix is not positive definite at column " + std::to_string(column) +
                                  " (leading minor of order " + std::to_string(column + 1) + ")",
                              0, column + 1);
}

}  // namespace

void host_cholesky_lower(std::complex<double>* a, size_t n, double relative_floor) {
    if (n == 0) return;
    if (n > static_cast<size_t>(INT_MAX) / n)
        throw std::invalid_argument("host_cholesky_lower: n = " + std::to_string(n) +
                                    " exceeds LAPACK's 32-bit sizes");
    double max_diag = 0;
    for (size_t i = 0; i < n; ++i) max_diag = std::max(max_diag, a[i * n + i].real());
    const lapack_int ni = static_cast<lapack_int>(n);
    // Row-major storage of a Hermitian A is column-major storage of A^T = conj(A), whose upper
    // Cholesky factor U (conj(A) = U^H U) is L^T: conj(A) = conj(L L^H) = conj(L) L^T = (L^T)^H L^T.
    // So zpotrf with UPLO = 'U' on the column-major view leaves exactly the row-major L in place,
    // without LAPACKE's row-major transposed copy. (zpotrf's test: a pivot <= 0 or NaN fails, info = j + 1.)
    const lapack_int info = LAPACKE_zpotrf_work(LAPACK_COL_MAJOR, 'U', ni, a, ni);
    if (info < 0)
        throw std::logic_error("host_cholesky_lower: LAPACK zpotrf refused its argument " + std::to_string(-info));
    const size_t factored = info == 0 ? n : static_cast<size_t>(info) - 1;
    // The relative floor applies to the pivots zpotrf accepted, in order, before its own failure.
    for (size_t j = 0; j < factored; ++j) {
        const double ljj = a[j * n + j].real();
        if (!(ljj * ljj > relative_floor * max_diag)) fail(j, n);
    }
    if (info > 0) fail(factored, n);
    for (size_t i = 0; i < n; ++i)
        for (size_t j = i + 1; j < n; ++j) a[i * n + j] = 0;  // the strict upper triangle (row-major)
}

}  // namespace larmor::dense
