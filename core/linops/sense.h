#pragma once
// Coil sensitivities as an operator (Pruessmann et al., MRM 42:952, 1999; the encoding of CG-SENSE,
// MRM 46:638, 2001): S x = (s_1 x, ..., s_C x) expands an image [X, Y, Z...] to every coil of maps
// [X, Y, Z..., C]; S^H y = sum_c conj(s_c) y_c combines coil images. S^H S is the pointwise weight
// sum_c |s_c|^2 (1 inside the object for normalised maps), computed once.
#include "core/linops/linop.h"

namespace larmor {

// maps: [X, Y, Z..., C] (any rank >= 2, coils last), copied to the backend's device.
LinOp sense(std::shared_ptr<Backend> backend, const CArray& maps);

}  // namespace larmor
