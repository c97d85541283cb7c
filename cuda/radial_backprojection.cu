// CUDA backprojection of the radial FBP (contract: core/recon/radial_fbp_kernels.h), after the GPU
// FBP of Schiwietz et al. (SPIE 6142, 2006), who drew one textured quad per spoke; here one thread
// per pixel loops over the spokes instead, so each pixel is written once and no blending pass is
// needed:
//  - a block covers a 16 x 8 tile of pixels; the spokes' (a_j, b_j) are staged in shared memory a
//    tile of spokes at a time, so each is read from global memory once per block;
//  - the projections are read through the read-only (texture) cache with __ldg: for one spoke the
//    pixels of a tile read a short contiguous stretch of one projection (|a_j|, |b_j| <= M dk / N per
//    pixel), which stays in L1 across the warp;
//  - every thread does all coils (in register chunks of kCoils), so p, floor(p) and the weights are
//    computed once per spoke and chunk, and the RSS is formed without storing coil images.
// Linear interpolation in software (not the texture unit's 8-bit fraction) keeps the CPU twin's
// float accuracy. A shifted spoke (c_j, d_j != 0: off-centre samples, radial_fbp.h) costs one
// range-reduced __sincosf per pixel and spoke, shared by all coils of the register chunk; the test
// on c_j, d_j is the same for every thread of the block (one spoke at a time), so centred spokes
// take no phase and no divergent branch; a set without any shifted spoke runs a kernel without the
// test (FbpGeometry::phased).
#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/recon/radial_fbp_kernels.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/device_context.h"

