#pragma once
// Coil combination and coil-map estimation, the fused kernels of the CoilCombine and CG-SENSE
// gadgets. Each function runs on the array's backend (CPU loops or CUDA kernels on the backend's
// stream); arguments are validated with messages naming the offending value.
#include "core/backend.h"

namespace larmor::coils {

// y = sqrt(sum_c |x[..., c]|^2) over the last axis; y has x's shape without its last axis.
void rss_last_axis(Backend& be, const CArray& x, CArray& y);

// y = sum_c conj(s_c) x_c / sum_c |s_c|^2 over the last axis (optimal combination with maps;
// Roemer et al., MRM 16:192, 1990).
void combine_last_axis(Backend& be, const CArray& x, const CArray& maps, CArray& y);

// Coil sensitivities by the adaptive method of Walsh, Gmitro & Marcellin (MRM 43:682, 2000): the
// dominant eigenvector of the coil correlation matrix summed over a kernel x kernel neighbourhood in
// (x, y), unit norm over the coils, with the phase of a reference coil (the strongest over the whole
// array) removed. x is [X, Y, Z..., C], every slice independent; maps has the same shape. The
// eigenvectors are computed exactly on a grid of spacing `stride` >= 1 in x and y (points
// min(i * stride, X - 1), so the image corners are grid points) and bilinearly interpolated and
// renormalised in between; stride 1 computes every pixel.
void walsh_sensitivities(Backend& be, const CArray& x, int kernel, int stride, CArray& maps);

// combine_last_axis(x, walsh_sensitivities(x, kernel, stride), y) without keeping the maps: a GPU
// interpolates them from the grid while it combines, so the full-size maps are never written and
// read back (2 x 17 MB for 256^2 x 32 coils).
void walsh_combine(Backend& be, const CArray& x, int kernel, int stride, CArray& y);

}  // namespace larmor::coils
