// Spreading in 3D from a shared-memory tile without shared atomics ("owned planes"). The tile and the
// sub-problems are those of the shared-tiles method (nufft_spread.cu), but each of the block's 8 warps
// owns the tile's z-planes q with q mod 8 == warp, and only it writes them. A point of width W <= 8
// covers W consecutive planes, so each of W warps finds exactly one of its planes under the point and
// adds the W x W taps of that plane, one tap per lane, with plain shared loads and stores.
// Why: float atomicAdd on shared memory is a compare-and-swap loop (LDS, FADD, ATOMS.CAST.SPIN), and
// the shared-tiles kernel runs at 7-8 ps per tap and transform in 2D and 3D alike (bench/RESULTS.md,
// session 8), about one atomic element per SM clock: the atomics, not the arithmetic or the memory,
// set its pace. Here a warp's 32 lanes write 32 different cells of one plane (no two lanes of an
// instruction share an address) and no other warp touches the plane, so no atomic is needed; a
// __syncwarp between points orders one point's stores before the next point's loads.
// Bank conflicts: rows of the tile are bin + W = 16 + W cells long, so tap (dy, dx) of a plane sits
// at offset dy (16 + W) + dx, congruent to its tap index dy W + dx modulo 16; 16 consecutive taps
// (one half-warp's 8-byte accesses) fall on 16 different bank pairs.
// Per point the kernel values (with the W x W in-plane products), the tile-local start and the sample
// are computed once by one thread and kept in a shared record that the W warps read (cuFINUFFT's method 2 computes them per thread too,
// Shih et al., IPDPSW 2021, sec. III-B). The next batch's coordinates and samples are loaded into
// registers while the current batch is spread, so the gather latency is hidden behind the taps.
#include <algorithm>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/nufft_device.cuh"
#include "cuda/nufft_spread.cuh"
#include "cuda/nufft_tile.cuh"

namespace larmor::cuda {
namespace {

constexpr int kWarps = 8;  // owners of the planes: W <= kWarps puts one owned plane under each point per warp
constexpr int kThreads = 32 * kWarps;
constexpr int kRecordPoints = 32;  // points per batch of records, one warp's worth: four 3D w5 blocks fit an SM

// Record of one point: the tile-local start per axis (3 ints), the sample (2 floats), the W x W
// in-plane weights kx[dx] ky[dy] (dy major) and the W kernel values of z. Its length 5 + W (W + 1)
// is odd, so the 32 writers of a batch fall on different banks.
__host__ __device__ constexpr int record_stride(int width) { return 5 + width * (width + 1); }

template <int W>
__global__ void __launch_bounds__(kThreads) spread_planes_kernel(SpreadArgs a) {
    static_assert(W >= 2 && W <= kWarps, "one owned plane per warp under each point needs W <= 8");
    constexpr int R = record_stride(W);
    constexpr int kTaps = W * W;
    constexpr int kSlots = (kTaps + 31) / 32;
    extern __shared__ float2 tile[];
    const NufftTiling& t = a.t;
    const SubProblem sp = sub_problem<3, W>(t, a.sub_total, a.sub_bin, a.sub_first, a.bin_start);
    if (!sp.valid) return;
    const int first = sp.first, end = sp.end, ox = sp.o[0], oy = sp.o[1], oz = sp.o[2];
    const int b = blockIdx.y;
    const int tx = t.tile[0], ty = t.tile[1], size = t.tile[0] * t.tile[1] * t.tile[2];
    float* records = reinterpret_cast<float*>(tile + size);
    for (int i = threadIdx.x; i < size; i += blockDim.x) tile[i] = make_float2(0.f, 0.f);
    fill_tile_index(reinterpret_cast<int*>(records + kRecordPoints * R), t, ox, oy, oz);

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int offset[kSlots];  // this lane's taps (dy, dx) = divmod(lane + 32 k, W) of a plane, as tile offsets
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
        const int tap = min(lane + 32 * k, kTaps - 1);  // lanes past the last tap repeat it, unused
        offset[k] = (tap / W) * tx + tap % W;
    }

