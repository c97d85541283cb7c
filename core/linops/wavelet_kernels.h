#pragma once
// The wavelet's own kernels (core/linops/wavelet.h): one CPU definition (wavelet_cpu.cpp) and one
// CUDA definition (cuda/wavelet.cu; a build without CUDA has a stub that throws).
#include "core/backend.h"

namespace larmor {

// The Daubechies-4 analysis filters: low pass h and high pass g_k = (-1)^k h_{3-k}.
struct Daubechies4 {
    static constexpr double kSqrt3 = 1.7320508075688772935;
    static constexpr double kNorm = 5.6568542494923801952;  // 4 sqrt(2)
    static constexpr double h[4] = {(1 + kSqrt3) / kNorm, (3 + kSqrt3) / kNorm, (3 - kSqrt3) / kNorm,
                                    (1 - kSqrt3) / kNorm};
    static constexpr double g[4] = {(1 - kSqrt3) / kNorm, -(3 - kSqrt3) / kNorm, (3 + kSqrt3) / kNorm,
                                    -(1 + kSqrt3) / kNorm};
};

// One level along one axis: the lines of `block` along `axis` (length m, even) of src become
// [m/2 low, m/2 high] (forward) or back (inverse) in dst. src and dst have one shape and are the same
// array (in place) or do not overlap; elements of dst outside block are untouched. shift (0 <= shift < m)
// turns the line circularly: a forward pass reads element (i + shift) mod m as its element i, an
// inverse pass writes its element i to (i + shift) mod m, so the inverse undoes the forward.
// Soft thresholding jointly over the trailing axes (x seen as [n, joint], as Backend::soft_threshold)
// that leaves the low band `coarse` (a block of x's leading axes) as it is.
namespace cpu {
void wavelet_pass(const CArray& src, CArray& dst, const Shape& block, int axis, bool inverse, size_t shift = 0);
void wavelet_threshold(float lambda, const CArray& x, CArray& out, size_t joint, const Shape& coarse);
}  // namespace cpu

namespace cuda {
void wavelet_pass(Backend& be, const CArray& src, CArray& dst, const Shape& block, int axis, bool inverse,
                  size_t shift = 0);
void wavelet_threshold(Backend& be, float lambda, const CArray& x, CArray& out, size_t joint, const Shape& coarse);
}  // namespace cuda

}  // namespace larmor
