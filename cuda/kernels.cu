// Memory-bound kernels of the CUDA backend: centring modulation (fallback FFT path) and centred
// crop/pad. Accesses are coalesced along x.
#include <algorithm>
#include <cstdint>

#include "cuda/cuda_check.h"
#include "cuda/kernels.h"
#include "cuda/launch_size.h"
#include "cuda/vec_types.cuh"

namespace larmor::cuda {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(long long work, long long cap = 1 << 20) { return grid_stride_blocks(work, kThreads, cap); }

__global__ void modulation_kernel(float2* data, long long size, ModulationArgs a) {
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < size;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        unsigned parity = 0;
        float turns = 0.f;
        for (int k = 0; k < a.count; ++k) {
            const long long n = a.n[k];
            const long long m = (i / a.stride[k]) % n;
            if (n % 2 == 0) {
                parity += static_cast<unsigned>(a.store ? m + n / 2 : m);
            } else {
                const long long c = n / 2;
                const long long mm = a.store ? (m + n - c) % n : m;
                turns += static_cast<float>((c * mm) % n) / static_cast<float>(n);
                if (turns >= 1.f) turns -= 1.f;
            }
        }
        float2 v = data[i];
        if (turns != 0.f) {
            float sn, cs;
            sincospif(-a.sign * 2.f * turns, &sn, &cs);
            v = make_float2(v.x * cs - v.y * sn, v.x * sn + v.y * cs);
        }
        const float f = ((parity & 1u) ? -1.f : 1.f) * (a.store ? a.scale : 1.f);
        data[i] = make_float2(v.x * f, v.y * f);
    }
}

__global__ void crop_pad_kernel(const float2* __restrict__ src, Dims sd, float2* __restrict__ dst, Dims dd,
                                long long rows) {
    const long long nx = dd.n[0], sx = sd.n[0], shift0 = sx / 2 - nx / 2;
    for (long long r = blockIdx.y; r < rows; r += gridDim.y) {
        long long rem = r, soff = 0, sstride = sx;
        bool inside = true;
        for (int a = 1; a < dd.rank; ++a) {
            const long long j = rem % dd.n[a];
            rem /= dd.n[a];
            const long long i = j - dd.n[a] / 2 + sd.n[a] / 2;
            inside = inside && i >= 0 && i < sd.n[a];
            soff += i * sstride;
            sstride *= sd.n[a];
        }
        for (long long x = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; x < nx;
             x += static_cast<long long>(gridDim.x) * blockDim.x) {
            const long long i0 = x + shift0;
            dst[r * nx + x] = (inside && i0 >= 0 && i0 < sx) ? src[soff + i0] : make_float2(0.f, 0.f);
        }
    }
}

// Crop/pad along x only (every other extent equal): row r of dst comes from row r of src, so no
// per-row decoding; 32-bit indices (the launcher checks both arrays fit). T = float4 moves two
// elements at once when the sizes and the shift are even (pairs are then wholly inside or outside).
template <typename T>
__global__ void crop_pad_x_kernel(const T* __restrict__ src, unsigned ns, T* __restrict__ dst, unsigned nd, int off,
                                  unsigned rows) {
    const unsigned x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= nd) return;
    const int i = static_cast<int>(x) + off;
    const bool inside = i >= 0 && static_cast<unsigned>(i) < ns;
    for (unsigned r = blockIdx.y * blockDim.y + threadIdx.y; r < rows; r += gridDim.y * blockDim.y)
        dst[r * nd + x] = inside ? src[r * ns + static_cast<unsigned>(i)] : T{};
}

template <typename T>
void launch_crop_pad_x(const T* src, long long ns, T* dst, long long nd, long long off, long long rows,
                       cudaStream_t stream) {
    const unsigned bx = static_cast<unsigned>(std::min(256LL, ((nd + 31) / 32) * 32));
    const unsigned by = 256u / bx;
    const dim3 block(bx, by);
    const dim3 grid(static_cast<unsigned>((nd + bx - 1) / bx),
                    static_cast<unsigned>(std::min((rows + by - 1) / by, 65535LL)));
    crop_pad_x_kernel<T><<<grid, block, 0, stream>>>(src, static_cast<unsigned>(ns), dst, static_cast<unsigned>(nd),
                                                     static_cast<int>(off), static_cast<unsigned>(rows));
}

