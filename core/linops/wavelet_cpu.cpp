// CPU kernels of the Daubechies-4 wavelet (core/linops/wavelet.h). A pass along axis a > 0 works on
// tiles of up to 64 neighbouring lines (contiguous along x), so each filter tap is a unit-stride
// vector operation over the tile's width and the strided gathers touch whole cache lines; along x a
// tile is one line. Tiles are independent (OpenMP over them).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/linops/wavelet_kernels.h"

namespace larmor::cpu {
namespace {

using ll = long long;
constexpr size_t kTileWidth = 64;

// Filter taps in float, as the arithmetic.
struct Taps {
    float h[4], g[4];
    Taps() {
        for (int k = 0; k < 4; ++k) h[k] = float(Daubechies4::h[k]), g[k] = float(Daubechies4::g[k]);
    }
};

// Forward: out row j < m/2 = sum_k h_k in row (2j + k) mod m; row m/2 + j the same with g.
void analyse(const cfloat* in, cfloat* out, size_t m, size_t w, const Taps& t) {
    const size_t half = m / 2;
    for (size_t j = 0; j < half; ++j) {
        cfloat* lo = out + j * w;
        cfloat* hi = out + (half + j) * w;
        std::fill(lo, lo + w, cfloat(0.f, 0.f));
        std::fill(hi, hi + w, cfloat(0.f, 0.f));
        for (size_t k = 0; k < 4; ++k) {
            const cfloat* r = in + ((2 * j + k) % m) * w;
            for (size_t c = 0; c < w; ++c) lo[c] += t.h[k] * r[c], hi[c] += t.g[k] * r[c];
        }
    }
}

// Inverse (the transpose): row i = sum over the taps k = i mod 2 and k + 2 of h_k low_j + g_k high_j
// with j = (i - k) / 2 mod m/2.
void synthesise(const cfloat* in, cfloat* out, size_t m, size_t w, const Taps& t) {
    const size_t half = m / 2;
    for (size_t i = 0; i < m; ++i) {
        cfloat* o = out + i * w;
        std::fill(o, o + w, cfloat(0.f, 0.f));
        for (size_t k = i % 2; k < 4; k += 2) {
            const size_t j = ((i + m - k) / 2) % half;
            const cfloat* lo = in + j * w;
            const cfloat* hi = in + (half + j) * w;
            for (size_t c = 0; c < w; ++c) o[c] += t.h[k] * lo[c] + t.g[k] * hi[c];
        }
    }
}

}  // namespace

void wavelet_pass(const CArray& src, CArray& dst, const Shape& block, int axis, bool inverse, size_t shift) {
    const Shape& shape = src.shape();
    const size_t m = block[axis], s = shape.stride(axis);
    const size_t w0 = axis == 0 ? 1 : std::min(block[0], kTileWidth);
    const size_t chunks = axis == 0 ? 1 : (block[0] + w0 - 1) / w0;
    // The tile origins: chunks along x (axis > 0) times every index of the other axes of the block.
    std::vector<size_t> ext, str;
    for (int b = 1; b < shape.rank(); ++b)
        if (b != axis) ext.push_back(block[b]), str.push_back(shape.stride(b));
    size_t tiles = chunks;
    for (size_t e : ext) tiles *= e;
    const cfloat* from = src.data();
    cfloat* to = dst.data();
    const Taps taps;
#pragma omp parallel
    {
        std::vector<cfloat> in(m * w0), out(m * w0);
#pragma omp for schedule(static)
        for (ll u = 0; u < ll(tiles); ++u) {
            size_t rest = size_t(u) / chunks;
            const size_t c0 = (size_t(u) % chunks) * w0;
            size_t base = c0;
            for (size_t k = 0; k < ext.size(); ++k) base += (rest % ext[k]) * str[k], rest /= ext[k];
            const size_t w = axis == 0 ? 1 : std::min(w0, block[0] - c0);
            // The whole tile is read before any of it is written, so the pass may run in place.
            const size_t read_shift = inverse ? 0 : shift, write_shift = inverse ? shift : 0;
            for (size_t i = 0; i < m; ++i) std::copy_n(from + base + ((i + read_shift) % m) * s, w, in.data() + i * w);
            if (inverse)
                synthesise(in.data(), out.data(), m, w, taps);
            else
                analyse(in.data(), out.data(), m, w, taps);
            for (size_t i = 0; i < m; ++i) std::copy_n(out.data() + i * w, w, to + base + ((i + write_shift) % m) * s);
        }
    }
}

void wavelet_threshold(float lambda, const CArray& x, CArray& out, size_t joint, const Shape& coarse) {
    const Shape& shape = x.shape();
    const size_t n = x.size() / joint;
    const cfloat* in = x.data();
    cfloat* o = out.data();
#pragma omp parallel for schedule(static)
    for (ll i = 0; i < ll(n); ++i) {
        size_t rest = size_t(i);
        bool low = true;
        for (int a = 0; a < coarse.rank() && low; ++a) {
            low = rest % shape[a] < coarse[a];
            rest /= shape[a];
        }
        double e = 0;
        for (size_t k = 0; k < joint; ++k) e += std::norm(in[size_t(i) + k * n]);
        const float norm = float(std::sqrt(e));
        const float f = low ? 1.f : (norm > lambda ? 1.f - lambda / norm : 0.f);
        for (size_t k = 0; k < joint; ++k) o[size_t(i) + k * n] = f * in[size_t(i) + k * n];
    }
}

}  // namespace larmor::cpu
