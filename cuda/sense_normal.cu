// CUDA kernel of the fused CG-SENSE normal operator (core/linops/sense_normal.h).
//
// One column (fixed readout position x) of E1 = N1 * N2 samples is transformed by N2 threads, each
// holding N1 samples in registers, as a two-factor Cooley-Tukey DFT (n = N2 n1 + n2, k = k1 + N1 k2):
//   A: thread n2 transforms its samples v[N2 n1 + n2] over n1 (N1 points) and applies the twiddles
//      W_E1^(n2 k1); one exchange through shared memory;
//   B: for each k1 it owns, a thread transforms over n2 (N2 points), giving X[k1 + N1 k2]; applies the
//      mask; transforms back over k2 and applies the conjugate twiddles, all in its registers;
//   A': after the second exchange, thread n2 transforms back over k1 and holds v[n2 + N2 n1] again:
//      exactly the samples it started with, so it multiplies by the conjugate map it already holds and
//      accumulates over its coils without another exchange.
// Blocks of T columns x N2 threads; the coils are dealt to the G blocks (up to 16) of a thread-block
// cluster (Hopper, sm_90), which then sum their partial columns through distributed shared memory, rank by rank
// in a fixed order, add lambda x and write the result: one launch, no partial images in global memory,
// and the same bits on every run.
// In conjugate gradients (LinearOperator::forward_cg) x is the residual r and out is w = N r, and the
// epilogue that writes out also takes CG's two inner products <r, r> and Re <r, w> from the values it
// holds (Chronopoulos & Gear 1989; core/cg_step_sizes.h): each block sums its share, the cluster's
// ranks hand theirs to rank 0 in distributed shared memory, and the last cluster to arrive adds the
// clusters' sums in cluster order and computes the step sizes, as Backend::cg_coefficients would in
// a launch of its own that reads r and w again.
#include <cooperative_groups.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>

#include "core/cg_step_sizes.h"
#include "core/cpu/backend_checks.h"
#include "core/linops/sense_normal_kernels.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/device_context.h"
#include "cuda/reduction.cuh"

namespace cg = cooperative_groups;

