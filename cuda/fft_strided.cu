#include "cuda/fft_strided.h"

#include <atomic>
#include <cmath>
#include <mutex>
#include <stdexcept>
#include <set>
#include <string>
#include <vector>

#include "cuda/cuda_check.h"

namespace larmor::cuda {
namespace {

constexpr int kTable = static_cast<int>(kStridedMaxN);
// exp(-2 pi i t / kTable), from double on the host. In global memory read through the L1 (__ldg),
// not __constant__: the lanes of a warp read different twiddles, which the constant cache serialises.
__device__ float2 g_twiddle[kTable];

// Tile width (columns per block): 16 columns (128 B per row) from N = 64 up, 8 for N = 1024 (keeps
// the tile at 64 KB of shared memory), wider for short axes so that a block holds 1024 elements.
__host__ __device__ constexpr int tile_of(int n) { return n >= 1024 ? 8 : n >= 64 ? 16 : 1024 / n; }
// The narrow tile: 8 columns (64 B per row, still whole DRAM bursts) for N >= 64, so that a batch
// too small to fill the GPU with wide tiles (256^2 x 8 coils: 128 blocks for 132 SMs) gets 2x the
// blocks, each with more threads per column.
__host__ __device__ constexpr int narrow_tile_of(int n) { return n >= 64 ? 8 : tile_of(n); }
// Threads per column: at most 256 threads a block (512 for N = 2), at least 4 elements a thread.
__host__ __device__ constexpr int threads_per_column(int n, int tx) {
    const int want = n / 4 < 1 ? 1 : n / 4;
    const int cap = 256 / tx < 1 ? 1 : 256 / tx;
    return want < cap ? want : cap;
}
__host__ __device__ constexpr int log2i(int n) { return n <= 1 ? 0 : 1 + log2i(n / 2); }
__host__ __device__ constexpr int stages_of(int n) { return log2i(n) % 2 ? 1 + log2i(n) / 2 : log2i(n) / 2; }

__device__ __forceinline__ float2 cmul(float2 a, float2 b) {
    return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
__device__ __forceinline__ float2 cadd(float2 a, float2 b) { return make_float2(a.x + b.x, a.y + b.y); }
__device__ __forceinline__ float2 csub(float2 a, float2 b) { return make_float2(a.x - b.x, a.y - b.y); }

// exp(sign * 2 pi i t / kTable)
__device__ __forceinline__ float2 twiddle(int t, float sign) {
    const float2 w = __ldg(&g_twiddle[t]);
    return make_float2(w.x, -sign * w.y);
}

// One Stockham stage of radix R at span p on this thread's E/R butterflies (i = j + b * J), in place
// in v: inputs v[b*R + r] = x[i + r N/R], outputs v[b*R + r] = y[(i - k) R + k + r p], k = i mod p.
template <int N, int TX, int R>
__device__ __forceinline__ void stage(float2 (&v)[N / threads_per_column(N, TX)], int j, int p, float sign) {
    constexpr int J = threads_per_column(N, TX), E = N / J;
#pragma unroll
    for (int b = 0; b < E / R; ++b) {
        const int i = j + b * J;
        const int k = i & (p - 1);
        float2* u = v + b * R;
        if (p > 1) {
            const int step = kTable / (R * p);
#pragma unroll
            for (int r = 1; r < R; ++r) u[r] = cmul(u[r], twiddle(r * k * step, sign));
        }
        if (R == 2) {
            const float2 a0 = u[0], a1 = u[1];
            u[0] = cadd(a0, a1);
            u[1] = csub(a0, a1);
        } else {
            const float2 t0 = cadd(u[0], u[2]), t1 = csub(u[0], u[2]);
            const float2 t2 = cadd(u[1], u[3]), t3 = csub(u[1], u[3]);
            const float2 wt3 = make_float2(-sign * t3.y, sign * t3.x);  // (sign i) t3
            u[0] = cadd(t0, t2);
            u[1] = cadd(t1, wt3);
            u[2] = csub(t0, t2);
            u[3] = csub(t1, wt3);
        }
    }
}

template <int N, int TX>
__global__ void __launch_bounds__(TX * threads_per_column(N, TX))
    strided_fft_kernel(const float2* in, float2* out, const StridedFftArgs a) {
    constexpr int J = threads_per_column(N, TX), E = N / J;
    constexpr bool kRadix2First = log2i(N) % 2 == 1;
    constexpr int S = stages_of(N);
    extern __shared__ float2 sm[];  // [N][TX], used when S > 1

    const int c = static_cast<int>(threadIdx.x) % TX, j = static_cast<int>(threadIdx.x) / TX;
    const long long tiles = (a.inner + TX - 1) / TX;
    const long long tile = static_cast<long long>(blockIdx.x) % tiles;
    const long long o = static_cast<long long>(blockIdx.x) / tiles;
    const long long col = tile * TX + c;
    const bool active = col < a.inner;
    const long long dst = o * a.inner * N + col;
    long long src = dst;
    float f = a.scale;
    if (a.shift && active) {  // centring of the other transformed axes: shifted source, sign
        long long rem = col, off = 0, mul = 1;
        int par = 0;
        for (int k = 0; k < a.below_rank; ++k) {
            const long long nk = a.below_n[k];
            long long ck = rem % nk;
            rem /= nk;
            if ((a.below_live >> k) & 1u) {
                par ^= static_cast<int>(ck & 1);
                ck += nk / 2;
                if (ck >= nk) ck -= nk;
            }
            off += ck * mul;
            mul *= nk;
        }
        rem = o;
        mul = a.inner * N;
        for (int k = 0; k < a.above_rank; ++k) {
            const long long nk = a.above_n[k];
            long long ck = rem % nk;
            rem /= nk;
            if ((a.above_live >> k) & 1u) {
                par ^= static_cast<int>(ck & 1);
                ck += nk / 2;
                if (ck >= nk) ck -= nk;
            }
            off += ck * mul;
            mul *= nk;
        }
        src = off;
        if (par) f = -f;
    }
    const float sign = static_cast<float>(a.sign);

    // First stage's inputs straight from global memory (coalesced: lanes run along the columns).
    float2 v[E];
    constexpr int R0 = kRadix2First ? 2 : 4;
#pragma unroll
    for (int b = 0; b < E / R0; ++b) {
        const int i = j + b * J;
#pragma unroll
        for (int r = 0; r < R0; ++r) {
            const int n = i + r * (N / R0);
            float2 val = make_float2(0.f, 0.f);
            if (active) {
                const int sn = a.shift ? ((n + N / 2) & (N - 1)) : n;
                val = in[src + static_cast<long long>(sn) * a.inner];
                const float g = (a.shift && (n & 1)) ? -f : f;
                val.x *= g;
                val.y *= g;
            }
            v[b * R0 + r] = val;
        }
    }

    int p = 1;
#pragma unroll
    for (int s = 0; s < S; ++s) {
        const bool radix2 = kRadix2First && s == 0;
        const int R = radix2 ? 2 : 4;
        if (radix2)
            stage<N, TX, 2>(v, j, p, sign);
        else
            stage<N, TX, 4>(v, j, p, sign);
        if (s == S - 1) {  // last stage: to global memory
#pragma unroll
            for (int b = 0; b < E / R; ++b) {
                const int i = j + b * J;
                const int k = i & (p - 1);
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const int d = (i - k) * R + k + r * p;
                    if (active) out[dst + static_cast<long long>(d) * a.inner] = v[b * R + r];
                }
            }
        } else {  // through shared memory to the next (radix-4) stage
#pragma unroll
            for (int b = 0; b < E / R; ++b) {
                const int i = j + b * J;
                const int k = i & (p - 1);
#pragma unroll
                for (int r = 0; r < R; ++r) sm[((i - k) * R + k + r * p) * TX + c] = v[b * R + r];
            }
            __syncthreads();
#pragma unroll
            for (int b = 0; b < E / 4; ++b) {
                const int i = j + b * J;
#pragma unroll
                for (int r = 0; r < 4; ++r) v[b * 4 + r] = sm[(i + r * (N / 4)) * TX + c];
            }
            __syncthreads();
        }
        p *= R;
    }
}

template <int N, int TX>
constexpr size_t smem_bytes() {
    return stages_of(N) > 1 ? static_cast<size_t>(N) * TX * sizeof(float2) : 0;
}

template <int N>
void set_smem_limit() {
    LARMOR_CUDA_CHECK(cudaFuncSetAttribute(strided_fft_kernel<N, tile_of(N)>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem_bytes<N, tile_of(N)>())),
                      "strided FFT kernel, N = " + std::to_string(N));
    LARMOR_CUDA_CHECK(cudaFuncSetAttribute(strided_fft_kernel<N, narrow_tile_of(N)>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem_bytes<N, narrow_tile_of(N)>())),
                      "strided FFT kernel (narrow tile), N = " + std::to_string(N));
}

