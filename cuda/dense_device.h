#pragma once
// What the dense layer's cuSOLVER and cuBLAS calls share (cuda/dense_cusolver.cpp,
// cuda/dense_cublas.cpp): raw device pointers, int scratch from the backend, and the read-back of the
// first failing info flag.
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "core/backend.h"

namespace larmor::dense::cuda::detail {

inline float2* dev(CArray& a) { return reinterpret_cast<float2*>(a.data()); }
inline const float2* dev(const CArray& a) { return reinterpret_cast<const float2*>(a.data()); }

// Device scratch for `count` ints (info flags), from the backend: charged to the session's budget and
// freed stream-ordered with the array. ints() is its first int.
CArray int_scratch(Backend& be, size_t count);
inline int* ints(CArray& a) { return reinterpret_cast<int*>(a.data()); }

// Device scratch of `count` pointers (cuSOLVER's pointer arrays), from the backend.
CArray pointer_scratch(Backend& be, size_t count);
inline float2** pointers(CArray& a) { return reinterpret_cast<float2**>(a.data()); }

// The first of `count` info flags on the device that is not 0: its index (-1 when all are 0) and value.
// Waits for the backend's stream (the flags are the results of work queued there).
struct InfoFailure {
    long long index = -1;
    int info = 0;
};
InfoFailure first_failure(Backend& be, const int* info, size_t count);

// "<op> of a [shape] on CUDA device <d>": the context of the calls' status checks.
std::string call_context(Backend& be, const char* op, const CArray& a);

}  // namespace larmor::dense::cuda::detail
