#pragma once
// The dense layer's two implementations behind core/dense/dense.h: one CPU definition
// (core/dense/dense_cpu.cpp: LAPACKE, CBLAS, OpenMP) and one CUDA definition (cuda/dense_cusolver.cpp,
// cuda/dense_cublas.cpp; a build without nvcc has core/dense/dense_cuda_stub.cpp, which throws). The
// public functions (core/dense/dense.cpp) have checked every shape, the devices and overlaps, made the
// outputs and returned early for empty problems: here all sizes are >= 1 and fit an int, and the
// arrays are contiguous batches of column-major matrices as documented there.
#include <cstddef>
#include <string>

#include "core/backend.h"

namespace larmor::dense {

namespace cpu {
void hermitian_eig(Backend& be, const CArray& a, RArray& values, CArray& vectors, size_t n, size_t batch);
void cholesky_solve(Backend& be, const CArray& a, CArray& b, size_t n, size_t nrhs, size_t batch);
void svd(Backend& be, const CArray& a, RArray& s, CArray& u, CArray& v, size_t m, size_t n, size_t batch);
void gram(Backend& be, const CArray& a, CArray& g, size_t m, size_t n, size_t batch);
}  // namespace cpu

namespace cuda {
void hermitian_eig(Backend& be, const CArray& a, RArray& values, CArray& vectors, size_t n, size_t batch);
void cholesky_solve(Backend& be, const CArray& a, CArray& b, size_t n, size_t nrhs, size_t batch);
void svd(Backend& be, const CArray& a, RArray& s, CArray& u, CArray& v, size_t m, size_t n, size_t batch);
void gram(Backend& be, const CArray& a, CArray& g, size_t m, size_t n, size_t batch);
}  // namespace cuda

// The message of a matrix that is not positive definite, the same from both implementations:
// "<op>: matrix <index> of <batch> (<n> x <n>) is not positive definite: its leading minor of order
// <minor> is not positive (potrf info <minor>)".
std::string not_positive_definite_message(const char* op, size_t index, size_t batch, size_t n, size_t minor);
// "<op>: <what> did not converge for matrix <index> of <batch> (info <info>)".
std::string no_convergence_message(const char* op, const char* what, size_t index, size_t batch, long long info);

}  // namespace larmor::dense