template <int N, int TX>
void launch_tile(const float2* in, float2* out, const StridedFftArgs& a, cudaStream_t stream) {
    const long long blocks = (a.inner + TX - 1) / TX * a.outer;
    strided_fft_kernel<N, TX><<<static_cast<unsigned>(blocks), TX * threads_per_column(N, TX), smem_bytes<N, TX>(),
                                stream>>>(in, out, a);
}

// Multiprocessors of the device last prepared (read off the device, not assumed).
std::atomic<int> g_multiprocessors{132};

// Wide tiles while they give at least 4 blocks per multiprocessor, narrow below.
template <int N>
void launch(const float2* in, float2* out, const StridedFftArgs& a, cudaStream_t stream) {
    constexpr int kWide = tile_of(N), kNarrow = narrow_tile_of(N);
    const long long wide_blocks = (a.inner + kWide - 1) / kWide * a.outer;
    if (kNarrow != kWide && wide_blocks < 4LL * g_multiprocessors.load())
        launch_tile<N, kNarrow>(in, out, a, stream);
    else
        launch_tile<N, kWide>(in, out, a, stream);
    LARMOR_CUDA_LAUNCH_CHECK("strided_fft_kernel",
                             "n " + std::to_string(N) + " inner " + std::to_string(a.inner) + " outer " +
                                 std::to_string(a.outer));
}

