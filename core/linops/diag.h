#pragma once
// Pointwise multiplication by a fixed array: coil-independent weights (a sampling mask, density
// compensation, a k-space filter) or per-element ones. The weights are broadcast over the trailing
// axes of the operator's shape (core/backend.h), so a [X, Y] mask applies to every coil of
// [X, Y, C] k-space without being repeated. The weights are copied to the backend's device once.
#include "core/linops/linop.h"

namespace larmor {

// D x = w .* x, D^H y = conj(w) .* y, D^H D x = |w|^2 .* x (one pass).
LinOp diag(std::shared_ptr<Backend> backend, const Shape& shape, const CArray& weights);
LinOp diag(std::shared_ptr<Backend> backend, const Shape& shape, const RArray& weights);

// A Cartesian sampling mask: real weights that must all be 0 or 1 (throws naming the first other
// value and its index); its normal is itself.
LinOp sampling_mask(std::shared_ptr<Backend> backend, const Shape& shape, const RArray& mask);

}  // namespace larmor
