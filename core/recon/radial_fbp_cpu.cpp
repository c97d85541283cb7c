// CPU backprojection of the radial FBP (contract: core/recon/radial_fbp_kernels.h). OpenMP over pixel
// rows; within a row the pixels go in chunks that stay in registers/L1 while every spoke is added: for
// one spoke the projection coordinate p advances by a_j per pixel, so a chunk reads a short contiguous
// stretch of that spoke's projection (cache friendly), and the spoke's row offset is computed once per
// chunk. All coils of a chunk are done before the next, so the RSS needs no coil images. A shifted
// spoke's phase exp(2 pi i phi) is linear in the pixel, so along a chunk it is one rotation per
// pixel from the chunk's first (a sine and cosine per chunk, not per pixel; 64 rotations in float
// drift by ~1e-5 rad, far below the interpolation's error).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/recon/radial_fbp_kernels.h"

namespace larmor::cpu {
namespace {

using ll = long long;
constexpr ll kChunk = 64;  // pixels of a row accumulated together (64 complex = 512 bytes)

// Linear interpolation of proj[0, m) at p, neighbours outside [0, m) counting as 0.
inline cfloat interp(const cfloat* proj, ll m, float p) {
    const float fl = std::floor(p);
    const ll i = static_cast<ll>(fl);
    const float f = p - fl;
    if (i >= 0 && i + 1 < m) return proj[i] * (1.f - f) + proj[i + 1] * f;
    if (i == -1) return proj[0] * f;
    if (i == m - 1) return proj[m - 1] * (1.f - f);
    return cfloat(0.f, 0.f);
}

// exp(2 pi i phi), phi in cycles, reduced to [-1/2, 1/2] first (phi reaches tens of cycles for an
// asymmetric echo).
inline cfloat cis(double phi) {
    const double f = 2.0 * 3.14159265358979323846 * (phi - std::nearbyint(phi));
    return cfloat(static_cast<float>(std::cos(f)), static_cast<float>(std::sin(f)));
}

// Plain complex product: std::complex's operator* checks for inf/nan (a libgcc call per product
// without -ffast-math), which would dominate the inner loop.
inline cfloat cmul(cfloat u, cfloat v) {
    return cfloat(u.real() * v.real() - u.imag() * v.imag(), u.real() * v.imag() + u.imag() * v.real());
}

// Adds spoke `row` read at p = base + (xs + i) a to acc[0, len), times the shift phase when kPhase
// (z: the phase of pixel 0 of the chunk, step: its change per pixel).
template <bool kPhase>
inline void add_spoke(const cfloat* row, ll m, float base, float xs, float a, ll len, cfloat z, cfloat step,
                      cfloat* acc) {
    // p is linear in the pixel, so when both ends of the chunk read inside [0, m - 1) every pixel
    // does: no bounds tests, and truncation is floor (p >= 0). Projections span 1 / dk >= 1 FOV, so
    // that is almost every chunk.
    const float p_first = base + xs * a, p_last = base + (xs + static_cast<float>(len - 1)) * a;
    const float lim = static_cast<float>(m - 1);
    // The clamp keeps floor(p) <= m - 2 should rounding carry a pixel between the ends an ulp past
    // them (p = m - 1 would read row[m]).
    const float top = std::nextafter(lim, 0.f);
    if (std::min(p_first, p_last) >= 0.f && std::max(p_first, p_last) < lim) {
        for (ll i = 0; i < len; ++i) {
            const float p = std::min(base + (xs + static_cast<float>(i)) * a, top);
            const ll k = static_cast<ll>(p);
            const float f = p - static_cast<float>(k);
            const cfloat v = row[k] * (1.f - f) + row[k + 1] * f;
            if constexpr (kPhase) {
                acc[i] += cmul(v, z);
                z = cmul(z, step);
            } else {
                acc[i] += v;
            }
        }
    } else {
        for (ll i = 0; i < len; ++i) {
            const cfloat v = interp(row, m, base + (xs + static_cast<float>(i)) * a);
            if constexpr (kPhase) {
                acc[i] += cmul(v, z);
                z = cmul(z, step);
            } else {
                acc[i] += v;
            }
        }
    }
}

}  // namespace

void radial_backproject(const CArray& proj, const RArray& steps, const FbpGeometry& g, FbpOutput mode, CArray& out) {
    const ll need_out = g.n0 * g.n1 * (mode == FbpOutput::Coils ? g.coils : 1);
    if (static_cast<ll>(proj.size()) != g.samples * g.spokes * g.coils || static_cast<ll>(steps.size()) != 4 * g.spokes ||
        static_cast<ll>(out.size()) != need_out)
        throw std::invalid_argument("cpu::radial_backproject: sizes of proj " + proj.shape().str() + ", steps " +
                                    steps.shape().str() + ", out " + out.shape().str() + " do not fit the geometry");
    const cfloat* pr = proj.data();
    const float* st = steps.data();
    cfloat* o = out.data();
    const ll m = g.samples, half = g.samples / 2;
    const ll chunks = (g.n0 + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) collapse(2)
    for (ll n1 = 0; n1 < g.n1; ++n1) {
        for (ll ch = 0; ch < chunks; ++ch) {
            const ll x0 = ch * kChunk, len = std::min(kChunk, g.n0 - x0);
            const float y = static_cast<float>(n1 - g.n1 / 2);
            float ss[kChunk] = {};
            for (ll c = 0; c < g.coils; ++c) {
                cfloat acc[kChunk] = {};
                for (ll j = 0; j < g.spokes; ++j) {
                    const float a = st[4 * j], b = st[4 * j + 1], pc = st[4 * j + 2], pd = st[4 * j + 3];
                    const float base = static_cast<float>(half) + y * b;
                    const cfloat* row = pr + (c * g.spokes + j) * m;
                    const float xs = static_cast<float>(x0 - g.n0 / 2);
                    if (!g.phased || (pc == 0.f && pd == 0.f)) {
                        add_spoke<false>(row, m, base, xs, a, len, cfloat(1.f, 0.f), cfloat(1.f, 0.f), acc);
                    } else {
                        const cfloat z = cis(double(xs) * double(pc) + double(y) * double(pd)), step = cis(pc);
                        add_spoke<true>(row, m, base, xs, a, len, z, step, acc);
                    }
                }
                if (mode == FbpOutput::Coils) {
                    cfloat* dst = o + (c * g.n1 + n1) * g.n0 + x0;
                    for (ll i = 0; i < len; ++i) dst[i] = acc[i];
                } else {
                    for (ll i = 0; i < len; ++i) ss[i] += std::norm(acc[i]);
                }
            }
            if (mode == FbpOutput::Rss) {
                cfloat* dst = o + n1 * g.n0 + x0;
                for (ll i = 0; i < len; ++i) dst[i] = cfloat(std::sqrt(ss[i]), 0.f);
            }
        }
    }
}

}  // namespace larmor::cpu