// One thread per pair of elements {k, k'} (V = 2: two neighbouring pairs with 16-byte accesses).
// Leaders k: x < nx/2 when x is transformed (partner x + nx/2), else rows whose index along the
// first transformed axis is below half. The row part of each pair (and its signs) is decoded once per
// thread and row; along x only a sign alternates.
template <int V>
__global__ void half_swap_kernel(float2* __restrict__ d, HalfSwapArgs a, long long lead_rows, long long groups,
                                 int first_live) {
    using T = typename Vec<V>::T;
    const long long nx = a.dims.n[0];
    const bool xlive = a.live & 1u;
    const long long xshift = xlive ? nx / 2 : 0;
    const unsigned xhalf = xlive ? static_cast<unsigned>((nx / 2) & 1) : 0u;
    for (long long lr = blockIdx.y * static_cast<long long>(blockDim.y) + threadIdx.y; lr < lead_rows;
         lr += static_cast<long long>(gridDim.y) * blockDim.y) {
        long long rem = lr, row = 0, prow = 0, mul = 1;
        unsigned par = 0, ppar = 0;  // sign bits of k and k' from the row axes: sum (j + N/2)
        for (int ax = 1; ax < a.dims.rank; ++ax) {
            const long long na = a.dims.n[ax];
            const long long ext = (!xlive && ax == first_live) ? na / 2 : na;
            const long long j = rem % ext;
            rem /= ext;
            long long jp = j;
            if (a.live & (1u << ax)) {
                jp = j < na / 2 ? j + na / 2 : j - na / 2;
                par += static_cast<unsigned>(j + na / 2);
                ppar += static_cast<unsigned>(jp + na / 2);
            }
            row += j * mul;
            prow += jp * mul;
            mul *= na;
        }
        float2* ra = d + row * nx;
        float2* rb = d + prow * nx + xshift;
        for (long long g = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; g < groups;
             g += static_cast<long long>(gridDim.x) * blockDim.x) {
            T va = reinterpret_cast<const T*>(ra)[g];
            T vb = reinterpret_cast<const T*>(rb)[g];
            float2* ea = reinterpret_cast<float2*>(&va);
            float2* eb = reinterpret_cast<float2*>(&vb);
#pragma unroll
            for (int v = 0; v < V; ++v) {
                const unsigned x = static_cast<unsigned>(g * V + v);
                // sign of k = (x, row): x + nx/2 along x when transformed; k' has x + nx/2 as its x
                const unsigned sa = par + (xlive ? x + xhalf : 0u);
                const unsigned sb = ppar + (xlive ? x : 0u);  // (x + nx/2) + nx/2 = x + nx
                const float fa = (sa & 1u) ? -a.scale : a.scale, fb = (sb & 1u) ? -a.scale : a.scale;
                const float2 oa = ea[v], ob = eb[v];
                ea[v] = make_float2(ob.x * fa, ob.y * fa);
                eb[v] = make_float2(oa.x * fb, oa.y * fb);
            }
            reinterpret_cast<T*>(ra)[g] = va;
            reinterpret_cast<T*>(rb)[g] = vb;
        }
    }
}

}  // namespace

void launch_modulation(float2* data, long long size, const ModulationArgs& args, cudaStream_t stream) {
    if (size == 0) return;
    modulation_kernel<<<grid_for(size), kThreads, 0, stream>>>(data, size, args);
    LARMOR_CUDA_LAUNCH_CHECK("modulation_kernel", std::to_string(size) + " elements");
}

void launch_half_swap(float2* data, const HalfSwapArgs& a, cudaStream_t stream) {
    long long total = 1;
    for (int ax = 0; ax < a.dims.rank; ++ax) total *= a.dims.n[ax];
    if (total == 0 || a.live == 0) return;
    const long long nx = a.dims.n[0];
    const bool xlive = a.live & 1u;
    int first_live = 0;
    while (!(a.live & (1u << first_live))) ++first_live;
    const long long rows = total / nx, lead_rows = xlive ? rows : rows / 2;
    const long long xs = xlive ? nx / 2 : nx;  // elements per leader row
    const bool vec = xs % 2 == 0 && aligned16(data) && (nx % 2 == 0);
    const long long groups = vec ? xs / 2 : xs;
    // 256-thread blocks: x across a warp multiple, several rows per block when rows are short
    const unsigned bx = static_cast<unsigned>(std::min(256LL, ((groups + 31) / 32) * 32));
    const unsigned by = 256u / bx;
    const dim3 block(bx, by);
    const dim3 grid(static_cast<unsigned>(std::min((groups + bx - 1) / bx, 1024LL)),
                    static_cast<unsigned>(std::min((lead_rows + by - 1) / by, 65535LL)));
    if (vec)
        half_swap_kernel<2><<<grid, block, 0, stream>>>(data, a, lead_rows, groups, first_live);
    else
        half_swap_kernel<1><<<grid, block, 0, stream>>>(data, a, lead_rows, groups, first_live);
    LARMOR_CUDA_LAUNCH_CHECK("half_swap_kernel", std::to_string(total) + " elements");
}

void launch_crop_pad(const float2* src, const Dims& sd, float2* dst, const Dims& dd, cudaStream_t stream) {
    long long total = 1;
    for (int a = 0; a < dd.rank; ++a) total *= dd.n[a];
    if (total == 0) return;
    const long long nx = dd.rank ? dd.n[0] : 1, rows = total / nx;
    bool x_only = dd.rank >= 1 && sd.rank == dd.rank;
    long long src_total = 1;
    for (int a = 0; a < sd.rank; ++a) src_total *= sd.n[a];
    for (int a = 1; a < dd.rank; ++a) x_only = x_only && sd.n[a] == dd.n[a];
    constexpr long long kMax32 = (1LL << 31) - 1;
    if (x_only && sd.n[0] > 0 && total <= kMax32 && src_total <= kMax32) {
        // Same centring convention as crop_pad_kernel: dst x reads src x + sx/2 - nx/2.
        const long long sx = sd.n[0], off = sx / 2 - nx / 2;
        if (nx % 2 == 0 && sx % 2 == 0 && off % 2 == 0 && aligned16(src) && aligned16(dst))
            launch_crop_pad_x(reinterpret_cast<const float4*>(src), sx / 2, reinterpret_cast<float4*>(dst), nx / 2,
                              off / 2, rows, stream);
        else
            launch_crop_pad_x(src, sx, dst, nx, off, rows, stream);
        LARMOR_CUDA_LAUNCH_CHECK("crop_pad_x_kernel", std::to_string(total) + " elements");
        return;
    }
    const dim3 grid(grid_for(nx, 64), static_cast<unsigned>(std::min(rows, 65535LL)));
    crop_pad_kernel<<<grid, kThreads, 0, stream>>>(src, sd, dst, dd, rows);
    LARMOR_CUDA_LAUNCH_CHECK("crop_pad_kernel", std::to_string(total) + " elements");
}

bool kernels_loadable() {
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, modulation_kernel) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return true;
}

}  // namespace larmor::cuda
