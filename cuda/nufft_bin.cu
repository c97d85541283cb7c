// Binning of the CUDA NUFFT's points (nufft_bin_points, core/linops/nufft_kernels.h): a counting sort
// by bin on the device, as in cuFINUFFT (Shih et al., IPDPSW 2021, sec. III-A): each point's bin and
// its rank among the bin's points from one atomic increment (count_kernel), an exclusive scan of the
// counts (scan_kernel, one block), then every point moves to bin_start[bin] + rank (scatter_kernel).
// The scan also counts each bin's sub-problems (ceil(count / kSubproblemPoints)), whose list
// subproblem_kernel writes, so the spreader knows its blocks without the host reading anything back:
// nothing here synchronises with the host.
#include <algorithm>
#include <string>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/device_context.h"
#include "cuda/launch_size.h"
#include "cuda/nufft_points.h"

namespace larmor::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kScanThreads = 1024;

struct SortArgs {
    NufftTiling t;
    int points;
    const float* u;  // [dims, M], coordinate fastest
    float* coords;   // [M, dims] sorted, axis-major
    int* perm;
    int* bin_of;
    int* rank_of;
    int* bin_count;
    int* bin_start;
    int* sub_start;
    int* sub_bin;
    int* sub_first;
    int* sub_total;
};

// u wrapped into [0, n): the contract asks for it already, but a coordinate of n - 1e-9 that rounds
// to n, or a NaN, must not index outside the bins (a NaN becomes 0).
__device__ __forceinline__ float wrapped(float u, int n) {
    const float fn = static_cast<float>(n);
    float w = u - fn * floorf(u / fn);
    if (!(w >= 0.f && w < fn)) w = 0.f;
    return w;
}

__device__ __forceinline__ int bin_of_point(const NufftTiling& t, const float* u, int m, float* w) {
    int bin = 0, stride = 1;
    for (int a = 0; a < t.dims; ++a) {
        w[a] = wrapped(u[static_cast<long long>(m) * t.dims + a], t.n[a]);
        // bin[a] is a power of two, so the quotient is exact and floor never rounds up into the next bin.
        const int b = min(static_cast<int>(floorf(w[a] / static_cast<float>(t.bin[a]))), t.nbins[a] - 1);
        bin += b * stride;
        stride *= t.nbins[a];
    }
    return bin;
}

// Warp-aggregated: the lanes of a warp whose points share a bin (neighbouring samples of a trajectory
// mostly do) make one atomic on its counter, so a dense bin's counter is not a serial hot spot. The
// loop runs warp-uniformly (its bound is per block), so every lane takes part in the ballot.
__global__ void count_kernel(SortArgs a) {
    const int lane = threadIdx.x & 31;
    for (long long m0 = static_cast<long long>(blockIdx.x) * blockDim.x; m0 < a.points;
         m0 += static_cast<long long>(gridDim.x) * blockDim.x) {
        const int m = static_cast<int>(m0) + static_cast<int>(threadIdx.x);
        const bool valid = m < a.points;
        const unsigned active = __ballot_sync(0xffffffffu, valid);
        if (!valid) continue;
        float w[3];
        const int bin = bin_of_point(a.t, a.u, m, w);
        const unsigned peers = __match_any_sync(active, bin);
        const int leader = __ffs(peers) - 1;
        int base = 0;
        if (lane == leader) base = atomicAdd(&a.bin_count[bin], __popc(peers));
        base = __shfl_sync(active, base, leader);  // every valid lane, each from its group's leader
        a.bin_of[m] = bin;
        a.rank_of[m] = base + __popc(peers & ((1u << lane) - 1u));
    }
}

// Exclusive block-wide scan of one int per thread (warp shuffles, then the warp totals); returns the
// exclusive prefix and leaves the block's total in *total.
__device__ int block_exclusive_scan(int v, int* warp_sums, int* total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    int inc = v;
    for (int d = 1; d < 32; d <<= 1) {
        const int o = __shfl_up_sync(0xffffffffu, inc, d);
        if (lane >= d) inc += o;
    }
    if (lane == 31) warp_sums[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        int s = lane < warps ? warp_sums[lane] : 0;
        for (int d = 1; d < 32; d <<= 1) {
            const int o = __shfl_up_sync(0xffffffffu, s, d);
            if (lane >= d) s += o;
        }
        if (lane < warps) warp_sums[lane] = s;  // inclusive scan of the warp totals
        if (lane == 31) *total = s;
    }
    __syncthreads();
    const int before = warp > 0 ? warp_sums[warp - 1] : 0;
    const int result = before + inc - v;
    __syncthreads();  // warp_sums is reused by the next call
    return result;
}

