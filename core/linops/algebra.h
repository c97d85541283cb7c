#pragma once
// Operators built from operators: composition, sum, scaling, identity, stacks, the adjoint, the normal
// operator, reshaping and a substituted normal. Every part must run on the same backend; shapes must
// chain, or construction throws std::invalid_argument naming both parts. Each combinator allocates its
// temporaries once (first use) and reuses them.
#include <vector>

#include "core/linops/linop.h"

namespace larmor {

// The identity on `shape`.
LinOp identity(std::shared_ptr<Backend> backend, const Shape& shape);
// A B (B first): B.oshape must equal A.ishape. normal(A B) = B^H normal(A) B, so an override of A's
// normal (a unitary transform, a Toeplitz embedding) is used.
LinOp compose(LinOp a, LinOp b);
// compose over a list: ops[0] ops[1] ... ops[n-1] (the last applied first).
LinOp compose(const std::vector<LinOp>& ops);
// A + B, equal shapes.
LinOp sum(LinOp a, LinOp b);
// a A; normal = |a|^2 normal(A).
LinOp scale(cfloat a, LinOp op);
// [A_0; A_1; ...]: one input, the outputs one after another as a flat vector of their total size;
// normal = sum_i normal(A_i) (e.g. [E; sqrt(lambda) D] for a regularised least-squares problem).
LinOp vstack(const std::vector<LinOp>& ops);
// [A_0, A_1, ...]: the inputs one after another as one flat vector, the outputs summed.
LinOp hstack(const std::vector<LinOp>& ops);

// A^H as an operator of its own: ishape = A.oshape, forward = A's adjoint, adjoint = A's forward, and
// normal = A A^H (A's forward after its adjoint: A's normal() is A^H A, of no use here). The adjoint of
// an adjoint is A itself (the same object).
LinOp adjoint(LinOp a);
// A^H A as a Hermitian operator on A.ishape: forward = adjoint = A's normal(), so an override of it (a
// unitary FFT, coil maps, a Toeplitz embedding) is what runs; its own normal applies that twice.
LinOp normal(LinOp a);
// The identity on data seen with another shape of the same size (a flat vector as an image, coils
// split into batches): each of forward and adjoint is one copy into the caller's output, through a
// view of the input with the output's shape; normal is the identity. Throws std::invalid_argument
// naming both shapes when their sizes differ.
LinOp reshape(std::shared_ptr<Backend> backend, const Shape& ishape, const Shape& oshape);
// A with its input seen as `ishape` and its output as `oshape` (sizes equal to A's): A runs on views
// of the caller's arrays, so nothing is copied (unlike compose with the reshape above, which copies
// twice); normal is A's, overrides included.
LinOp reshape(LinOp a, const Shape& ishape, const Shape& oshape);
// A whose normal() is N: forward and adjoint are A's, normal(x) = N x. This is how a cheaper or exact
// stand-in for A^H A (the Toeplitz embedding of a NUFFT pair) reaches a composition:
// compose(with_normal(W^1/2 F, T), S).normal() = S^H T S. N must be square on A.ishape and on A's
// backend (std::invalid_argument naming both otherwise). That N equals A^H A, to the accuracy the
// caller accepts, is the caller's promise and is not checked: a solver given normal() solves N's
// problem, while A's forward and adjoint (a residual, a data-consistency step) still use A itself.
LinOp with_normal(LinOp a, LinOp n);

}  // namespace larmor
