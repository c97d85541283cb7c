#pragma once
// The CUDA side of the gadget kernels (gadgets/kernels): entry points that take the session's
// backend, queue the kernels on its stream and draw their scratch from its memory. Defined in
// gadgets/kernels/cuda/entry.cpp in CUDA builds, and by a stub that refuses in CPU-only builds.
// Arguments are validated by the caller (gadgets/kernels/checks.h).
#include <vector>

#include "core/backend.h"
#include "gadgets/kernels/checks.h"

namespace larmor::kernels::cuda {

void place_lines(Backend& be, const CArray& src, const std::vector<LinePlacement>& where, CArray& dst,
                 const checks::PlaceDims& d);
void mix_place_lines(Backend& be, const CArray& src, const CArray& m, const std::vector<LinePlacement>& where,
                     CArray& dst, const checks::MixPlaceDims& d);
void mix_last_axis(Backend& be, const CArray& x, const std::vector<cfloat>& m, CArray& y, const checks::MixDims& d);

}  // namespace larmor::kernels::cuda
