// CUDA kernels of the Daubechies-4 wavelet (core/linops/wavelet.h). One pass (one level, one axis)
// is one launch: a thread block stages W whole lines in shared memory, so the pass may run in place
// and each element is read and written once. Along y, z, ... the W lines are neighbours along x, so
// consecutive threads load consecutive addresses (W = 32 lines: 256-byte rows); along x each line is
// itself contiguous. The staged lines are m + 1 elements apart: with a pitch of m (a power of two)
// the 32 lines a warp touches along y would all fall into one shared-memory bank.
#include <algorithm>
#include <string>

#include "core/linops/wavelet_kernels.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/device_context.h"
#include "cuda/launch_size.h"

namespace larmor::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kSharedBytes = 96 * 1024;  // opted in above the 48 KiB default (wavelet_pass)
constexpr int kMaxLines = 32;
constexpr int kOccupancyBytes = 36 * 1024;  // a block's staging above this cuts the blocks per SM

__constant__ float c_h[4] = {float(Daubechies4::h[0]), float(Daubechies4::h[1]), float(Daubechies4::h[2]),
                             float(Daubechies4::h[3])};
__constant__ float c_g[4] = {float(Daubechies4::g[0]), float(Daubechies4::g[1]), float(Daubechies4::g[2]),
                             float(Daubechies4::g[3])};

// The lines of a pass: every index of the block's axes other than `axis`, x fastest.
struct Lines {
    int count = 0;                            // axes enumerated
    long long extent[Shape::kMaxRank] = {};
    long long stride[Shape::kMaxRank] = {};
    long long total = 0;                      // lines
    int m = 0;                                // line length (<= WaveletGeometry's kMaxLength)
    long long s = 0;                          // element stride along the line
    int per_block = 1;                        // W, a power of two
    int per_block_log2 = 0;
    bool along_x = false;
};

// The low band of the threshold: index i is in it when its coordinate along each axis a (of the
// array's extent[a]) is below low[a].
struct LowBand {
    int count = 0;
    long long low[Shape::kMaxRank] = {};
    long long extent[Shape::kMaxRank] = {};
};

__device__ __forceinline__ long long line_base(const Lines& l, long long line) {
    long long base = 0;
    for (int k = 0; k < l.count; ++k) {
        base += (line % l.extent[k]) * l.stride[k];
        line /= l.extent[k];
    }
    return base;
}

// Maps a thread's linear index t over [W, m] to (line w, position i) so that neighbouring threads
// touch neighbouring addresses.
__device__ __forceinline__ void split(const Lines& l, int t, int& w, int& i) {
    if (l.along_x) {
        w = t / l.m;
        i = t - w * l.m;
    } else {  // shifts: an integer division per element cost as much as the memory traffic
        w = t & (l.per_block - 1);
        i = t >> l.per_block_log2;
    }
}

// i mod m for 0 <= i < 2m, without the division (the wavelet's passes are memory bound, and an
// integer modulo per element showed as 12 % of the 8-coil wavelet step).
__device__ __forceinline__ int turn(int i, int m) { return i < m ? i : i - m; }

__global__ void pass_kernel(const float2* src, float2* dst, Lines l, bool inverse, int shift) {
    extern __shared__ float2 tile[];  // [W][m + 1]
    __shared__ long long base[kMaxLines];
    const long long first = static_cast<long long>(blockIdx.x) * l.per_block;
    const int lines = static_cast<int>(min(static_cast<long long>(l.per_block), l.total - first));
    if (threadIdx.x < lines) base[threadIdx.x] = line_base(l, first + threadIdx.x);
    __syncthreads();
    const int work = l.m * l.per_block, half = l.m / 2, pitch = l.m + 1;
    for (int t = threadIdx.x; t < work; t += blockDim.x) {
        int w, i;
        split(l, t, w, i);
        if (w < lines) tile[w * pitch + i] = src[base[w] + turn(inverse ? i : i + shift, l.m) * l.s];
    }
    __syncthreads();
    for (int t = threadIdx.x; t < work; t += blockDim.x) {
        int w, i;
        split(l, t, w, i);
        if (w >= lines) continue;
        const float2* in = tile + w * pitch;
        float2 acc = make_float2(0.f, 0.f);
        if (!inverse) {
            const int j = i < half ? i : i - half;
            const float* f = i < half ? c_h : c_g;
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const float2 v = in[turn(2 * j + k, l.m)];  // 2j + k <= m + 1
                acc.x += f[k] * v.x;
                acc.y += f[k] * v.y;
            }
        } else {
            for (int k = i & 1; k < 4; k += 2) {
                const int j = turn((i + l.m - k) >> 1, half);  // (i + m - k) / 2 < m
                const float2 lo = in[j], hi = in[half + j];
                acc.x += c_h[k] * lo.x + c_g[k] * hi.x;
                acc.y += c_h[k] * lo.y + c_g[k] * hi.y;
            }
        }
        dst[base[w] + turn(inverse ? i + shift : i, l.m) * l.s] = acc;
    }
}

