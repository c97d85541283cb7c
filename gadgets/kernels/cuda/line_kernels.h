#pragma once
// Launchers of the kernels that put a batch of processed readout lines into the k-space buffer
// (kernels::place_lines, kernels::mix_place_lines). Arguments are validated by the caller.
#include <cuda_runtime.h>

#include <cstddef>

namespace larmor::kernels::cuda {

// Placements per launch (passed by value as kernel parameters; larger batches take several launches).
constexpr int kMaxPlacements = 64;

// Placements first .. first + count - 1 of one call; placement q reads src slot first + q.
struct Placements {
    int count = 0;
    long long first = 0;
    long long line[kMaxPlacements] = {};
    float keep[kMaxPlacements] = {};
    float scale[kMaxPlacements] = {};
};

// src [l, k, c], dst [l, e, c], column-major (first axis fastest).
void launch_place_lines(const float2* src, long long l, long long k, float2* dst, long long e, long long c,
                        const Placements& p, cudaStream_t stream);

// src [l, k, d], dst [l, e, c], m row-major c x d on the device.
void launch_mix_place_lines(const float2* src, long long l, long long k, long long d, const float2* m, float2* dst,
                            long long e, long long c, const Placements& p, cudaStream_t stream);

}  // namespace larmor::kernels::cuda
