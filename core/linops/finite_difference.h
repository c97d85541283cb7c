#pragma once
// Forward finite differences with periodic boundaries along chosen axes: D x = (d_a x)_a with
// (d_a x)[i] = x[i + e_a] - x[i], stacked along a new last axis, so the output of an image
// [X, Y, Z] over axes {0, 1} is [X, Y, Z, 2]. D^H y = sum_a (y_a[i - e_a] - y_a[i]). The operator of
// total-variation and Sobolev (gradient) regularisation; periodic ends keep D^H exactly the adjoint.
#include <vector>

#include "core/linops/linop.h"

namespace larmor {

LinOp finite_difference(std::shared_ptr<Backend> backend, const Shape& shape, const std::vector<int>& axes);

}  // namespace larmor
