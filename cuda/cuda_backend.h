#pragma once
// Internal access to a CUDA backend for benchmarks and tests in CUDA builds: the stream it queues
// its work on (to time it with CUDA events, or order foreign kernels after it).
#include <cuda_runtime.h>

#include "core/backend.h"

namespace larmor::cuda {

// Throws std::invalid_argument when `b` is not a CUDA backend.
cudaStream_t backend_stream(Backend& b);

}  // namespace larmor::cuda
