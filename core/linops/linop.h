#pragma once
// A linear operator A: C^ishape -> C^oshape with its adjoint, the unit that solvers (CG, POCS, FISTA)
// are written against, as BART's linops and SigPy's Linop (read for the idea; written here anew).
//
//  * forward(x, y) / adjoint(y, x) / normal(x, z) write into outputs the caller owns and has sized:
//    an output is never rebound, and nothing is allocated on the hot path. Operators that need
//    temporaries keep them in a workspace filled on first use (then reused for every later call).
//  * The backend lives in the operator: its fixed arrays (coil maps, masks, weights) sit on that
//    backend's device, and every input and output must be there too. The same class runs on the CPU
//    and on CUDA; only the Backend primitives (or an operator's own kernels) differ.
//  * normal() computes A^H A x. The default is adjoint(forward(x)); operators override it where A^H A
//    is cheaper than the pair (a unitary FFT: the identity; coil maps: one pointwise weight; Toeplitz
//    embeddings of a NUFFT later), and compositions pass the override through: normal(A B) =
//    B^H normal(A) B.
//  * Outputs must not overlap inputs. An operator object is used by one thread at a time (its
//    workspace is not shared).
#include <map>
#include <memory>
#include <string>

#include "core/backend.h"

namespace larmor {

class LinearOperator {
public:
    LinearOperator(std::shared_ptr<Backend> backend, Shape ishape, Shape oshape, std::string name);
    virtual ~LinearOperator() = default;
    LinearOperator(const LinearOperator&) = delete;
    LinearOperator& operator=(const LinearOperator&) = delete;

    // Shape of the domain (input of forward) and of the range (output of forward).
    const Shape& ishape() const { return ishape_; }
    const Shape& oshape() const { return oshape_; }
    Backend& backend() const { return *backend_; }
    const std::shared_ptr<Backend>& backend_ptr() const { return backend_; }
    // The operator's kind ("SENSE", "FFT", "compose"), and with its shapes for error messages:
    // "SENSE [256x256] -> [256x256x32]".
    const std::string& name() const { return name_; }
    std::string describe() const;

    // y = A x. x has ishape(), y has oshape(), both on the operator's backend. Throws
    // std::invalid_argument naming the operator and the offending array otherwise.
    void forward(const CArray& x, CArray& y);
    // x = A^H y.
    void adjoint(const CArray& y, CArray& x);
    // z = A^H A x; x and z have ishape().
    void normal(const CArray& x, CArray& z);
    // For a square operator N in conjugate gradients: y = N x, then the coefficients of
    // Backend::cg_coefficients(x, y, coefficients) with x the residual. The default is the two calls;
    // an operator whose kernel ends where it writes y overrides it to take both inner products in that
    // same pass (one launch and two reads of the vectors fewer per iteration).
    void forward_cg(const CArray& x, CArray& y, CArray& coefficients);

protected:
    virtual void apply_forward(const CArray& x, CArray& y) = 0;
    virtual void apply_adjoint(const CArray& y, CArray& x) = 0;
    virtual void apply_normal(const CArray& x, CArray& z);
    virtual void apply_forward_cg(const CArray& x, CArray& y, CArray& coefficients);

    // Temporary array number `slot` of `shape` on the operator's backend, allocated on its first
    // request and the same array every later time (its contents mean nothing between calls).
    CArray& scratch(int slot, const Shape& shape);

private:
    void check(const CArray& a, const Shape& want, const char* op, const char* what) const;

    std::shared_ptr<Backend> backend_;
    Shape ishape_, oshape_;
    std::string name_;
    std::map<int, CArray> scratch_;
    CArray normal_tmp_;  // the default normal()'s A x
};

using LinOp = std::shared_ptr<LinearOperator>;

}  // namespace larmor
