#pragma once
// Operators built from operators: composition, sum, scaling, identity and stacks. Every part must
// run on the same backend; shapes must chain, or construction throws std::invalid_argument naming
// both parts. Each combinator allocates its temporaries once (first use) and reuses them.
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

}  // namespace larmor