namespace larmor::cuda {
namespace {

constexpr int kColumns = 8;          // T: 8 columns = 64-byte row segments per load
constexpr int kPortableCluster = 8;  // the cluster size every sm_90 device schedules
constexpr int kMaxCluster = 16;      // Hopper's non-portable limit, used where the device can place it
// Padding (in float2) after each k1 row of the exchange. Phase B's warps hold four k1 rows at one
// (n2, column); rows N2 * T = 64 or 128 float2 apart all start on the same bank, a 4-way conflict.
// Eight more float2 per row put rows k1 and k1 + 1 half a bank cycle apart: 2 wavefronts, the least
// a warp's 256 bytes need.
constexpr int kRowPad = 8;
// Resident blocks per SM the registers must allow. A 256-line column at 32 coils is 32 clusters of 16
// blocks of 128 threads for 256 columns: at 168 registers (x held in registers over the coil loop) an
// SM held 3 of them, and the launch ran in two waves; at 128, with x read again for each coil from
// L1, it holds 4 and the launch is one wave.
constexpr int kMinBlocks = 4;

// exp(-2 pi i j / 32), j < 16: every twiddle of a register DFT of up to 32 points.
__constant__ float2 c_w32[16] = {
    {1.000000000e+00f, 0.000000000e+00f},   {9.807852804e-01f, -1.950903220e-01f},
    {9.238795325e-01f, -3.826834324e-01f},  {8.314696123e-01f, -5.555702330e-01f},
    {7.071067812e-01f, -7.071067812e-01f},  {5.555702330e-01f, -8.314696123e-01f},
    {3.826834324e-01f, -9.238795325e-01f},  {1.950903220e-01f, -9.807852804e-01f},
    {0.000000000e+00f, -1.000000000e+00f},  {-1.950903220e-01f, -9.807852804e-01f},
    {-3.826834324e-01f, -9.238795325e-01f}, {-5.555702330e-01f, -8.314696123e-01f},
    {-7.071067812e-01f, -7.071067812e-01f}, {-8.314696123e-01f, -5.555702330e-01f},
    {-9.238795325e-01f, -3.826834324e-01f}, {-9.807852804e-01f, -1.950903220e-01f},
};

__device__ __forceinline__ float2 cmul(float2 a, float2 b) { return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }
// conj(a) b
__device__ __forceinline__ float2 cmulc(float2 a, float2 b) { return make_float2(a.x * b.x + a.y * b.y, a.x * b.y - a.y * b.x); }

constexpr __host__ __device__ int bit_reverse(int i, int bits) {
    int r = 0;
    for (int b = 0; b < bits; ++b) r |= ((i >> b) & 1) << (bits - 1 - b);
    return r;
}
constexpr __host__ __device__ int log2_of(int m) { return m <= 1 ? 0 : 1 + log2_of(m / 2); }

// In-register radix-2 DFTs of M <= 32 points (Inverse: exp(+...), unscaled) in the two forms that need
// no permutation: decimation in frequency takes natural order and leaves the result in bit-reversed
// order (v[i] = V[rev(i)]); decimation in time takes bit-reversed order and leaves natural order. The
// kernel pairs them and folds rev() into its shared-memory addresses and mask indices, so every
// register index is a compile-time constant after unrolling (a permutation of v by a computed index
// would put v in local memory).
// One radix-2 stage over butterflies LEN apart, as a template so that its loops have compile-time trip
// counts whatever the unroller does with the stage loop (a stage loop with runtime half left the inner
// loops rolled at M = 16, and v in local memory).
template <int M, int Len, bool Inverse, bool Dif>
__device__ __forceinline__ void butterflies(float2 (&v)[M]) {
    constexpr int half = Len / 2;
#pragma unroll
    for (int i = 0; i < M; i += Len) {
#pragma unroll
        for (int j = 0; j < half; ++j) {
            float2 w = c_w32[j * (32 / Len)];
            if (Inverse) w.y = -w.y;
            const float2 u = v[i + j];
            if (Dif) {
                const float2 t = v[i + j + half];
                v[i + j] = make_float2(u.x + t.x, u.y + t.y);
                v[i + j + half] = cmul(w, make_float2(u.x - t.x, u.y - t.y));
            } else {
                const float2 t = cmul(w, v[i + j + half]);
                v[i + j] = make_float2(u.x + t.x, u.y + t.y);
                v[i + j + half] = make_float2(u.x - t.x, u.y - t.y);
            }
        }
    }
}

template <int M, int Len, bool Inverse>
__device__ __forceinline__ void dif_stages(float2 (&v)[M]) {
    if constexpr (Len >= 2) {
        butterflies<M, Len, Inverse, true>(v);
        dif_stages<M, Len / 2, Inverse>(v);
    }
}

template <int M, int Len, bool Inverse>
__device__ __forceinline__ void dit_stages(float2 (&v)[M]) {
    if constexpr (Len <= M) {
        butterflies<M, Len, Inverse, false>(v);
        dit_stages<M, Len * 2, Inverse>(v);
    }
}

template <int M, bool Inverse>
__device__ __forceinline__ void dft_dif(float2 (&v)[M]) { dif_stages<M, M, Inverse>(v); }
template <int M, bool Inverse>
__device__ __forceinline__ void dft_dit(float2 (&v)[M]) { dit_stages<M, 2, Inverse>(v); }

template <int N1, int N2>
__global__ void __launch_bounds__(kColumns * N2, kMinBlocks)
    sense_normal_kernel(const float2* __restrict__ maps, const float* __restrict__ mask, const float2* __restrict__ x,
                        float2* __restrict__ out, int ro, int coils, float lambda, float2* cg_scalars,
                        ReductionScratch reduction) {
    constexpr int E1 = N1 * N2, T = kColumns, kJobs = N1 / N2, kBits1 = log2_of(N1), kBits2 = log2_of(N2);
    static_assert(N1 % N2 == 0 && N1 <= 32, "N1 a multiple of N2, at most 32 points in registers");
    __shared__ float2 twiddle[E1];     // W_E1^j
    constexpr int kRow = N2 * T + kRowPad;  // float2 per k1 row of the exchange
    __shared__ float2 exchange[N1 * kRow];  // [k1][n2][column] (padded rows), then the partial column sums [y][column]
    const cg::cluster_group cluster = cg::this_cluster();
    const int rank = int(cluster.block_rank()), ranks = int(cluster.num_blocks());
    const int col = threadIdx.x % T, q = threadIdx.x / T;
    const int xpos = blockIdx.x * T + col;
    const bool valid = xpos < ro;
    const long long slice = static_cast<long long>(ro) * E1;

    for (int j = threadIdx.x; j < E1; j += blockDim.x) {
        float s, c;
        sincospif(-2.f * float(j) / float(E1), &s, &c);
        twiddle[j] = make_float2(c, s);
    }
    float2 acc[N1];
#pragma unroll
    for (int n1 = 0; n1 < N1; ++n1) acc[n1] = make_float2(0.f, 0.f);
    __syncthreads();

    for (int c = rank; c < coils; c += ranks) {
        const float2* mc = maps + c * slice;
        float2 v[N1];
#pragma unroll
        for (int n1 = 0; n1 < N1; ++n1)
            v[n1] = valid ? cmul(mc[static_cast<long long>(N2 * n1 + q) * ro + xpos], x[static_cast<long long>(N2 * n1 + q) * ro + xpos])
                          : make_float2(0.f, 0.f);
        // A: over n1 (v[i] = A[rev(i)] after it), twiddles, exchange.
        dft_dif<N1, false>(v);
#pragma unroll
        for (int i = 0; i < N1; ++i) {
            const int k1 = bit_reverse(i, kBits1);
            exchange[k1 * kRow + q * T + col] = cmul(v[i], twiddle[q * k1]);
        }
        __syncthreads();
        // B: over n2 for each owned k1 (b[i] = X[k1 + N1 rev(i)]), mask, back over k2 (bit-reversed in,
        // natural out), conjugate twiddles.
#pragma unroll
        for (int j = 0; j < kJobs; ++j) {
            const int k1 = q + N2 * j;
            float2 b[N2];
#pragma unroll
            for (int n2 = 0; n2 < N2; ++n2) b[n2] = exchange[k1 * kRow + n2 * T + col];
            dft_dif<N2, false>(b);
#pragma unroll
            for (int i = 0; i < N2; ++i) {
                const float w = mask[k1 + N1 * bit_reverse(i, kBits2)];
                b[i] = make_float2(b[i].x * w, b[i].y * w);
            }
            dft_dit<N2, true>(b);
#pragma unroll
            for (int n2 = 0; n2 < N2; ++n2) exchange[k1 * kRow + n2 * T + col] = cmulc(twiddle[n2 * k1], b[n2]);
        }
        __syncthreads();
        // A': back over k1, read in bit-reversed order; the thread holds v[q + N2 n1] again.
#pragma unroll
        for (int i = 0; i < N1; ++i) v[i] = exchange[bit_reverse(i, kBits1) * kRow + q * T + col];
        __syncthreads();  // the next coil's exchange overwrites these
        dft_dit<N1, true>(v);
#pragma unroll
        for (int n1 = 0; n1 < N1; ++n1) {
            // The map again, from L1 or L2 (read a moment ago): held in registers through the
            // transforms it pushed the kernel's arrays out to local memory.
            const float2 t = valid ? cmulc(mc[static_cast<long long>(N2 * n1 + q) * ro + xpos], v[n1]) : make_float2(0.f, 0.f);
            acc[n1] = make_float2(acc[n1].x + t.x, acc[n1].y + t.y);
        }
    }

    // The cluster's partial columns, summed rank by rank in a fixed order.
#pragma unroll
    for (int n1 = 0; n1 < N1; ++n1) exchange[(N2 * n1 + q) * T + col] = acc[n1];
    cluster.sync();
    double2 inner = make_double2(0.0, 0.0);  // <x, x> and Re <x, out> of this block's share (CG only)
    for (int e = rank * blockDim.x + threadIdx.x; e < E1 * T; e += ranks * blockDim.x) {
        float2 sum = make_float2(0.f, 0.f);
        for (int r = 0; r < ranks; ++r) {
            const float2 p = cluster.map_shared_rank(exchange, r)[e];
            sum.x += p.x;
            sum.y += p.y;
        }
        const int y = e / T, xe = blockIdx.x * T + e % T;
        if (xe < ro) {
            const long long i = static_cast<long long>(y) * ro + xe;
            const float2 xi = x[i];
            const float2 o = make_float2(sum.x + lambda * xi.x, sum.y + lambda * xi.y);
            out[i] = o;
            inner.x += double(xi.x) * xi.x + double(xi.y) * xi.y;
            inner.y += double(xi.x) * o.x + double(xi.y) * o.y;
        }
    }
    __shared__ double2 rank_sums[kMaxCluster];  // rank 0's: every rank's share, by rank
    if (cg_scalars) {  // the same in every thread: block_sum's barriers are reached by all or none
        const double2 mine = block_sum(inner);
        if (threadIdx.x == 0) *cluster.map_shared_rank(&rank_sums[rank], 0) = mine;
    }
    cluster.sync();  // no block leaves while another still reads its shared memory; rank_sums complete
    if (!cg_scalars || rank != 0) return;
    double2 cluster_sum = make_double2(0.0, 0.0);
    if (threadIdx.x == 0)
        for (int r = 0; r < ranks; ++r) {
            cluster_sum.x += rank_sums[r].x;
            cluster_sum.y += rank_sums[r].y;
        }
    if (!arrive_last(cluster_sum, blockIdx.x, gridDim.x, reduction.partials, reduction.counter)) return;
    const double2 t = sum_of_partials(reduction.partials, gridDim.x);
    if (threadIdx.x == 0) {
        const CgCoefficients c = cg_step_sizes(t.x, t.y, __ldcg(&cg_scalars[0].x), __ldcg(&cg_scalars[1].x));
        cg_scalars[0] = make_float2(float(t.x), 0.f);
        cg_scalars[1] = make_float2(float(c.alpha), 0.f);
        cg_scalars[2] = make_float2(float(c.beta), 0.f);
        cg_scalars[3] = make_float2(float(t.y), 0.f);
    }
}

// The launch of `column_blocks` x `ranks` blocks in clusters of `ranks` along y; `attr` holds the
// cluster attribute cfg points at, so it must live as long as cfg.
cudaLaunchConfig_t cluster_config(int column_blocks, int ranks, int threads, cudaStream_t stream,
                                  cudaLaunchAttribute (&attr)[1]) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(unsigned(column_blocks), unsigned(ranks), 1);
    cfg.blockDim = dim3(unsigned(threads), 1, 1);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = stream;
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 1;
    attr[0].val.clusterDim.y = unsigned(ranks);
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cfg;
}

// Blocks per cluster for `coils`: one coil per block up to the portable 8; beyond it up to 16 (more
// coils in flight: the kernel is latency-bound, bench/FLOORS-cg-sense.md) where the device can
// co-schedule a cluster of 16 of these blocks, asked once per device.
template <int N1, int N2>
int cluster_ranks(int coils, int device) {
    if (coils <= kPortableCluster) return coils;
    static std::mutex m;
    static std::map<int, int> widest;  // device -> 16 or 8
    std::lock_guard<std::mutex> lock(m);
    auto it = widest.find(device);
    if (it == widest.end()) {
        int w = kPortableCluster;
        const auto kernel = sense_normal_kernel<N1, N2>;
        if (cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess) {
            cudaLaunchAttribute attr[1];
            const cudaLaunchConfig_t cfg = cluster_config(1, kMaxCluster, kColumns * N2, nullptr, attr);
            int clusters = 0;
            if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) == cudaSuccess && clusters > 0) w = kMaxCluster;
        }
        cudaGetLastError();  // a refusal above only means the portable size
        it = widest.emplace(device, w).first;
    }
    return std::min(coils, it->second);
}

