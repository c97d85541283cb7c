#pragma once
// The finite-difference operator's own kernels (core/linops/finite_difference.h): one CPU and one
// CUDA definition (cuda/finite_difference.cu; a build without CUDA has a stub that throws).
// x is the image of `shape`; y is [shape..., axes.size()].
#include <vector>

#include "core/backend.h"

namespace larmor {

struct DiffGeometry {
    Shape shape;
    std::vector<int> axes;
};

namespace cpu {
void finite_difference_forward(const CArray& x, CArray& y, const DiffGeometry& g);
void finite_difference_adjoint(const CArray& y, CArray& x, const DiffGeometry& g);
}  // namespace cpu

namespace cuda {
void finite_difference_forward(Backend& be, const CArray& x, CArray& y, const DiffGeometry& g);
void finite_difference_adjoint(Backend& be, const CArray& y, CArray& x, const DiffGeometry& g);
}  // namespace cuda

}  // namespace larmor
