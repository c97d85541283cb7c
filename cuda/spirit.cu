// CUDA kernel of the SPIRiT consistency operator (core/linops/spirit_kernels.h): one thread per pixel.
// Pixel-fastest layouts make every load of a matrix entry or coil value coalesced across a warp. Each
// thread first copies its pixel's coil vector into shared memory and then writes its outputs, so `out`
// may be `in` (the POCS step x <- G x in place: no workspace, no copy back, 2 of the 4 passes over the
// coil array gone); device memory sees each value once.
#include <algorithm>
#include <string>

#include "core/linops/spirit_kernels.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/device_context.h"
#include "cuda/launch_size.h"

namespace larmor::cuda {
namespace {

constexpr int kMaxThreads = 256;
// Shared memory for the staged coil vectors: 32 KiB per block keeps 7 blocks on an SM (228 KiB); a
// warp-sized block stages up to 128 coils.
constexpr size_t kStageBytes = 32 * 1024;
constexpr size_t kMaxStagedCoils = kStageBytes / (32 * sizeof(float2));

// Staged: the thread's coil vector is copied to its own shared column before any output is written, so
// `out` may be `in`. Unstaged (more than 128 coils): the vector is re-read from L1/L2 per output coil,
// and `in` must be apart from `out` (the launcher stages through device memory when it is not).
template <bool Staged>
__global__ void spirit_kernel(const float2* __restrict__ m, const float2* in, float2* out, long long n, int coils,
                              float self_weight) {
    extern __shared__ float2 stage[];  // [coils][blockDim.x]
    float2* mine = stage + threadIdx.x;
    for (long long p = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; p < n;
         p += static_cast<long long>(gridDim.x) * blockDim.x) {
        if (Staged)
            for (int c = 0; c < coils; ++c) mine[c * blockDim.x] = in[p + n * c];
        auto coil = [&](int c) { return Staged ? mine[c * blockDim.x] : in[p + n * c]; };
        for (int o = 0; o < coils; ++o) {
            const float2 self = coil(o);
            float2 acc = make_float2(self_weight * self.x, self_weight * self.y);
            const float2* mo = m + n * static_cast<long long>(coils) * o;
            // Unrolled so that a warp has several of G's loads in flight: one at a time left the 32-coil
            // step at about half of HBM bandwidth.
#pragma unroll 8
            for (int c = 0; c < coils; ++c) {
                const float2 a = mo[p + n * c], b = coil(c);
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
    const auto* mp = reinterpret_cast<const float2*>(m.data());
    auto* op = reinterpret_cast<float2*>(out.data());
    if (coils <= kMaxStagedCoils) {
        const size_t fit = kStageBytes / (coils * sizeof(float2)) / 32 * 32;
        const int threads = int(std::min<size_t>(kMaxThreads, fit));
        spirit_kernel<true><<<grid_stride_blocks(n, threads), threads, threads * coils * sizeof(float2),
                              backend_stream(be)>>>(mp, reinterpret_cast<const float2*>(in.data()), op, n,
                                                    static_cast<int>(coils), self);
    } else {
        CArray staged;
        if (overlaps(in, out)) {
            staged = be.empty(in.shape());
            be.copy(in, staged);
        }
        const CArray& src = staged.empty() ? in : staged;
        spirit_kernel<false><<<grid_stride_blocks(n, kMaxThreads), kMaxThreads, 0, backend_stream(be)>>>(
            mp, reinterpret_cast<const float2*>(src.data()), op, n, static_cast<int>(coils), self);
    }
    LARMOR_CUDA_LAUNCH_CHECK("spirit_kernel", std::to_string(pixels) + " pixels x " + std::to_string(coils) + " coils");
}

}  // namespace larmor::cuda
