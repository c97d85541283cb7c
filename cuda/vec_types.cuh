#pragma once
// Vector access helpers shared by the memory-bound kernels: two complex values per 16-byte load
// where the addresses allow it.
#include <cuda_runtime.h>

#include <cstdint>

namespace larmor::cuda {

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The load type of V complex floats: float2 (V = 1) or float4 (V = 2).
template <int V>
struct Vec;
template <>
struct Vec<1> {
    using T = float2;
};
template <>
struct Vec<2> {
    using T = float4;
};

}  // namespace larmor::cuda
