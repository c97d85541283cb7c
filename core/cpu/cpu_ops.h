#pragma once
// Loops of the CPU backend, one file each; `threads` is the OpenMP team size. Arguments are already
// validated by the caller (backend_checks.h).
#include <vector>

#include "core/backend.h"
#include "core/array.h"

namespace larmor::cpu {

// out = in * prod_a tables[a][i_a] for every axis a with a non-empty table (centring modulation);
// out may be in.
void modulate(const cfloat* in, cfloat* out, const Shape& s, const std::vector<std::vector<cfloat>>& tables,
              int threads);

void crop_pad_centred(const CArray& src, CArray& dst, int threads);
void complex_part(const cfloat* x, size_t n, ComplexPart part, float* out, int threads);

}  // namespace larmor::cpu
