#pragma once
// CPU loops of the gadget kernels (gadgets/kernels), one file each; `threads` is the OpenMP team
// size. Arguments are already validated by the caller (gadgets/kernels/checks.h).
#include <vector>

#include "core/array.h"
#include "gadgets/kernels/line_placement.h"

namespace larmor::kernels::cpu {

// y (N x C, column-major) = x (N x D) * m^T with m row-major C x D, through cblas_cgemm.
void mix_last_axis(const CArray& x, const std::vector<cfloat>& m, CArray& y);
// src [l, k, c], dst [l, e, c] (checks::check_place_lines gave the sizes).
void place_lines(const CArray& src, const std::vector<LinePlacement>& where, CArray& dst, size_t l, size_t k,
                 size_t e, size_t c, int threads);
// src [l, k, d], dst [l, e, c], m row-major c x d (checks::check_mix_place_lines gave the sizes).
void mix_place_lines(const CArray& src, const std::vector<cfloat>& m, const std::vector<LinePlacement>& where,
                     CArray& dst, size_t l, size_t k, size_t e, size_t d, size_t c, int threads);

}  // namespace larmor::kernels::cpu
