#pragma once
// Internal access to a CUDA backend in CUDA builds, for the kernels that operators and gadgets bring
// with them (finite differences, NUFFT, Walsh maps...), benchmarks and tests: the stream it queues
// its work on (their kernels go there, so they are ordered with the backend's own work; benchmarks
// time it with CUDA events), its device, and the scratch of its single-pass reductions.
#include <cuda_runtime.h>

#include "core/backend.h"
#include "cuda/blas1.h"

namespace larmor::cuda {

// Throws std::invalid_argument when `b` is not a CUDA backend.
cudaStream_t backend_stream(Backend& b);
int backend_device(Backend& b);
// For a kernel that ends in one of the backend's reductions (cuda/reduction.cuh): the same scratch,
// so the kernel must be queued on backend_stream(b), after and before the backend's own reductions.
ReductionScratch backend_reduction_scratch(Backend& b);

// The check of every kernel entry point on its arguments: `a` is empty or device memory of b's device,
// else std::invalid_argument naming op, the array and both devices (an array of another session's
// device would otherwise fault inside the kernel, or worse, read another device's memory).
void check_on_backend(Backend& b, const CArray& a, const char* op, const char* name);
void check_on_backend(Backend& b, const RArray& a, const char* op, const char* name);

}  // namespace larmor::cuda
