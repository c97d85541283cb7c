#pragma once
// Loops of the CPU backend, one file each; `threads` is the OpenMP team size. Arguments are already
// validated by the caller (backend_checks.h).
#include <vector>

#include "core/backend.h"
#include "core/carray.h"

namespace larmor::cpu {

// data *= prod_a tables[a][i_a] for every axis a with a non-empty table (centring modulation).
void modulate(cfloat* data, const Shape& s, const std::vector<std::vector<cfloat>>& tables, int threads);

// y (N x C, column-major) = x (N x D) * m^T with m row-major C x D, through cblas_cgemm.
void mix_last_axis(const CArray& x, const std::vector<cfloat>& m, CArray& y);

void crop_pad_centred(const CArray& src, CArray& dst, int threads);
void complex_part(const cfloat* x, size_t n, ComplexPart part, float* out, int threads);
// src [l, k, c], dst [l, e, c] (detail::check_place_lines gave the sizes).
void place_lines(const CArray& src, const std::vector<Backend::LinePlacement>& where, CArray& dst, size_t l, size_t k,
                 size_t e, size_t c, int threads);
// src [l, k, d], dst [l, e, c], m row-major c x d (detail::check_mix_place_lines gave the sizes).
void mix_place_lines(const CArray& src, const std::vector<cfloat>& m, const std::vector<Backend::LinePlacement>& where,
                     CArray& dst, size_t l, size_t k, size_t e, size_t d, size_t c, int threads);
void rss_last_axis(const CArray& x, CArray& y, int threads);
void combine_last_axis(const CArray& x, const CArray& maps, CArray& y, int threads);
void walsh_sensitivities(const CArray& x, int kernel, int stride, CArray& maps, int threads);

// Index of the coil with the largest energy sum_p |x[p, c]|^2 (the first on ties): the phase
// reference of the Walsh maps, shared by both backends' definitions.
int strongest_coil(const cfloat* x, size_t pixels, size_t coils, int threads);

}  // namespace larmor::cpu
