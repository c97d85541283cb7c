// CPU kernel of the SPIRiT consistency operator: tiles of pixels (OpenMP over tiles), so that the
// inner loop runs over contiguous pixels of one matrix entry. A tile's coil vectors are first copied to
// the thread's own buffer, where they stay in L1 while every output coil reads them, and so that `out`
// may be `in` (the POCS step in place).
#include <omp.h>

#include <algorithm>
#include <complex>
#include <vector>

#include "core/linops/spirit_kernels.h"

namespace larmor::cpu {

void spirit_apply(const CArray& m, const CArray& in, CArray& out, size_t pixels, size_t coils, float self) {
    constexpr size_t kTile = 64;
    const cfloat* mp = m.data();
    const cfloat* x = in.data();
    cfloat* y = out.data();
    const long long tiles = static_cast<long long>((pixels + kTile - 1) / kTile);
#pragma omp parallel
    {
        std::vector<cfloat> stage(kTile * coils);
#pragma omp for schedule(static)
        for (long long t = 0; t < tiles; ++t) {
            const size_t p0 = size_t(t) * kTile, len = std::min(kTile, pixels - p0);
            for (size_t c = 0; c < coils; ++c) std::copy_n(x + p0 + pixels * c, len, stage.data() + kTile * c);
            // Real and imaginary parts apart: the loops vectorise, and std::complex's operator* (C99 Annex
            // G NaN handling, a library call per product without -ffast-math) is not on the path.
            float re[kTile], im[kTile];
            for (size_t o = 0; o < coils; ++o) {
                const cfloat* xo = stage.data() + kTile * o;
                for (size_t q = 0; q < len; ++q) re[q] = self * xo[q].real(), im[q] = self * xo[q].imag();
                for (size_t c = 0; c < coils; ++c) {
                    const float* mc = reinterpret_cast<const float*>(mp + p0 + pixels * (c + coils * o));
                    const float* xc = reinterpret_cast<const float*>(stage.data() + kTile * c);
                    for (size_t q = 0; q < len; ++q) {
                        const float ar = mc[2 * q], ai = mc[2 * q + 1], br = xc[2 * q], bi = xc[2 * q + 1];
                        re[q] += ar * br - ai * bi;
                        im[q] += ar * bi + ai * br;
                    }
                }
                cfloat* yo = y + p0 + pixels * o;
                for (size_t q = 0; q < len; ++q) yo[q] = cfloat(re[q], im[q]);
            }
        }
    }
}

}  // namespace larmor::cpu