// One block: bin_start = exclusive scan of the counts, sub_start = exclusive scan of the sub-problems
// per bin. Each thread owns a contiguous run of bins (nbins / 1024, a few hundred at most).
__global__ void scan_kernel(SortArgs a, int nbins) {
    __shared__ int warp_sums[32];
    __shared__ int totals[2];
    const int per = (nbins + blockDim.x - 1) / blockDim.x;
    const int begin = min(nbins, static_cast<int>(threadIdx.x) * per), end = min(nbins, begin + per);
    int points = 0, subs = 0;
    for (int i = begin; i < end; ++i) {
        const int c = a.bin_count[i];
        points += c;
        subs += (c + kSubproblemPoints - 1) / kSubproblemPoints;
    }
    int p = block_exclusive_scan(points, warp_sums, &totals[0]);
    int s = block_exclusive_scan(subs, warp_sums, &totals[1]);
    for (int i = begin; i < end; ++i) {
        const int c = a.bin_count[i];
        a.bin_start[i] = p;
        a.sub_start[i] = s;
        p += c;
        s += (c + kSubproblemPoints - 1) / kSubproblemPoints;
    }
    if (threadIdx.x == 0) {
        a.bin_start[nbins] = totals[0];
        a.sub_start[nbins] = totals[1];
        *a.sub_total = totals[1];
    }
}

__global__ void scatter_kernel(SortArgs a) {
    for (int m = blockIdx.x * blockDim.x + threadIdx.x; m < a.points; m += gridDim.x * blockDim.x) {
        float w[3];
        bin_of_point(a.t, a.u, m, w);  // the wrapped coordinates again (cheaper than storing them)
        const int i = a.bin_start[a.bin_of[m]] + a.rank_of[m];
        for (int ax = 0; ax < a.t.dims; ++ax) a.coords[static_cast<long long>(ax) * a.points + i] = w[ax];
        a.perm[i] = m;
    }
}

__global__ void subproblem_kernel(SortArgs a, int nbins) {
    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < nbins; b += gridDim.x * blockDim.x) {
        const int first = a.bin_start[b], count = a.bin_start[b + 1] - first;
        int s = a.sub_start[b];
        for (int k = 0; k < count; k += kSubproblemPoints, ++s) {
            a.sub_bin[s] = b;
            a.sub_first[s] = first + k;
        }
    }
}

int ceil_div(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }

}  // namespace

void check_nufft_grid(const NufftGrid& g, const char* what) {
    const std::string w(what);
    if (g.dims < 1 || g.dims > 3) throw std::invalid_argument(w + ": dims " + std::to_string(g.dims) + " is outside 1..3");
    for (int a = 0; a < 3; ++a) {
        if (g.n[a] < 1 || (a >= g.dims && g.n[a] != 1))
            throw std::invalid_argument(w + ": grid extent n[" + std::to_string(a) + "] = " + std::to_string(g.n[a]) +
                                        " (must be >= 1, and 1 beyond dims " + std::to_string(g.dims) + ")");
    }
    if (g.width < 2 || g.width > 16)
        throw std::invalid_argument(w + ": kernel width " + std::to_string(g.width) + " is outside 2..16");
    if (g.batch < 1) throw std::invalid_argument(w + ": batch " + std::to_string(g.batch) + " is below 1");
    if (g.points < 0) throw std::invalid_argument(w + ": points " + std::to_string(g.points) + " is negative");
    // int32 indices on the device, with room for a grid-stride step (at most 2^28) on top.
    constexpr long long kLimit = 1LL << 30;
    if (g.grid_size() > kLimit || g.points > kLimit)
        throw std::invalid_argument(w + ": grid of " + std::to_string(g.grid_size()) + " points and " +
                                    std::to_string(g.points) + " non-uniform points: each must be at most 2^30");
}

bool shared_tiles_pay_off(const NufftGrid& g, const NufftTiling& t) {
    if (t.tile_size() * 8 > kMaxTileBytes) return false;
    long long footprint = 1;
    for (int a = 0; a < g.dims; ++a) footprint *= g.width;
    const double per_bin = static_cast<double>(g.points) / static_cast<double>(t.bin_count());
    return per_bin * static_cast<double>(footprint) >= static_cast<double>(t.tile_size());
}

NufftTiling nufft_tiling(const NufftGrid& g) {
    NufftTiling t;
    t.dims = g.dims;
    t.width = g.width;
    static const int k1[1][3] = {{1024, 1, 1}};
    static const int k2[1][3] = {{32, 32, 1}};
    static const int k3[4][3] = {{16, 16, 8}, {8, 8, 8}, {8, 8, 4}, {4, 4, 4}};
    const int(*shapes)[3] = g.dims == 1 ? k1 : g.dims == 2 ? k2 : k3;
    const int count = g.dims == 3 ? 4 : 1;
    for (int c = 0; c < count; ++c) {
        long long bytes = 8;
        for (int a = 0; a < 3; ++a) bytes *= a < g.dims ? shapes[c][a] + g.width : 1;
        if (bytes <= kMaxTileBytes || c == count - 1) {
            for (int a = 0; a < 3; ++a) t.bin[a] = a < g.dims ? shapes[c][a] : 1;
            break;
        }
    }
    for (int a = 0; a < 3; ++a) {
        t.n[a] = static_cast<int>(g.n[a]);
        t.nbins[a] = ceil_div(t.n[a], t.bin[a]);
        t.tile[a] = a < g.dims ? t.bin[a] + g.width : 1;
    }
    return t;
}

