#pragma once
// Dense linear algebra on batches of small and medium matrices, for coil calibration (ESPIRiT, GRAPPA,
// SPIRiT): Hermitian eigendecomposition, Cholesky solves, thin SVD and Gram matrices. One CPU
// implementation (LAPACKE and CBLAS from OpenBLAS, OpenMP over the batch: core/dense/dense_cpu.cpp) and
// one CUDA implementation (cuSOLVER and cuBLAS, loaded at first use: cuda/dense_cusolver.cpp,
// cuda/dense_cublas.cpp); each function below checks its arguments once (core/dense/dense_shapes.h)
// and runs on the backend's device.
//
// Layout. Every matrix is column-major, element (i, j) at i + j * rows (LAPACK's and cuSOLVER's
// layout, so nothing is transposed on the way in), complex float (CArray) or float (RArray). A
// matrix array is [rows, cols, batch axes...] and a vector array [length, batch axes...]: all axes
// after the matrix (vector) ones count as the batch, which may be spread over several axes (per-pixel
// matrices [n, n, X, Y]) or be absent (one matrix [n, n]); the arrays of one call must hold the same
// number of matrices. Arrays live on the backend's device (host arrays for the CPU backend, its device
// arrays for a CUDA backend).
//
// Outputs. An output passed without storage (a default-constructed array) is allocated on the backend
// with the documented shape and a's batch axes; an allocated one must have the documented shape (any
// batch axes of the same count) and is overwritten. Outputs must not overlap the inputs (except where
// said). Shape disagreements throw std::invalid_argument naming the offending shapes.
//
// Synchronisation. On a CUDA backend the work is queued on the backend's stream; hermitian_eig,
// cholesky_solve and svd then wait for their own LAPACK-style info flags before they return, so that a
// matrix that is not positive definite or an iteration that did not converge is reported by the call
// that met it, with its batch index (these are calibration steps, once per scan or calibration region,
// not per-frame work). gram has no such flags and returns without waiting.
#include <cstddef>
#include <stdexcept>
#include <string>

#include "core/backend.h"

namespace larmor::dense {

// Thrown by cholesky_solve (and host_cholesky_lower) for a matrix that is not (numerically) positive
// definite: batch_index() is the matrix (0 for a single one), minor() the order (1-based) of its
// first leading minor that is not positive (LAPACK's potrf info). A std::runtime_error, so callers that
// do not care need not know this type.
class NotPositiveDefinite : public std::runtime_error {
public:
    NotPositiveDefinite(const std::string& what, size_t batch_index, size_t minor)
        : std::runtime_error(what), batch_index_(batch_index), minor_(minor) {}
    size_t batch_index() const { return batch_index_; }
    size_t minor() const { return minor_; }

private:
    size_t batch_index_;
    size_t minor_;
};

// Hermitian eigendecomposition of a [n, n, batch] (lower triangle read, the upper one ignored):
// values [n, batch] in ascending order; vectors [n, n, batch], column j the unit eigenvector of
// values[j] (defined up to a phase factor, as LAPACK's and cuSOLVER's). vectors may be the very same
// view as a (the decomposition then runs in place). Throws std::runtime_error naming the batch index
// when the iteration does not converge.
void hermitian_eig(Backend& be, const CArray& a, RArray& values, CArray& vectors);

// Solves a x = b for Hermitian positive definite a [n, n, batch] (lower triangle read); b
// [n, nrhs, batch] is overwritten by x. Throws NotPositiveDefinite naming the batch index of the first
// matrix that is not positive definite and its failing leading minor; b is then unspecified. a is not
// modified (the factor goes to scratch memory charged to the backend's budget).
void cholesky_solve(Backend& be, const CArray& a, CArray& b);

// Thin SVD a = u diag(s) v^H of a [m, n, batch]: k = min(m, n); s [k, batch] descending (non-negative);
// u [m, k, batch] and v [n, k, batch] with orthonormal columns (each pair (u_j, v_j) defined up to a
// common phase factor). Throws std::runtime_error naming the batch index when the iteration does not
// converge.
void svd(Backend& be, const CArray& a, RArray& s, CArray& u, CArray& v);

// Gram matrices g = a^H a of a [m, n, batch]: g [n, n, batch], the full Hermitian matrix written (both
// triangles, the upper the exact conjugate of the lower, the diagonal exactly real).
void gram(Backend& be, const CArray& a, CArray& g);

}  // namespace larmor::dense
