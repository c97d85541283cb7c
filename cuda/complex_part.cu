// One real part of complex data (Backend::download_part), computed on the device so that only the
// floats are downloaded. The magnitude is formed in double like the CPU backend's, so both round the
// same exact value to float.
#include <string>

#include "cuda/complex_part.h"
#include "cuda/cuda_check.h"
#include "cuda/launch_size.h"

namespace larmor::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void complex_part_kernel(const float2* __restrict__ x, long long n, int part, float* __restrict__ out) {
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        const float2 z = x[i];
        float r;
        switch (part) {
            case 0: r = static_cast<float>(sqrt(static_cast<double>(z.x) * z.x + static_cast<double>(z.y) * z.y)); break;
            case 1: r = z.x; break;
            case 2: r = z.y; break;
            default: r = atan2f(z.y, z.x); break;
        }
        out[i] = r;
    }
}

}  // namespace

void launch_complex_part(const float2* x, long long n, ComplexPart part, float* out, cudaStream_t stream) {
    if (n == 0) return;
    const int p = part == ComplexPart::Magnitude ? 0 : part == ComplexPart::Real ? 1 : part == ComplexPart::Imag ? 2 : 3;
    const unsigned grid = grid_stride_blocks(n, kThreads);
    complex_part_kernel<<<grid, kThreads, 0, stream>>>(x, n, p, out);
    LARMOR_CUDA_LAUNCH_CHECK("complex_part_kernel", std::to_string(n) + " elements");
}

}  // namespace larmor::cuda
