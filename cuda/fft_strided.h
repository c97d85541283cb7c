#pragma once
// Larmor's own FFT kernel for a strided axis (stride > 1), used by the `strided` centring
// (cuda/fft_plans.h, pass layout in cuda/fft_layout.h, strided_layout). One block transforms a tile
// of TX adjacent columns (inner positions, 64-256 B per row, coalesced) along the whole axis
// (a power of two, 2..1024) for one outer index: the first radix stage reads global memory, the
// middle ones go through shared memory, the last writes global memory; mixed radix-2/4 Stockham
// (natural order in and out), twiddles from a __constant__ table computed in double on the host.
// The first pass of a transform reads x with the centring of every transformed axis folded in
// (w[n] = (-1)^n x[(n + N/2) mod N] per axis) times the orthonormal scale, out of place; the later
// passes are plain and may run in place (in == out).
#include <cuda_runtime.h>

#include "cuda/fft_layout.h"

namespace larmor::cuda {

// True for powers of two in [2, kStridedMaxN].
bool strided_fft_supports(long long n);

// Once per device (and thread-safe): uploads the twiddle table and raises the kernels' shared
// memory limit. Call with `device` current, before the first launch on it.
void strided_fft_prepare(int device);

// Queues one pass on `stream`. `in` == `out` is allowed when !a.shift.
void launch_strided_fft(const float2* in, float2* out, const StridedFftArgs& a, cudaStream_t stream);

}  // namespace larmor::cuda