std::mutex g_prepared_mutex;
std::set<int> g_prepared;

}  // namespace

bool strided_fft_supports(long long n) { return n >= 2 && n <= kStridedMaxN && (n & (n - 1)) == 0; }

void strided_fft_prepare(int device) {
    std::lock_guard<std::mutex> lock(g_prepared_mutex);
    if (g_prepared.count(device)) return;
    std::vector<float2> table(kTable);
    const double pi = 3.14159265358979323846;
    for (int t = 0; t < kTable; ++t) {
        const double ang = -2.0 * pi * t / kTable;
        table[t] = make_float2(static_cast<float>(std::cos(ang)), static_cast<float>(std::sin(ang)));
    }
    LARMOR_CUDA_CHECK(cudaMemcpyToSymbol(g_twiddle, table.data(), sizeof(float2) * kTable),
                      "strided FFT twiddle table, device " + std::to_string(device));
    // From pageable memory the copy may return before its DMA has landed, and it runs on the legacy
    // stream, which the sessions' non-blocking streams do not wait for: the first transform could read
    // a partly written table. Once per device, so a device-wide wait costs nothing.
    LARMOR_CUDA_CHECK(cudaDeviceSynchronize(), "strided FFT twiddle table, device " + std::to_string(device));
    set_smem_limit<2>();
    set_smem_limit<4>();
    set_smem_limit<8>();
    set_smem_limit<16>();
    set_smem_limit<32>();
    set_smem_limit<64>();
    set_smem_limit<128>();
    set_smem_limit<256>();
    set_smem_limit<512>();
    set_smem_limit<1024>();
    int sms = 0;
    LARMOR_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
                      "multiprocessor count of device " + std::to_string(device));
    if (sms > 0) g_multiprocessors = sms;
    g_prepared.insert(device);
}

void launch_strided_fft(const float2* in, float2* out, const StridedFftArgs& a, cudaStream_t stream) {
    switch (a.n) {
        case 2: return launch<2>(in, out, a, stream);
        case 4: return launch<4>(in, out, a, stream);
        case 8: return launch<8>(in, out, a, stream);
        case 16: return launch<16>(in, out, a, stream);
        case 32: return launch<32>(in, out, a, stream);
        case 64: return launch<64>(in, out, a, stream);
        case 128: return launch<128>(in, out, a, stream);
        case 256: return launch<256>(in, out, a, stream);
        case 512: return launch<512>(in, out, a, stream);
        case 1024: return launch<1024>(in, out, a, stream);
        default: throw std::invalid_argument("strided FFT: unsupported length " + std::to_string(a.n));
    }
}

}  // namespace larmor::cuda
