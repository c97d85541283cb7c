// CPU kernels of the NUFFT (core/linops/nufft_kernels.h), tiled and threaded with OpenMP.
//
// Binning: the grid is cut into tiles (a divisor of n_a near 512 / 32 / 16 points per axis for 1D / 2D
// / 3D, never below the kernel width w), and each point belongs to the tile holding the first grid
// point its kernel covers, i0_a = floor(u_a - w/2) + 1. A counting sort by tile (stable, so a radial
// spoke's samples stay in acquisition order) gives each tile a contiguous run of points.
//
// Spreading: each tile's points are spread into a private buffer of (T_a + w - 1) points per axis,
// which is then added onto the grid (wrapping at the edges). Two buffers of tiles i and i + 2 along an
// axis never overlap when T >= w, so tiles are coloured by index parity per axis (a third colour for
// the last tile of an odd count, which touches tile 0 across the wrap): within one colour the tiles
// are disjoint and run in parallel without atomics; colours run one after the other (at most 3^dims).
// This is the "subproblem" scheme of Barnett et al. (SIAM J. Sci. Comput. 41:C479, 2019, sec. 5) with
// a colouring in place of their locked add-back.
//
// Interpolation: the adjoint, parallel over tiles with no colouring needed (each tile copies its
// padded block from the grid into its buffer and writes only its own points' samples).
//
// The kernel is separable: w values per axis per point, phi(z) = exp(beta (sqrt(1 - z^2) - 1)) with
// z = 2 (g - u) / w (|z| < 1). Buffers keep the batch innermost ([block..., batch]), so the innermost
// loop runs over the coils with one real weight per grid point: contiguous and vectorised.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/linops/nufft_kernels.h"

namespace larmor::cpu {
namespace {

using ll = long long;

constexpr int kMaxWidth = 16;

class CpuPointSet final : public NufftPointSet {
public:
    Device device() const override { return Device::Cpu; }

    int dims = 1, width = 0;
    ll n[3] = {1, 1, 1};
    ll tile[3] = {1, 1, 1};    // tile edge per axis
    ll tiles[3] = {1, 1, 1};   // tiles per axis
    ll pad[3] = {1, 1, 1};     // buffer edge per axis: tile + w - 1 on used axes
    ll batch = 1;
    std::vector<ll> begin;          // points of tile t: sorted positions [begin[t], begin[t + 1])
    std::vector<int> order;         // sorted position -> original point index
    std::vector<float> su;          // coordinates in sorted order [M, dims]
    std::vector<std::vector<ll>> colour;  // non-empty tiles of each colour (spreading)
    std::vector<ll> nonempty;       // all non-empty tiles (interpolation)

