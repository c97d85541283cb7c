#pragma once
// The accumulator's fused kernels: readouts placed into the k-space buffer in batches, with the
// coil mixing of noise prewhitening folded in. Each function runs on the array's backend (CPU loops
// or CUDA kernels on the backend's stream) and validates its arguments with messages that name the
// offending value; the Backend itself knows nothing of them.
#include <vector>

#include "core/backend.h"

namespace larmor::kernels {

// Where line k of a batch goes: dst[:, line, c] = keep * dst[:, line, c] + scale * src[:, k, c]
// (keep == 0 overwrites without reading dst). The accumulator keeps a running mean of lines acquired
// n times (averages) with keep = (n-1)/n, scale = 1/n.
struct LinePlacement {
    size_t line = 0;
    float keep = 0.f;
    float scale = 1.f;
};

// src viewed as [L, K, C] and dst as [L, E, C] (L = first axis, C = last, the axes between
// flattened); placement k reads src line k. Lines must be distinct; dst must not overlap src.
void place_lines(Backend& be, const CArray& src, const std::vector<LinePlacement>& where, CArray& dst);

// place_lines with coil mixing: src [L, K, D], dst [L, E, C], m a C x D row-major matrix stored as
// a [C * D] array on the backend (upload it once; the accumulator mixes every batch with the same
// prewhitener), and
//   dst[:, line_k, c] = keep_k dst[:, line_k, c] + scale_k sum_d m[c D + d] src[:, k, d].
void mix_place_lines(Backend& be, const CArray& src, const CArray& m, const std::vector<LinePlacement>& where,
                     CArray& dst);

// y[..., c] = sum_d m[c D + d] x[..., d]: x [..., D] into y [..., C] (coil prewhitening, coil
// compression), m row-major C x D on the host.
void mix_last_axis(Backend& be, const CArray& x, const std::vector<cfloat>& m, CArray& y);

}  // namespace larmor::kernels
