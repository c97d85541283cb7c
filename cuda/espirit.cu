// ESPIRiT's per-pixel step on a GPU (core/coils/espirit_kernels.h). Two kernels on the backend's
// stream:
//  1. h_kernel: H[x, dy] = sum_dx K[dx, dy] ex[x, dx], one thread per element (N1 D C^2 of them);
//  2. eigen_kernel: one warp per pixel. The warp evaluates G = sum_dy H[x, dy] ey[y, dy] into its
//     slice of shared memory (C^2 complex), then runs the power iteration with lane r holding rows
//     r, r + 32, ... of w = G v; sums over the coils are warp shuffles. Pixels are numbered with y
//     fastest, so the warps of a block read the same column H[x] (L2 and L1 hits). A second set of maps
//     deflates G in shared memory by the first eigenpair and iterates again.
// Per pixel the arithmetic is 8 D C^2 flops for G and 8 C^2 per iteration; with C = 32, D = 11 and 30
// iterations that is 0.33 MFLOP, reading 2 D C^2 floats of H from cache.
#include <cfloat>
#include <stdexcept>
#include <string>

#include "core/coils/espirit_kernels.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/device_context.h"
#include "cuda/launch_size.h"

namespace larmor::coils::cuda {
namespace {

using larmor::cuda::backend_device;
using larmor::cuda::backend_stream;
using larmor::cuda::DeviceGuard;
using larmor::cuda::grid_stride_blocks;

constexpr int kMaxRowsPerLane = 4;  // so at most 128 coils
constexpr int kMaxCoils = 32 * kMaxRowsPerLane;

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float2 cmul(float2 a, float2 b) { return {a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x}; }

__global__ void h_kernel(const float2* __restrict__ k, const float2* __restrict__ ex, float2* __restrict__ h, int cc,
                         int d, long long n) {
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        const int e = static_cast<int>(i % cc);
        const long long rest = i / cc;
        const int dy = static_cast<int>(rest % d);
        const long long x = rest / d;
        float2 acc = {0.f, 0.f};
        for (int dx = 0; dx < d; ++dx) {
            const float2 t = cmul(k[e + static_cast<long long>(cc) * (dx + d * dy)], ex[dx + d * x]);
            acc.x += t.x;
            acc.y += t.y;
        }
        h[i] = acc;  // i = e + cc (dy + d x)
    }
}

__global__ void eigen_kernel(const float2* __restrict__ h, const float2* __restrict__ ey, const float2* __restrict__ u,
                             float2* __restrict__ maps, float* __restrict__ lam, int n1, int n2, int c, int d,
                             int iterations, float crop, int sets) {
    extern __shared__ float2 smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int cc = c * c;
    float2* g = smem + static_cast<size_t>(warp) * (cc + c);
    float2* v = g + cc;
    const long long pixels = static_cast<long long>(n1) * n2;
    for (long long pix = static_cast<long long>(blockIdx.x) * warps + warp; pix < pixels;
         pix += static_cast<long long>(gridDim.x) * warps) {
        const int y = static_cast<int>(pix % n2), x = static_cast<int>(pix / n2);
        const float2* hx = h + static_cast<size_t>(cc) * d * x;
        for (int i = lane; i < cc; i += 32) {
            float2 acc = {0.f, 0.f};
            for (int dy = 0; dy < d; ++dy) {
                const float2 t = cmul(hx[i + static_cast<size_t>(cc) * dy], ey[dy + d * y]);
                acc.x += t.x;
                acc.y += t.y;
            }
            g[i] = acc;
        }
        __syncwarp();
        bool alive = true;
        for (int set = 0; set < sets; ++set) {
            // Start from the column with the largest diagonal entry (ties: the lowest index, as on the CPU).
            float best = -FLT_MAX;
            int bj = 0;
            for (int r = lane; r < c; r += 32)
                if (g[r + c * r].x > best) best = g[r + c * r].x, bj = r;
            for (int o = 16; o > 0; o >>= 1) {
                const float ob = __shfl_xor_sync(0xffffffffu, best, o);
                const int oj = __shfl_xor_sync(0xffffffffu, bj, o);
                if (ob > best || (ob == best && oj < bj)) best = ob, bj = oj;
            }
            float2 w[kMaxRowsPerLane];
            for (int m = 0; m < kMaxRowsPerLane; ++m) {
                const int r = lane + 32 * m;
                w[m] = r < c ? g[r + c * bj] : float2{0.f, 0.f};
            }
            float lambda = 0.f;
            for (int it = 0; it <= iterations + 1 && alive; ++it) {
                // w holds G^it v0: normalise it into v (the last pass only measures the Rayleigh quotient).
                if (it == iterations + 1) {
                    float acc = 0.f;
                    for (int m = 0; m < kMaxRowsPerLane; ++m) {
                        const int r = lane + 32 * m;
                        if (r < c) acc += v[r].x * w[m].x + v[r].y * w[m].y;
                    }
                    lambda = warp_sum(acc);
                    break;
                }
                float s = 0.f;
                for (int m = 0; m < kMaxRowsPerLane; ++m) s += w[m].x * w[m].x + w[m].y * w[m].y;
                s = warp_sum(s);
                if (!(s > 0.f)) {
                    alive = false;
                    break;
                }
                const float scale = rsqrtf(s);
                __syncwarp();
                for (int m = 0; m < kMaxRowsPerLane; ++m) {
                    const int r = lane + 32 * m;
                    if (r < c) v[r] = {w[m].x * scale, w[m].y * scale};
                }
                __syncwarp();
                for (int m = 0; m < kMaxRowsPerLane; ++m) w[m] = {0.f, 0.f};
                for (int q = 0; q < c; ++q) {
                    const float2 vq = v[q];
                    for (int m = 0; m < kMaxRowsPerLane; ++m) {
                        const int r = lane + 32 * m;
                        if (r < c) {
                            const float2 t = cmul(g[r + c * q], vq);
                            w[m].x += t.x;
                            w[m].y += t.y;
                        }
                    }
                }
            }
            // Phase: z = u^H v made real and positive (v orthogonal to u: left as it is).
            float zr = 0.f, zi = 0.f;
            for (int m = 0; m < kMaxRowsPerLane; ++m) {
                const int r = lane + 32 * m;
                if (r < c && alive) {
                    const float2 ur = u[r], vr = v[r];
                    zr += ur.x * vr.x + ur.y * vr.y;
                    zi += ur.x * vr.y - ur.y * vr.x;
                }
            }
            zr = warp_sum(zr);
            zi = warp_sum(zi);
            const float zn = hypotf(zr, zi);
            if (!alive) lambda = 0.f;
            const bool keep = alive && lambda >= crop;
            const float2 phase = !keep ? float2{0.f, 0.f} : zn > 0.f ? float2{zr / zn, -zi / zn} : float2{1.f, 0.f};
            const long long out = x + static_cast<long long>(n1) * y;
            for (int m = 0; m < kMaxRowsPerLane; ++m) {
                const int r = lane + 32 * m;
                if (r < c) maps[out + pixels * (r + static_cast<long long>(c) * set)] = keep ? cmul(v[r], phase) : float2{0.f, 0.f};
            }
            if (lane == 0) lam[out + pixels * set] = lambda;
            if (set + 1 < sets && alive) {
                // Deflation: G - lambda v v^H, whose dominant eigenvector is G's second.
                __syncwarp();
                for (int i = lane; i < cc; i += 32) {
                    const int r = i % c, q = i / c;
                    const float2 vr = v[r], vq = v[q];
                    const float2 t = {vr.x * vq.x + vr.y * vq.y, vr.y * vq.x - vr.x * vq.y};  // v_r conj(v_q)
                    g[i].x -= lambda * t.x;
                    g[i].y -= lambda * t.y;
                }
                __syncwarp();
            }
        }
        __syncwarp();  // g and v are rewritten for the next pixel
    }
}

void check_device(Backend& be, const CArray& a, size_t n, const char* name) {
    if (a.size() != n)
        throw std::invalid_argument(std::string("espirit_eigenvectors: ") + name + " " + a.shape().str() + " should be " +
                                    std::to_string(n) + " elements");
    larmor::cuda::check_on_backend(be, a, "espirit_eigenvectors", name);
}

}  // namespace

