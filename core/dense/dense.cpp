// The dense layer's public functions (core/dense/dense.h): argument checks shared by both devices,
// outputs made where the caller passed none, empty problems answered here, then the CPU or CUDA
// implementation (core/dense/dense_kernels.h).
#include "core/dense/dense.h"

#include <algorithm>
#include <string>

#include "core/dense/dense_kernels.h"
#include "core/dense/dense_shapes.h"

namespace larmor::dense {
namespace {

using detail::check_input;
using detail::check_int;
using detail::check_no_overlap;
using detail::matrix_dims;
using detail::MatrixDims;
using detail::prepare_output;
using detail::with_batch_of;

MatrixDims square_dims(const CArray& a, const char* op) {
    const MatrixDims d = matrix_dims(a.shape(), op, "a");
    if (d.rows != d.cols)
        throw std::invalid_argument(std::string(op) + ": a " + a.shape().str() +
                                    " is not a batch of square matrices [n, n, batch...]");
    return d;
}

// 32-bit LAPACK / cuSOLVER sizes: each dimension, the elements of one matrix, and the batch (one
// cuSOLVER batched call takes an int count).
void check_sizes(const MatrixDims& d, const Shape& s, const char* op) {
    check_int(d.rows, "rows", s, op);
    check_int(d.cols, "columns", s, op);
    check_int(d.rows * d.cols, "elements per matrix", s, op);
    check_int(d.batch, "batch", s, op);
}

bool on_cpu(Backend& be) { return be.device() == Device::Cpu; }

}  // namespace

std::string not_positive_definite_message(const char* op, size_t index, size_t batch, size_t n, size_t minor) {
    return std::string(op) + ": matrix " + std::to_string(index) + " of " + std::to_string(batch) + " (" +
           std::to_string(n) + " x " + std::to_string(n) + ") is not positive definite: its leading minor of order " +
           std::to_string(minor) + " is not positive (potrf info " + std::to_string(minor) + ")";
}

std::string no_convergence_message(const char* op, const char* what, size_t index, size_t batch, long long info) {
    return std::string(op) + ": " + what + " did not converge for matrix " + std::to_string(index) + " of " +
           std::to_string(batch) + " (info " + std::to_string(info) + ")";
}

void hermitian_eig(Backend& be, const CArray& a, RArray& values, CArray& vectors) {
    const char* op = "hermitian_eig";
    check_input(be, a, op, "a");
    const MatrixDims d = square_dims(a, op);
    check_sizes(d, a.shape(), op);
    const size_t n = d.rows;
    prepare_output(be, values, with_batch_of({n}, a.shape(), 2), 1, d.batch, op, "values");
    prepare_output(be, vectors, with_batch_of({n, n}, a.shape(), 2), 2, d.batch, op, "vectors");
    check_no_overlap(values, "values", a, "a", op);
    check_no_overlap(vectors, "vectors", a, "a", op, true);
    check_no_overlap(values, "values", vectors, "vectors", op);
    if (n == 0 || d.batch == 0) return;
    if (on_cpu(be))
        cpu::hermitian_eig(be, a, values, vectors, n, d.batch);
    else
        cuda::hermitian_eig(be, a, values, vectors, n, d.batch);
}

void cholesky_solve(Backend& be, const CArray& a, CArray& b) {
    const char* op = "cholesky_solve";
    check_input(be, a, op, "a");
    check_input(be, b, op, "b");
    const MatrixDims d = square_dims(a, op);
    check_sizes(d, a.shape(), op);
    const MatrixDims r = matrix_dims(b.shape(), op, "b");
    if (r.rows != d.rows || r.batch != d.batch)
        throw std::invalid_argument(std::string(op) + ": b " + b.shape().str() + " does not match a " +
                                    a.shape().str() + " (b must be [" + std::to_string(d.rows) + ", nrhs] times " +
                                    std::to_string(d.batch) + " matrices)");
    check_sizes(r, b.shape(), op);
    check_no_overlap(b, "b", a, "a", op);
    if (d.rows == 0 || r.cols == 0 || d.batch == 0) return;
    if (on_cpu(be))
        cpu::cholesky_solve(be, a, b, d.rows, r.cols, d.batch);
    else
        cuda::cholesky_solve(be, a, b, d.rows, r.cols, d.batch);
}

void svd(Backend& be, const CArray& a, RArray& s, CArray& u, CArray& v) {
    const char* op = "svd";
    check_input(be, a, op, "a");
    const MatrixDims d = matrix_dims(a.shape(), op, "a");
    check_sizes(d, a.shape(), op);
    const size_t m = d.rows, n = d.cols, k = std::min(m, n);
    prepare_output(be, s, with_batch_of({k}, a.shape(), 2), 1, d.batch, op, "s");
    prepare_output(be, u, with_batch_of({m, k}, a.shape(), 2), 2, d.batch, op, "u");
    prepare_output(be, v, with_batch_of({n, k}, a.shape(), 2), 2, d.batch, op, "v");
    check_no_overlap(s, "s", a, "a", op);
    check_no_overlap(u, "u", a, "a", op);
    check_no_overlap(v, "v", a, "a", op);
    check_no_overlap(s, "s", u, "u", op);
    check_no_overlap(s, "s", v, "v", op);
    check_no_overlap(u, "u", v, "v", op);
    if (k == 0 || d.batch == 0) return;
    if (on_cpu(be))
        cpu::svd(be, a, s, u, v, m, n, d.batch);
    else
        cuda::svd(be, a, s, u, v, m, n, d.batch);
}

void gram(Backend& be, const CArray& a, CArray& g) {
    const char* op = "gram";
    check_input(be, a, op, "a");
    const MatrixDims d = matrix_dims(a.shape(), op, "a");
    check_sizes(d, a.shape(), op);
    const size_t m = d.rows, n = d.cols;
    prepare_output(be, g, with_batch_of({n, n}, a.shape(), 2), 2, d.batch, op, "g");
    check_no_overlap(g, "g", a, "a", op);
    if (n == 0 || d.batch == 0) return;
    if (m == 0) {  // the sum over no rows
        be.fill(g, cfloat(0.f, 0.f));
        return;
    }
    if (on_cpu(be))
        cpu::gram(be, a, g, m, n, d.batch);
    else
        cuda::gram(be, a, g, m, n, d.batch);
}

}  // namespace larmor::dense