    ll buffer_size() const { return pad[0] * pad[1] * pad[2] * batch; }
    size_t bytes() const override {
        size_t b = begin.size() * sizeof(ll) + order.size() * sizeof(int) + su.size() * sizeof(float) +
                   nonempty.size() * sizeof(ll);
        for (const auto& c : colour) b += c.size() * sizeof(ll);
        return b;
    }
};

// The calling thread's tile buffer of at least n elements. Per thread rather than per point set, so
// sets shared by several sessions' plans are only read; each OpenMP worker keeps its buffer (grown to
// the largest tile it has seen) between calls.
cfloat* thread_buffer(ll n) {
    thread_local std::vector<cfloat> buffer;
    if (buffer.size() < size_t(n)) buffer.resize(size_t(n));
    return buffer.data();
}

// The divisor of n closest to `target` from above or below that is >= w (n itself if none smaller).
ll choose_tile(ll n, ll target, int w) {
    ll best = n;
    for (ll d = std::max<ll>(w, 1); d <= n; ++d)
        if (n % d == 0 && d <= target) best = d;  // the largest divisor <= target, >= w
    if (best == n) {
        for (ll d = std::max<ll>(w, 1); d <= n; ++d)
            if (n % d == 0) return d;  // none <= target: the smallest one >= w
    }
    return best;
}

struct PointKernel {
    ll local[3] = {0, 0, 0};  // i0 - tile origin per axis
    float k[3][kMaxWidth];    // kernel values per axis (1 on unused axes)
};

// The tile of a point and its first covered grid index per axis (wrapped into [0, n)).
inline void first_index(const float* u, int dims, int w, const ll* n, ll* i0) {
    for (int a = 0; a < dims; ++a) {
        ll i = ll(std::floor(u[a] - 0.5f * float(w))) + 1;
        if (i < 0) i += n[a];
        if (i >= n[a]) i -= n[a];
        i0[a] = i;
    }
    for (int a = dims; a < 3; ++a) i0[a] = 0;
}

// Kernel values of the point at u and its offsets inside its tile's buffer.
inline void point_kernel(const CpuPointSet& p, float beta, const float* u, PointKernel& pk) {
    const int w = p.width;
    const float half = 0.5f * float(w);
    const float scale = 2.f / float(w);
    for (int a = 0; a < 3; ++a) {
        if (a >= p.dims) {
            pk.k[a][0] = 1.f;
            pk.local[a] = 0;
            continue;
        }
        const float start = std::floor(u[a] - half) + 1.f;  // the unwrapped i0
        ll i = ll(start);
        if (i < 0) i += p.n[a];
        if (i >= p.n[a]) i -= p.n[a];
        pk.local[a] = i % p.tile[a];
        const float d0 = start - u[a];
        for (int j = 0; j < w; ++j) {
            const float z = (d0 + float(j)) * scale;
            const float r = 1.f - z * z;
            pk.k[a][j] = r > 0.f ? std::exp(beta * (std::sqrt(r) - 1.f)) : 0.f;
        }
    }
}

const CpuPointSet& as_cpu(const NufftPointSet& p) {
    if (p.device() != Device::Cpu) throw std::invalid_argument("nufft (cpu): the point set was binned on cuda");
    return static_cast<const CpuPointSet&>(p);
}

void check_arrays(const NufftGrid& g, const CpuPointSet& p, const CArray& samples, const CArray& grid, const char* who) {
    if (samples.size() != size_t(g.points * g.batch) || grid.size() != size_t(g.grid_size() * g.batch))
        throw std::invalid_argument(std::string(who) + ": samples " + samples.shape().str() + " / grid " +
                                    grid.shape().str() + " do not match the plan's " + std::to_string(g.points) +
                                    " points x " + std::to_string(g.batch) + " transforms");
    if (ll(p.order.size()) != g.points || p.batch != g.batch || p.width != g.width)
        throw std::invalid_argument(std::string(who) + ": the point set was binned for another plan");
}

// Origin of tile t per axis.
inline void tile_origin(const CpuPointSet& p, ll t, ll* o) {
    o[0] = (t % p.tiles[0]) * p.tile[0];
    o[1] = ((t / p.tiles[0]) % p.tiles[1]) * p.tile[1];
    o[2] = (t / (p.tiles[0] * p.tiles[1])) * p.tile[2];
}

// Visits the buffer's rows: f(buffer row offset, grid row offset, x origin) for each (y, z) row of
// the padded block, grid indices wrapped.
template <class F>
inline void for_rows(const CpuPointSet& p, const ll* o, F&& f) {
    for (ll r2 = 0; r2 < p.pad[2]; ++r2) {
        ll g2 = o[2] + r2;
        if (g2 >= p.n[2]) g2 -= p.n[2];
        for (ll r1 = 0; r1 < p.pad[1]; ++r1) {
            ll g1 = o[1] + r1;
            if (g1 >= p.n[1]) g1 -= p.n[1];
            f((r2 * p.pad[1] + r1) * p.pad[0], (g2 * p.n[1] + g1) * p.n[0]);
        }
    }
}

// The points of tile t spread into its buffer buf ([pad..., batch]). BC > 0: the batch as a
// compile-time constant (the common coil counts), so the innermost loop over 2 B floats is unrolled
// and vectorised without a remainder; BC = 0: any batch.
template <int BC>
void spread_tile(const CpuPointSet& p, ll t, float beta, const cfloat* in, ll M, ll batch, cfloat* buf, cfloat* sb) {
    const ll B = BC > 0 ? BC : batch;
    const int w = p.width, w1 = p.dims > 1 ? w : 1, w2 = p.dims > 2 ? w : 1;
    PointKernel pk;
    for (ll s = p.begin[size_t(t)]; s < p.begin[size_t(t + 1)]; ++s) {
        const ll m = p.order[size_t(s)];
        point_kernel(p, beta, &p.su[size_t(s * p.dims)], pk);
        for (ll b = 0; b < B; ++b) sb[b] = in[m + b * M];
        const float* __restrict v = reinterpret_cast<const float*>(sb);
        for (int j2 = 0; j2 < w2; ++j2)
            for (int j1 = 0; j1 < w1; ++j1) {
                const float k21 = pk.k[2][j2] * pk.k[1][j1];
                float* __restrict row = reinterpret_cast<float*>(
                    buf + (((pk.local[2] + j2) * p.pad[1] + pk.local[1] + j1) * p.pad[0] + pk.local[0]) * B);
                for (int j0 = 0; j0 < w; ++j0) {
                    const float k = k21 * pk.k[0][j0];
                    float* __restrict d = row + 2 * j0 * B;
                    for (ll e = 0; e < 2 * B; ++e) d[e] += k * v[e];
                }
            }
    }
}

// The samples of tile t's points from its buffer buf (the adjoint of spread_tile).
template <int BC>
void interp_tile(const CpuPointSet& p, ll t, float beta, const cfloat* buf, ll M, ll batch, cfloat* acc, cfloat* out) {
    const ll B = BC > 0 ? BC : batch;
    const int w = p.width, w1 = p.dims > 1 ? w : 1, w2 = p.dims > 2 ? w : 1;
    PointKernel pk;
    float* __restrict a = reinterpret_cast<float*>(acc);
    for (ll s = p.begin[size_t(t)]; s < p.begin[size_t(t + 1)]; ++s) {
        const ll m = p.order[size_t(s)];
        point_kernel(p, beta, &p.su[size_t(s * p.dims)], pk);
        for (ll e = 0; e < 2 * B; ++e) a[e] = 0.f;
        for (int j2 = 0; j2 < w2; ++j2)
            for (int j1 = 0; j1 < w1; ++j1) {
                const float k21 = pk.k[2][j2] * pk.k[1][j1];
                const float* __restrict row = reinterpret_cast<const float*>(
                    buf + (((pk.local[2] + j2) * p.pad[1] + pk.local[1] + j1) * p.pad[0] + pk.local[0]) * B);
                for (int j0 = 0; j0 < w; ++j0) {
                    const float k = k21 * pk.k[0][j0];
                    const float* __restrict v = row + 2 * j0 * B;
                    for (ll e = 0; e < 2 * B; ++e) a[e] += k * v[e];
                }
            }
        for (ll b = 0; b < B; ++b) out[m + b * M] = acc[b];
    }
}

template <int N>
struct BatchConst {
    static constexpr int value = N;
};

// f(BatchConst<B>) for the common batches, f(BatchConst<0>) for any other.
template <class F>
void with_batch(ll B, F&& f) {
    switch (B) {
        case 1: f(BatchConst<1>{}); break;
        case 2: f(BatchConst<2>{}); break;
        case 3: f(BatchConst<3>{}); break;
        case 4: f(BatchConst<4>{}); break;
        case 8: f(BatchConst<8>{}); break;
        case 16: f(BatchConst<16>{}); break;
        case 32: f(BatchConst<32>{}); break;
        default: f(BatchConst<0>{}); break;
    }
}

}  // namespace

std::unique_ptr<NufftPointSet> nufft_bin_points(const NufftGrid& g, const RArray& u) {
    if (g.dims < 1 || g.dims > 3 || g.width < 2 || g.width > kMaxWidth)
        throw std::invalid_argument("nufft_bin_points: dims " + std::to_string(g.dims) + ", width " +
                                    std::to_string(g.width));
    if (u.size() != size_t(g.dims * g.points))
        throw std::invalid_argument("nufft_bin_points: coordinates " + u.shape().str() + " for " +
                                    std::to_string(g.points) + " points in " + std::to_string(g.dims) + " dims");
    if (g.points > ll(2147483647)) throw std::invalid_argument("nufft_bin_points: more than 2^31 points");
    auto p = std::make_unique<CpuPointSet>();
    p->dims = g.dims;
    p->width = g.width;
    p->batch = g.batch;
    const ll target = g.dims == 1 ? 512 : g.dims == 2 ? 32 : 16;
    for (int a = 0; a < 3; ++a) {
        p->n[a] = g.n[a];
        if (a < g.dims) {
            if (g.n[a] < g.width)
                throw std::invalid_argument("nufft_bin_points: grid axis " + std::to_string(a) + " of " +
                                            std::to_string(g.n[a]) + " points is narrower than the kernel");
            p->tile[a] = choose_tile(g.n[a], target, g.width);
            p->tiles[a] = g.n[a] / p->tile[a];
            p->pad[a] = p->tile[a] + g.width - 1;
        }
    }
    const ll ntiles = p->tiles[0] * p->tiles[1] * p->tiles[2];
    const ll M = g.points;
    const int dims = g.dims, w = g.width;
    const float* uu = u.data();

    std::vector<ll> tid(static_cast<size_t>(M));
#pragma omp parallel for schedule(static)
    for (ll m = 0; m < M; ++m) {
        ll i0[3];
        first_index(uu + m * dims, dims, w, p->n, i0);
        tid[size_t(m)] = i0[0] / p->tile[0] + p->tiles[0] * (i0[1] / p->tile[1] + p->tiles[1] * (i0[2] / p->tile[2]));
    }
    p->begin.assign(size_t(ntiles + 1), 0);
    for (ll m = 0; m < M; ++m) ++p->begin[size_t(tid[size_t(m)] + 1)];
    for (ll t = 0; t < ntiles; ++t) p->begin[size_t(t + 1)] += p->begin[size_t(t)];
    p->order.resize(size_t(M));
    p->su.resize(size_t(M * dims));
    std::vector<ll> next(p->begin.begin(), p->begin.end() - 1);
    for (ll m = 0; m < M; ++m) {
        const ll s = next[size_t(tid[size_t(m)])]++;
        p->order[size_t(s)] = int(m);
        for (int a = 0; a < dims; ++a) p->su[size_t(s * dims + a)] = uu[m * dims + a];
    }

    p->colour.assign(27, {});
    for (ll t = 0; t < ntiles; ++t) {
        if (p->begin[size_t(t + 1)] == p->begin[size_t(t)]) continue;
        p->nonempty.push_back(t);
        const ll idx[3] = {t % p->tiles[0], (t / p->tiles[0]) % p->tiles[1], t / (p->tiles[0] * p->tiles[1])};
        int c = 0;
        for (int a = 2; a >= 0; --a) {
            const bool odd_last = p->tiles[a] % 2 == 1 && idx[a] == p->tiles[a] - 1;
            c = 3 * c + (odd_last ? 2 : int(idx[a] % 2));
        }
        p->colour[size_t(c)].push_back(t);
    }
    // Heaviest tiles first within a colour, so the dynamic schedule ends with the light ones.
    for (auto& list : p->colour)
        std::stable_sort(list.begin(), list.end(), [&](ll a, ll b) {
            return p->begin[size_t(a + 1)] - p->begin[size_t(a)] > p->begin[size_t(b + 1)] - p->begin[size_t(b)];
        });
    return p;
}

void nufft_spread(const NufftGrid& g, const NufftPointSet& ps, const CArray& samples, CArray& grid) {
    const CpuPointSet& p = as_cpu(ps);
    check_arrays(g, p, samples, grid, "nufft_spread");
    const ll B = g.batch, M = g.points, G = g.grid_size(), bsize = p.buffer_size();
    const float beta = g.beta;
    const cfloat* in = samples.data();
    cfloat* out = grid.data();
#pragma omp parallel
    {
        const ll total = G * B;
#pragma omp for schedule(static)
        for (ll i = 0; i < total; ++i) out[i] = cfloat(0.f, 0.f);
        cfloat* buf = thread_buffer(bsize + B);
        cfloat* sb = buf + bsize;  // the point's samples, one per transform
        for (const auto& list : p.colour) {
#pragma omp for schedule(dynamic, 1)
            for (ll li = 0; li < ll(list.size()); ++li) {
                const ll t = list[size_t(li)];
                std::fill(buf, buf + bsize, cfloat(0.f, 0.f));
                with_batch(B, [&](auto bc) { spread_tile<decltype(bc)::value>(p, t, beta, in, M, B, buf, sb); });
                ll o[3];
                tile_origin(p, t, o);
                // One transform at a time, so the grid is written along its rows (its planes lie
                // G apart: a power of two, which would thrash the cache if all were written at once).
                for (ll b = 0; b < B; ++b)
                    for_rows(p, o, [&](ll brow, ll grow) {
                        const cfloat* src = buf + brow * B + b;
                        cfloat* dst = out + b * G + grow;
                        for (ll r0 = 0; r0 < p.pad[0]; ++r0) {
                            ll g0 = o[0] + r0;
                            if (g0 >= p.n[0]) g0 -= p.n[0];
                            dst[g0] += src[r0 * B];
                        }
                    });
            }
        }
    }
}

void nufft_interp(const NufftGrid& g, const NufftPointSet& ps, const CArray& grid, CArray& samples) {
    const CpuPointSet& p = as_cpu(ps);
    check_arrays(g, p, samples, grid, "nufft_interp");
    const ll B = g.batch, M = g.points, G = g.grid_size();
    const float beta = g.beta;
    const cfloat* in = grid.data();
    cfloat* out = samples.data();
#pragma omp parallel
    {
        cfloat* buf = thread_buffer(p.buffer_size() + B);
        cfloat* acc = buf + p.buffer_size();
#pragma omp for schedule(dynamic, 1)
        for (ll li = 0; li < ll(p.nonempty.size()); ++li) {
            const ll t = p.nonempty[size_t(li)];
            ll o[3];
            tile_origin(p, t, o);
            for (ll b = 0; b < B; ++b)  // along the grid's rows, as the spreading's add-back
                for_rows(p, o, [&](ll brow, ll grow) {
                    cfloat* dst = buf + brow * B + b;
                    const cfloat* src = in + b * G + grow;
                    for (ll r0 = 0; r0 < p.pad[0]; ++r0) {
                        ll g0 = o[0] + r0;
                        if (g0 >= p.n[0]) g0 -= p.n[0];
                        dst[r0 * B] = src[g0];
                    }
                });
            with_batch(B, [&](auto bc) { interp_tile<decltype(bc)::value>(p, t, beta, buf, M, B, acc, out); });
        }
    }
}

}  // namespace larmor::cpu
