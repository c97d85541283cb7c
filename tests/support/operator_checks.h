#pragma once
// Shared checks for linear operators (design.md, "Operators and solvers"):
//   expect_adjoint(op)          <A x, y> = <x, A^H y> on random inputs, and normal() = A^H A
//   expect_matches(op, dense)   forward, adjoint and normal against a dense double-precision matrix
//                               of the same operator, built independently on small sizes
//   expect_same_on_cpu(make)    a CUDA operator against its CPU twin on the same inputs
#include <complex>
#include <functional>
#include <memory>
#include <vector>

#include "core/linops/linop.h"

namespace larmor::test {

using cdouble = std::complex<double>;

// A dense complex matrix in double, row-major: a[r * cols + c].
struct DenseMatrix {
    size_t rows = 0, cols = 0;
    std::vector<cdouble> a;

    DenseMatrix() = default;
    DenseMatrix(size_t r, size_t c) : rows(r), cols(c), a(r * c) {}
    cdouble& at(size_t r, size_t c) { return a[r * cols + c]; }
    cdouble at(size_t r, size_t c) const { return a[r * cols + c]; }

    std::vector<cdouble> apply(const std::vector<cdouble>& x) const;          // A x
    std::vector<cdouble> apply_adjoint(const std::vector<cdouble>& y) const;  // A^H y
    DenseMatrix adjoint() const;
    DenseMatrix operator*(const DenseMatrix& b) const;
    DenseMatrix operator+(const DenseMatrix& b) const;
    static DenseMatrix identity(size_t n);
    // The matrix of a function on vectors of length n (column j = f(e_j)).
    static DenseMatrix from_columns(size_t n, const std::function<std::vector<cdouble>(const std::vector<cdouble>&)>& f);
};

// Random complex normal array of `shape` on `be`'s device.
CArray random_on(Backend& be, const Shape& shape, unsigned seed);
// A host copy of any array as doubles.
std::vector<cdouble> download(Backend& be, const CArray& a);

// Runs forward / adjoint / normal on fresh outputs and returns host copies.
std::vector<cdouble> apply_forward(LinearOperator& op, const CArray& x);
std::vector<cdouble> apply_adjoint(LinearOperator& op, const CArray& y);
std::vector<cdouble> apply_normal(LinearOperator& op, const CArray& x);

// |<A x, y> - <x, A^H y>| <= tol * ||A x|| ||y||, and ||normal(x) - A^H A x|| <= tol ||A^H A x||.
void expect_adjoint(LinearOperator& op, double tol = 1e-5, unsigned seed = 7);
// Relative L2 error of forward, adjoint and normal against the dense matrix <= tol.
void expect_matches(LinearOperator& op, const DenseMatrix& dense, double tol = 1e-5, unsigned seed = 11);
// `make` builds the same operator on any backend (fixed data, fixed seeds); forward/adjoint/normal on
// `be` agree with its CPU twin's to tol (relative L2). Nothing to do when `be` is the CPU.
void expect_same_on_cpu(const std::shared_ptr<Backend>& be, const std::function<LinOp(std::shared_ptr<Backend>)>& make,
                        double tol = 1e-5);

}  // namespace larmor::test