int column_blocks(int ro) { return (ro + kColumns - 1) / kColumns; }

template <int N1, int N2>
void launch(Backend& be, const float2* maps, const float* mask, const float2* x, float2* out, int ro, int coils,
            float lambda, float2* cg_scalars) {
    const int ranks = cluster_ranks<N1, N2>(coils, backend_device(be));
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = cluster_config(column_blocks(ro), ranks, kColumns * N2, backend_stream(be), attr);
    const ReductionScratch reduction = cg_scalars ? backend_reduction_scratch(be) : ReductionScratch{};
    LARMOR_CUDA_CHECK(cudaLaunchKernelEx(&cfg, sense_normal_kernel<N1, N2>, maps, mask, x, out, ro, coils, lambda,
                                         cg_scalars, reduction),
                      "sense_normal_kernel<" + std::to_string(N1) + ", " + std::to_string(N2) + ">, " +
                          std::to_string(ro) + " columns x " + std::to_string(coils) + " coils in clusters of " +
                          std::to_string(ranks));
}

}  // namespace

bool sense_normal_supports(size_t e1) { return e1 == 64 || e1 == 128 || e1 == 256; }

namespace {
void apply(Backend& be, const CArray& maps, const RArray& mask, const CArray& x, CArray& out, size_t ro, size_t e1,
           size_t coils, float lambda, float2* cg_scalars) {
    check_on_backend(be, maps, "sense_normal", "maps");
    check_on_backend(be, mask, "sense_normal", "mask");
    check_on_backend(be, x, "sense_normal", "x");
    check_on_backend(be, out, "sense_normal", "out");
    DeviceGuard guard(backend_device(be));
    const auto* m = reinterpret_cast<const float2*>(maps.data());
    const auto* xi = reinterpret_cast<const float2*>(x.data());
    auto* o = reinterpret_cast<float2*>(out.data());
    const int r = static_cast<int>(ro), c = static_cast<int>(coils);
    switch (e1) {
        case 64: launch<8, 8>(be, m, mask.data(), xi, o, r, c, lambda, cg_scalars); break;
        case 128: launch<16, 8>(be, m, mask.data(), xi, o, r, c, lambda, cg_scalars); break;
        case 256: launch<16, 16>(be, m, mask.data(), xi, o, r, c, lambda, cg_scalars); break;
        default: throw std::invalid_argument("sense_normal: no CUDA kernel for " + std::to_string(e1) + " phase encodes");
    }
}
}  // namespace

void sense_normal_apply(Backend& be, const CArray& maps, const RArray& mask, const CArray& x, CArray& out, size_t ro,
                        size_t e1, size_t coils, float lambda) {
    if (ro == 0 || coils == 0) return;
    apply(be, maps, mask, x, out, ro, e1, coils, lambda, nullptr);
}

void sense_normal_apply_cg(Backend& be, const CArray& maps, const RArray& mask, const CArray& x, CArray& out,
                           CArray& coefficients, size_t ro, size_t e1, size_t coils, float lambda) {
    check_on_backend(be, coefficients, "sense_normal", "coefficients");
    detail::check_cg_coefficients(x, out, coefficients);
    // One partial per cluster in the reduction scratch; past that (more than 8192 columns) the
    // coefficients take their own pass.
    if (ro == 0 || coils == 0 || column_blocks(static_cast<int>(ro)) > kReductionBlocks) {
        sense_normal_apply(be, maps, mask, x, out, ro, e1, coils, lambda);
        be.cg_coefficients(x, out, coefficients);
        return;
    }
    apply(be, maps, mask, x, out, ro, e1, coils, lambda, reinterpret_cast<float2*>(coefficients.data()));
}

}  // namespace larmor::cuda