    const float2* in = a.samples + static_cast<long long>(b) * a.points;
    // The coordinates and sample of this thread's point of the next batch, loaded ahead.
    float ux = 0.f, uy = 0.f, uz = 0.f;
    float2 v = make_float2(0.f, 0.f);
    auto load = [&](int p) {
        if (threadIdx.x < kRecordPoints && p + static_cast<int>(threadIdx.x) < end) {
            const int q = p + static_cast<int>(threadIdx.x);
            ux = a.x[q];
            uy = a.y[q];
            uz = a.z[q];
            v = in[a.perm[q]];
        }
    };
    load(first);
    for (int base = first; base < end; base += kRecordPoints) {
        const int n = min(kRecordPoints, end - base);
        __syncthreads();  // the previous batch's records are spent (and, the first time, the tile is clear)
        if (static_cast<int>(threadIdx.x) < n) {
            float* r = records + threadIdx.x * R;
            float kx[W], ky[W], kz[W];
            r[0] = __int_as_float(es_kernel_values<W>(ux, a.beta, kx) - ox);
            r[1] = __int_as_float(es_kernel_values<W>(uy, a.beta, ky) - oy);
            r[2] = __int_as_float(es_kernel_values<W>(uz, a.beta, kz) - oz);
            r[3] = v.x;
            r[4] = v.y;
#pragma unroll
            for (int jy = 0; jy < W; ++jy)
#pragma unroll
                for (int jx = 0; jx < W; ++jx) r[5 + jy * W + jx] = kx[jx] * ky[jy];
#pragma unroll
            for (int j = 0; j < W; ++j) r[5 + kTaps + j] = kz[j];
        }
        load(base + kRecordPoints);
        __syncthreads();
        for (int i = 0; i < n; ++i) {
            const float* r = records + i * R;
            const int lz = __float_as_int(r[2]);
            const int j = (warp - lz) & (kWarps - 1);  // this warp's plane under the point: lz + j
            if (j < W) {                               // warp-uniform
                const float kz = r[5 + kTaps + j];
                const float vx = r[3] * kz, vy = r[4] * kz;
                float2* plane = tile + ((lz + j) * ty + __float_as_int(r[1])) * tx + __float_as_int(r[0]);
#pragma unroll
                for (int k = 0; k < kSlots; ++k) {
                    if (lane + 32 * k < kTaps) {
                        const float w = r[5 + lane + 32 * k];
                        float2 c = plane[offset[k]];
                        c.x += vx * w;
                        c.y += vy * w;
                        plane[offset[k]] = c;
                    }
                }
            }
            __syncwarp();  // this point's stores before the next point's loads, across lanes
        }
    }
    __syncthreads();

    float2* out = a.grid + static_cast<long long>(b) * a.grid_size;
    const TileIndex index(reinterpret_cast<const int*>(records + kRecordPoints * R), tx);
    for (int i = threadIdx.x; i < size; i += blockDim.x) {
        const float2 c = tile[i];
        if (c.x == 0.f && c.y == 0.f) continue;
        global_add(out + index.grid_offset(i), c);
    }
}

long long planes_shared_bytes(const NufftTiling& t, int width) {
    return t.tile_size() * static_cast<long long>(sizeof(float2)) +
           kRecordPoints * record_stride(width) * static_cast<long long>(sizeof(float)) +
           tile_index_ints(t) * static_cast<long long>(sizeof(int));
}

}  // namespace

bool spread_planes_applies(int dims, int width) { return dims == 3 && width >= 2 && width <= kWarps; }

void launch_spread_planes(const SpreadArgs& a, int width, long long max_subproblems, cudaStream_t stream) {
    if (!spread_planes_applies(a.t.dims, width))
        throw std::invalid_argument("cuda::nufft_spread: owned planes need a 3D grid and a kernel width of at most " +
                                    std::to_string(kWarps) + " (dims " + std::to_string(a.t.dims) + ", width " +
                                    std::to_string(width) + ")");
    const long long bytes = planes_shared_bytes(a.t, width);
    // The tile (at most kMaxTileBytes) with the records and index tables: two blocks per SM at least.
    constexpr long long kMaxBytes = 96 * 1024;
    if (bytes > kMaxBytes)
        throw std::invalid_argument("cuda::nufft_spread: owned planes need " + std::to_string(bytes) +
                                    " bytes of shared memory per block, more than " + std::to_string(kMaxBytes));
    const dim3 blocks(static_cast<unsigned>(max_subproblems), static_cast<unsigned>(a.batch));
    const std::string context = "NUFFT spread (owned planes), width " + std::to_string(width);
    auto launch = [&](auto kernel) {
        if (bytes > 48 * 1024)
            LARMOR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
                              context);
        kernel<<<blocks, kThreads, static_cast<size_t>(bytes), stream>>>(a);
    };
    switch (width) {
        case 2: launch(spread_planes_kernel<2>); break;
        case 3: launch(spread_planes_kernel<3>); break;
        case 4: launch(spread_planes_kernel<4>); break;
        case 5: launch(spread_planes_kernel<5>); break;
        case 6: launch(spread_planes_kernel<6>); break;
        case 7: launch(spread_planes_kernel<7>); break;
        case 8: launch(spread_planes_kernel<8>); break;
        default: break;  // excluded above
    }
}

}  // namespace larmor::cuda