void espirit_eigenvectors(Backend& be, const CArray& k, const CArray& ex, const CArray& ey, const CArray& principal,
                          CArray& maps, RArray& eigenvalues, const EspiritPixelProblem& p) {
    const size_t c = p.coils, cc = c * c, d = p.offsets, n1 = p.n1, n2 = p.n2;
    if (c == 0 || c > size_t(kMaxCoils))
        throw std::invalid_argument("ESPIRiT on CUDA: " + std::to_string(c) + " coils; 1 to " +
                                    std::to_string(kMaxCoils) + " are supported (compress the coils first)");
    check_device(be, k, cc * d * d, "k");
    check_device(be, ex, d * n1, "ex");
    check_device(be, ey, d * n2, "ey");
    check_device(be, principal, c, "principal");
    const size_t sets = size_t(p.sets);
    if (sets < 1 || sets > 2) throw std::invalid_argument("espirit_eigenvectors: " + std::to_string(p.sets) + " sets");
    check_device(be, maps, n1 * n2 * c * sets, "maps");
    if (eigenvalues.size() != n1 * n2 * sets || eigenvalues.device() != Device::Cuda)
        throw std::invalid_argument("espirit_eigenvectors: eigenvalues " + eigenvalues.shape().str() + " should be " +
                                    std::to_string(n1 * n2 * sets) + " elements on the CUDA device");
    const std::string what = std::to_string(n1) + " x " + std::to_string(n2) + " pixels, " + std::to_string(c) + " coils";
    DeviceGuard guard(backend_device(be));
    cudaStream_t stream = backend_stream(be);

    CArray h = be.empty({cc, d, n1});
    const long long nh = static_cast<long long>(cc * d * n1);
    h_kernel<<<grid_stride_blocks(nh, 256), 256, 0, stream>>>(reinterpret_cast<const float2*>(k.data()),
                                                            reinterpret_cast<const float2*>(ex.data()),
                                                            reinterpret_cast<float2*>(h.data()), int(cc), int(d), nh);
    LARMOR_CUDA_LAUNCH_CHECK("espirit h_kernel", what);

    // As many warps per block as fit in 48 KiB of shared memory (at most 8); beyond that one warp with
    // the larger opt-in limit.
    const size_t per_warp = (cc + c) * sizeof(float2);
    const int warps = int(std::max<size_t>(1, std::min<size_t>(8, (48 * 1024) / per_warp)));
    const size_t smem = per_warp * size_t(warps);
    if (smem > 48 * 1024)
        LARMOR_CUDA_CHECK(cudaFuncSetAttribute(eigen_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
                          what + ", " + std::to_string(smem) + " bytes of shared memory");
    const long long pixels = static_cast<long long>(n1 * n2);
    const unsigned blocks = grid_stride_blocks(pixels, warps, 1 << 16);
    eigen_kernel<<<blocks, 32 * warps, smem, stream>>>(
        reinterpret_cast<const float2*>(h.data()), reinterpret_cast<const float2*>(ey.data()),
        reinterpret_cast<const float2*>(principal.data()), reinterpret_cast<float2*>(maps.data()),
        eigenvalues.data(), int(n1), int(n2), int(c), int(d), p.iterations, p.crop, int(sets));
    LARMOR_CUDA_LAUNCH_CHECK("espirit eigen_kernel", what);
}

}  // namespace larmor::coils::cuda
