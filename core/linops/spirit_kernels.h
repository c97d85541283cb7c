#pragma once
// The SPIRiT operators' own kernels (core/linops/spirit.h): per pixel p, a C x C matrix applied to
// the coil vector plus a multiple of the identity,
//     out[p, o] = sum_c m[p, c, o] in[p, c] + self * in[p, o]
// (self = -1: the consistency operator G - I; self = 0: G itself, the POCS step),
// with every array pixel fastest ([pixels, C] and [pixels, C, C]), so each pixel's matrix and coil
// vector are read once (the floor of the operator: C^2 + 2C complex values per pixel). `out` may be `in`
// itself (the POCS step in place), never a partial overlap. One CPU and one
// CUDA definition (cuda/spirit.cu; a build without CUDA has a stub that throws).
#include <cstddef>

#include "core/backend.h"

namespace larmor {

namespace cpu {
void spirit_apply(const CArray& m, const CArray& in, CArray& out, size_t pixels, size_t coils, float self);
}  // namespace cpu

namespace cuda {
void spirit_apply(Backend& be, const CArray& m, const CArray& in, CArray& out, size_t pixels, size_t coils,
                  float self);
}  // namespace cuda

}  // namespace larmor