namespace larmor::cuda {
namespace {

constexpr int kTileX = 16, kTileY = 8;
constexpr int kSpokeTile = 256;
constexpr float kTwoPi = 6.28318530717958647692f;

template <int kCoils, bool kPhased>
__global__ void __launch_bounds__(kTileX* kTileY)
    backproject_kernel(const float2* __restrict__ proj, const float4* __restrict__ steps, FbpGeometry g, bool rss,
                       float2* __restrict__ out) {
    __shared__ float4 st[kSpokeTile];
    const long long n0 = blockIdx.x * static_cast<long long>(kTileX) + threadIdx.x;
    const long long n1 = blockIdx.y * static_cast<long long>(kTileY) + threadIdx.y;
    const bool inside = n0 < g.n0 && n1 < g.n1;
    const int tid = threadIdx.y * kTileX + threadIdx.x;
    const int m = static_cast<int>(g.samples);
    const float x = static_cast<float>(n0 - g.n0 / 2), y = static_cast<float>(n1 - g.n1 / 2);
    const float half = static_cast<float>(g.samples / 2);
    const long long coil_stride = g.samples * g.spokes;
    float ss = 0.f;
    for (long long c0 = 0; c0 < g.coils; c0 += kCoils) {
        float2 acc[kCoils];
#pragma unroll
        for (int k = 0; k < kCoils; ++k) acc[k] = make_float2(0.f, 0.f);
        for (long long j0 = 0; j0 < g.spokes; j0 += kSpokeTile) {
            const int count = static_cast<int>(min(static_cast<long long>(kSpokeTile), g.spokes - j0));
            __syncthreads();  // the previous tile's steps are no longer read
            for (int t = tid; t < count; t += kTileX * kTileY) st[t] = steps[j0 + t];
            __syncthreads();
            if (!inside) continue;
            for (int t = 0; t < count; ++t) {
                const float4 ab = st[t];
                const float p = (half + y * ab.y) + x * ab.x;
                const float fl = floorf(p);
                const int i0 = static_cast<int>(fl), i1 = i0 + 1;
                const float f = p - fl;
                // A neighbour outside the projection counts as 0 (weight 0, index clamped for the read).
                const float w0 = (i0 >= 0 && i0 < m) ? 1.f - f : 0.f;
                const float w1 = (i1 >= 0 && i1 < m) ? f : 0.f;
                // The shift phase is applied after the interpolation (the CPU twin's order): the
                // unshifted projection is the smooth one.
                float sn = 0.f, cs = 1.f;
                const bool phased = kPhased && (ab.z != 0.f || ab.w != 0.f);
                if (phased) {
                    const float phi = x * ab.z + y * ab.w;
                    __sincosf(kTwoPi * (phi - rintf(phi)), &sn, &cs);
                }
                const int r0 = min(max(i0, 0), m - 1), r1 = min(max(i1, 0), m - 1);
                const float2* row = proj + (c0 * g.spokes + j0 + t) * g.samples;
#pragma unroll
                for (int k = 0; k < kCoils; ++k) {
                    if (c0 + k < g.coils) {
                        const float2 v0 = __ldg(row + k * coil_stride + r0), v1 = __ldg(row + k * coil_stride + r1);
                        const float vr = w0 * v0.x + w1 * v1.x, vi = w0 * v0.y + w1 * v1.y;
                        if (phased) {
                            acc[k].x += vr * cs - vi * sn;
                            acc[k].y += vr * sn + vi * cs;
                        } else {
                            acc[k].x += vr;
                            acc[k].y += vi;
                        }
                    }
                }
            }
        }
        if (!inside) continue;
        const long long pixel = n1 * g.n0 + n0, plane = g.n0 * g.n1;
#pragma unroll
        for (int k = 0; k < kCoils; ++k) {
            if (c0 + k >= g.coils) break;
            if (rss)
                ss += acc[k].x * acc[k].x + acc[k].y * acc[k].y;
            else
                out[(c0 + k) * plane + pixel] = acc[k];
        }
    }
    if (rss && inside) out[n1 * g.n0 + n0] = make_float2(sqrtf(ss), 0.f);
}

template <int kCoils>
void launch(cudaStream_t stream, const CArray& proj, const RArray& steps, const FbpGeometry& g, bool rss, CArray& out) {
    const dim3 block(kTileX, kTileY);
    const dim3 grid(static_cast<unsigned>((g.n0 + kTileX - 1) / kTileX), static_cast<unsigned>((g.n1 + kTileY - 1) / kTileY));
    const auto* p = reinterpret_cast<const float2*>(proj.data());
    const auto* st = reinterpret_cast<const float4*>(steps.data());
    auto* o = reinterpret_cast<float2*>(out.data());
    if (g.phased)
        backproject_kernel<kCoils, true><<<grid, block, 0, stream>>>(p, st, g, rss, o);
    else
        backproject_kernel<kCoils, false><<<grid, block, 0, stream>>>(p, st, g, rss, o);
}

}  // namespace

void radial_backproject(Backend& be, const CArray& proj, const RArray& steps, const FbpGeometry& g, FbpOutput mode,
                        CArray& out) {
    const bool rss = mode == FbpOutput::Rss;
    const long long need_out = g.n0 * g.n1 * (rss ? 1 : g.coils);
    if (static_cast<long long>(proj.size()) != g.samples * g.spokes * g.coils ||
        static_cast<long long>(steps.size()) != 4 * g.spokes || static_cast<long long>(out.size()) != need_out)
        throw std::invalid_argument("cuda::radial_backproject: sizes of proj " + proj.shape().str() + ", steps " +
                                    steps.shape().str() + ", out " + out.shape().str() + " do not fit the geometry");
    if (reinterpret_cast<uintptr_t>(steps.data()) % alignof(float4) != 0)
        throw std::invalid_argument("cuda::radial_backproject: steps are not 16-byte aligned (read as float4)");
    if (g.samples > (1LL << 30))
        throw std::invalid_argument("cuda::radial_backproject: " + std::to_string(g.samples) + " samples per spoke");
    if ((g.n1 + kTileY - 1) / kTileY > 65535)
        throw std::invalid_argument("cuda::radial_backproject: image axis 1 of " + std::to_string(g.n1) + " is too long");
    if (need_out == 0) return;
    DeviceGuard guard(backend_device(be));
    const cudaStream_t stream = backend_stream(be);
    // Chunks of coils kept in registers per thread: as many as there are, up to 8 (32 coils: 4 passes,
    // each recomputing only the spoke geometry).
    if (g.coils == 1)
        launch<1>(stream, proj, steps, g, rss, out);
    else if (g.coils == 2)
        launch<2>(stream, proj, steps, g, rss, out);
    else if (g.coils <= 4)
        launch<4>(stream, proj, steps, g, rss, out);
    else
        launch<8>(stream, proj, steps, g, rss, out);
    LARMOR_CUDA_LAUNCH_CHECK("radial backproject_kernel", "image [" + std::to_string(g.n0) + "x" + std::to_string(g.n1) +
                                                              "], " + std::to_string(g.spokes) + " spokes x " +
                                                              std::to_string(g.samples) + " samples x " +
                                                              std::to_string(g.coils) + " coils");
}

}  // namespace larmor::cuda
