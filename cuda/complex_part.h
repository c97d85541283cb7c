#pragma once
// Launcher of the kernel behind Backend::download_part: one real part of complex data, on the device.
#include <cuda_runtime.h>

#include "core/backend.h"

namespace larmor::cuda {

void launch_complex_part(const float2* x, long long n, ComplexPart part, float* out, cudaStream_t stream);

}  // namespace larmor::cuda
