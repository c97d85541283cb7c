// Reductions over the coil (last) axis: root-sum-of-squares and the sensitivity-weighted combination
// y = sum_c conj(s_c) x_c / sum_c |s_c|^2 (Roemer et al., MRM 16:192, 1990, with maps from Walsh).
// Pixels are processed in blocks so that the inner loop runs contiguously along x for every coil.
#include <algorithm>
#include <cmath>

#include "core/coils/coil_kernels.h"

namespace larmor::coils::cpu {
namespace {
constexpr long long kBlock = 512;
}

void rss_last_axis(const CArray& x, CArray& y, int threads) {
    const long long pixels = static_cast<long long>(y.size());
    const long long coils = pixels ? static_cast<long long>(x.size()) / pixels : 0;
    const cfloat* in = x.data();
    cfloat* out = y.data();
    const long long blocks = (pixels + kBlock - 1) / kBlock;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long b = 0; b < blocks; ++b) {
        const long long p0 = b * kBlock, n = std::min(kBlock, pixels - p0);
        float acc[kBlock] = {};
        for (long long c = 0; c < coils; ++c) {
            const cfloat* xc = in + c * pixels + p0;
            for (long long i = 0; i < n; ++i) acc[i] += xc[i].real() * xc[i].real() + xc[i].imag() * xc[i].imag();
        }
        for (long long i = 0; i < n; ++i) out[p0 + i] = cfloat(std::sqrt(acc[i]), 0.f);
    }
}

void combine_last_axis(const CArray& x, const CArray& maps, CArray& y, int threads) {
    const long long pixels = static_cast<long long>(y.size());
    const long long coils = pixels ? static_cast<long long>(x.size()) / pixels : 0;
    const cfloat* in = x.data();
    const cfloat* s = maps.data();
    cfloat* out = y.data();
    const long long blocks = (pixels + kBlock - 1) / kBlock;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long b = 0; b < blocks; ++b) {
        const long long p0 = b * kBlock, n = std::min(kBlock, pixels - p0);
        float re[kBlock] = {}, im[kBlock] = {}, nrm[kBlock] = {};
        for (long long c = 0; c < coils; ++c) {
            const cfloat* xc = in + c * pixels + p0;
            const cfloat* sc = s + c * pixels + p0;
            for (long long i = 0; i < n; ++i) {
                // conj(s) * x
                re[i] += sc[i].real() * xc[i].real() + sc[i].imag() * xc[i].imag();
                im[i] += sc[i].real() * xc[i].imag() - sc[i].imag() * xc[i].real();
                nrm[i] += sc[i].real() * sc[i].real() + sc[i].imag() * sc[i].imag();
            }
        }
        for (long long i = 0; i < n; ++i)
            out[p0 + i] = nrm[i] > 0.f ? cfloat(re[i] / nrm[i], im[i] / nrm[i]) : cfloat(0.f, 0.f);
    }
}

}  // namespace larmor::coils::cpu
