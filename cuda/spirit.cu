// CUDA kernel of the SPIRiT consistency operator (core/linops/spirit_kernels.h): one thread per pixel.
// Pixel-fastest layouts make every load of a matrix entry or coil value coalesced across a warp; a
// thread's coil vector is re-read once per output coil, from L1 (a 256-thread block's vectors are
// 256 C 8 bytes, 64 KiB at 32 coils), so device memory sees each value once.
#include <string>

#include "core/linops/spirit_kernels.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/device_context.h"
#include "cuda/launch_size.h"

namespace larmor::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void spirit_kernel(const float2* __restrict__ m, const float2* __restrict__ in, float2* __restrict__ out,
                              long long n, int coils, float self_weight) {
    for (long long p = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; p < n;
         p += static_cast<long long>(gridDim.x) * blockDim.x) {
        for (int o = 0; o < coils; ++o) {
            const float2 self = in[p + n * o];
            float2 acc = make_float2(self_weight * self.x, self_weight * self.y);
            const float2* mo = m + n * static_cast<long long>(coils) * o;
            for (int c = 0; c < coils; ++c) {
                const float2 a = mo[p + n * c], b = in[p + n * c];
                acc.x += a.x * b.x - a.y * b.y;
                acc.y += a.x * b.y + a.y * b.x;
            }
            out[p + n * o] = acc;
        }
    }
}

}  // namespace

void spirit_apply(Backend& be, const CArray& m, const CArray& in, CArray& out, size_t pixels, size_t coils,
                  float self) {
    check_on_backend(be, m, "spirit_apply", "m");
    check_on_backend(be, in, "spirit_apply", "in");
    check_on_backend(be, out, "spirit_apply", "out");
    const long long n = static_cast<long long>(pixels);
    if (n == 0 || coils == 0) return;
    DeviceGuard guard(backend_device(be));
    spirit_kernel<<<grid_stride_blocks(n, kThreads), kThreads, 0, backend_stream(be)>>>(
        reinterpret_cast<const float2*>(m.data()), reinterpret_cast<const float2*>(in.data()),
        reinterpret_cast<float2*>(out.data()), n, static_cast<int>(coils), self);
    LARMOR_CUDA_LAUNCH_CHECK("spirit_kernel", std::to_string(pixels) + " pixels x " + std::to_string(coils) + " coils");
}

}  // namespace larmor::cuda