__global__ void threshold_kernel(const float2* __restrict__ x, float2* __restrict__ out, long long n, long long joint,
                                 float lambda, LowBand low_band) {
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        long long rest = i;
        bool low = true;
        for (int a = 0; a < low_band.count; ++a) {
            low = low && rest % low_band.extent[a] < low_band.low[a];
            rest /= low_band.extent[a];
        }
        float e = 0.f;
        for (long long k = 0; k < joint; ++k) {
            const float2 v = x[i + k * n];
            e += v.x * v.x + v.y * v.y;
        }
        const float norm = sqrtf(e);
        const float f = low ? 1.f : (norm > lambda ? 1.f - lambda / norm : 0.f);
        for (long long k = 0; k < joint; ++k) {
            const float2 v = x[i + k * n];
            out[i + k * n] = make_float2(f * v.x, f * v.y);
        }
    }
}

}  // namespace

void wavelet_pass(Backend& be, const CArray& src, CArray& dst, const Shape& block, int axis, bool inverse,
                  size_t shift) {
    const Shape& shape = src.shape();
    Lines l;
    l.m = static_cast<int>(block[axis]);
    l.s = static_cast<long long>(shape.stride(axis));
    l.along_x = axis == 0;
    l.total = 1;
    for (int b = 0; b < shape.rank(); ++b)
        if (b != axis) {
            l.extent[l.count] = static_cast<long long>(block[b]);
            l.stride[l.count++] = static_cast<long long>(shape.stride(b));
            l.total *= static_cast<long long>(block[b]);
        }
    const long long line_bytes = (static_cast<long long>(l.m) + 1) * static_cast<long long>(sizeof(float2));
    long long fit = kMaxLines;  // a power of two, so rows along x stay aligned
    while (fit > 1 && fit * line_bytes > kSharedBytes) fit /= 2;
    // Long lines: fewer per block (down to 16, 128-byte rows) so that several blocks share an SM; at
    // 32 lines of 256 a block took 66 KB and three fitted, too few loads in flight to fill HBM.
    while (fit > 16 && fit * line_bytes > kOccupancyBytes) fit /= 2;
    if (fit * line_bytes > kSharedBytes)
        throw std::invalid_argument("wavelet_pass: line of " + std::to_string(l.m) + " elements exceeds shared memory");
    l.per_block = 1;
    while (l.per_block * 2 <= std::min<long long>(fit, l.total)) {
        l.per_block *= 2;
        ++l.per_block_log2;
    }
    if (l.total == 0) return;
    DeviceGuard guard(backend_device(be));
    const long long blocks = (l.total + l.per_block - 1) / l.per_block;
    const size_t shared = static_cast<size_t>(line_bytes) * static_cast<size_t>(l.per_block);
    if (shared > 48 * 1024)
        LARMOR_CUDA_CHECK(cudaFuncSetAttribute(pass_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes),
                          "wavelet pass_kernel shared memory");
    pass_kernel<<<static_cast<unsigned>(blocks), kThreads, shared, backend_stream(be)>>>(
        reinterpret_cast<const float2*>(src.data()), reinterpret_cast<float2*>(dst.data()), l, inverse,
        static_cast<int>(shift % block[axis]));
    LARMOR_CUDA_LAUNCH_CHECK("wavelet pass_kernel", block.str() + " axis " + std::to_string(axis));
}

void wavelet_threshold(Backend& be, float lambda, const CArray& x, CArray& out, size_t joint, const Shape& coarse) {
    const Shape& shape = x.shape();
    const long long n = static_cast<long long>(x.size() / joint);
    if (n == 0) return;
    LowBand c;
    c.count = coarse.rank();
    for (int a = 0; a < coarse.rank(); ++a) {
        c.low[a] = static_cast<long long>(coarse[a]);
        c.extent[a] = static_cast<long long>(shape[a]);
    }
    DeviceGuard guard(backend_device(be));
    threshold_kernel<<<grid_stride_blocks(n, kThreads), kThreads, 0, backend_stream(be)>>>(
        reinterpret_cast<const float2*>(x.data()), reinterpret_cast<float2*>(out.data()), n,
        static_cast<long long>(joint), lambda, c);
    LARMOR_CUDA_LAUNCH_CHECK("wavelet threshold_kernel", shape.str());
}

}  // namespace larmor::cuda