CudaNufftPointSet::CudaNufftPointSet(Backend& be, const NufftGrid& g)
    : tiling(nufft_tiling(g)), points(g.points), device_id(backend_device(be)) {
    const long long nbins = tiling.bin_count();
    max_subproblems = nbins + ceil_div(points, kSubproblemPoints);
    // One float array for the coordinates, one for all index arrays (fewer blocks, one budget charge each).
    coords = be.empty_real(Shape{static_cast<size_t>(std::max(1LL, points * g.dims))});
    const long long total = 3 * points + nbins + 2 * (nbins + 1) + 2 * max_subproblems + 1;
    ints = be.empty_real(Shape{static_cast<size_t>(total)});
    int* p = reinterpret_cast<int*>(ints.data());
    auto take = [&p](long long n) {
        int* q = p;
        p += n;
        return q;
    };
    perm = take(points);
    bin_of = take(points);
    rank_of = take(points);
    bin_count = take(nbins);
    bin_start = take(nbins + 1);
    sub_start = take(nbins + 1);
    sub_bin = take(max_subproblems);
    sub_first = take(max_subproblems);
    sub_total = take(1);
}

const CudaNufftPointSet& cuda_point_set(const NufftGrid& g, const NufftPointSet& p, const char* what) {
    check_nufft_grid(g, what);
    const auto* s = dynamic_cast<const CudaNufftPointSet*>(&p);
    if (!s) throw std::invalid_argument(std::string(what) + ": the point set was not made by cuda::nufft_bin_points");
    const NufftTiling& t = s->tiling;
    bool same = t.dims == g.dims && t.width == g.width && s->points == g.points;
    for (int a = 0; a < 3; ++a) same = same && t.n[a] == g.n[a];
    if (!same)
        throw std::invalid_argument(std::string(what) + ": the point set was binned for dims " + std::to_string(t.dims) +
                                    ", grid " + std::to_string(t.n[0]) + "x" + std::to_string(t.n[1]) + "x" +
                                    std::to_string(t.n[2]) + ", width " + std::to_string(t.width) + ", " +
                                    std::to_string(s->points) + " points; called with dims " + std::to_string(g.dims) +
                                    ", grid " + std::to_string(g.n[0]) + "x" + std::to_string(g.n[1]) + "x" +
                                    std::to_string(g.n[2]) + ", width " + std::to_string(g.width) + ", " +
                                    std::to_string(g.points) + " points");
    return *s;
}

std::unique_ptr<NufftPointSet> nufft_bin_points(Backend& be, const NufftGrid& g, const RArray& u) {
    check_nufft_grid(g, "cuda::nufft_bin_points");
    if (u.size() != static_cast<size_t>(g.points * g.dims))
        throw std::invalid_argument("cuda::nufft_bin_points: coordinates " + u.shape().str() + " hold " +
                                    std::to_string(u.size()) + " values, expected dims x M = " +
                                    std::to_string(g.dims) + " x " + std::to_string(g.points));
    if (g.points > 0 && u.device() != Device::Cuda)
        throw std::invalid_argument("cuda::nufft_bin_points: coordinates " + u.shape().str() +
                                    " must be on the CUDA device (Backend::to_device)");
    DeviceGuard guard(backend_device(be));
    auto set = std::make_unique<CudaNufftPointSet>(be, g);
    CudaNufftPointSet& s = *set;
    const cudaStream_t stream = backend_stream(be);
    const int nbins = static_cast<int>(s.tiling.bin_count());
    const std::string context = "NUFFT bin_points, " + std::to_string(g.points) + " points, " + std::to_string(nbins) + " bins";
    LARMOR_CUDA_CHECK(cudaMemsetAsync(s.bin_count, 0, static_cast<size_t>(nbins) * sizeof(int), stream), context);
    SortArgs a{s.tiling, static_cast<int>(g.points), u.data(), s.coords.data(), s.perm, s.bin_of, s.rank_of,
               s.bin_count, s.bin_start, s.sub_start, s.sub_bin, s.sub_first, s.sub_total};
    const unsigned point_blocks = grid_stride_blocks(g.points, kThreads);
    if (g.points > 0) {
        count_kernel<<<point_blocks, kThreads, 0, stream>>>(a);
        LARMOR_CUDA_LAUNCH_CHECK("nufft count_kernel", context);
    }
    scan_kernel<<<1, kScanThreads, 0, stream>>>(a, nbins);
    LARMOR_CUDA_LAUNCH_CHECK("nufft scan_kernel", context);
    if (g.points > 0) {
        scatter_kernel<<<point_blocks, kThreads, 0, stream>>>(a);
        LARMOR_CUDA_LAUNCH_CHECK("nufft scatter_kernel", context);
    }
    subproblem_kernel<<<grid_stride_blocks(nbins, kThreads), kThreads, 0, stream>>>(a, nbins);
    LARMOR_CUDA_LAUNCH_CHECK("nufft subproblem_kernel", context);
    return set;
}

}  // namespace larmor::cuda
