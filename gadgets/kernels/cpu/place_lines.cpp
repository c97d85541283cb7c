// Batch of processed readout lines into the k-space buffer (kernels::place_lines, and
// kernels::mix_place_lines with the coil mixing on the way).
#include <algorithm>
#include <vector>

#include "gadgets/kernels/cpu/cpu_kernels.h"

namespace larmor::kernels::cpu {

void place_lines(const CArray& src, const std::vector<LinePlacement>& where, CArray& dst, size_t l, size_t k,
                 size_t e, size_t c, int threads) {
    const cfloat* s = src.data();
    cfloat* d = dst.data();
    const long long jobs = static_cast<long long>(where.size() * c);
#pragma omp parallel for num_threads(threads) schedule(static) if (jobs * static_cast<long long>(l) > 65536)
    for (long long j = 0; j < jobs; ++j) {
        const size_t p = static_cast<size_t>(j) % where.size(), ch = static_cast<size_t>(j) / where.size();
        const LinePlacement& w = where[p];
        const cfloat* in = s + (ch * k + p) * l;
        cfloat* out = d + (ch * e + w.line) * l;
        if (w.keep == 0.f) {
            for (size_t i = 0; i < l; ++i) out[i] = w.scale * in[i];
        } else {
            for (size_t i = 0; i < l; ++i) out[i] = w.keep * out[i] + w.scale * in[i];
        }
    }
}

void mix_place_lines(const CArray& src, const std::vector<cfloat>& m, const std::vector<LinePlacement>& where,
                     CArray& dst, size_t l, size_t k, size_t e, size_t d, size_t c, int threads) {
    const cfloat* s = src.data();
    cfloat* out_base = dst.data();
    const long long jobs = static_cast<long long>(where.size() * c);
#pragma omp parallel num_threads(threads) if (jobs * static_cast<long long>(l * (d + 1)) > 65536)
    {
        std::vector<float> re(l), im(l);
#pragma omp for schedule(static)
        for (long long j = 0; j < jobs; ++j) {
            const size_t p = static_cast<size_t>(j) % where.size(), ch = static_cast<size_t>(j) / where.size();
            std::fill(re.begin(), re.end(), 0.f);
            std::fill(im.begin(), im.end(), 0.f);
            // Channels in order, one product at a time (real arithmetic: std::complex's operator*
            // would check for infinities on every product).
            for (size_t dd = 0; dd < d; ++dd) {
                const float mr = m[ch * d + dd].real(), mi = m[ch * d + dd].imag();
                const cfloat* in = s + (dd * k + p) * l;
                for (size_t i = 0; i < l; ++i) {
                    const float xr = in[i].real(), xi = in[i].imag();
                    re[i] += mr * xr - mi * xi;
                    im[i] += mr * xi + mi * xr;
                }
            }
            const LinePlacement& w = where[p];
            cfloat* out = out_base + (ch * e + w.line) * l;
            if (w.keep == 0.f) {
                for (size_t i = 0; i < l; ++i) out[i] = cfloat(w.scale * re[i], w.scale * im[i]);
            } else {
                for (size_t i = 0; i < l; ++i)
                    out[i] = cfloat(w.keep * out[i].real() + w.scale * re[i], w.keep * out[i].imag() + w.scale * im[i]);
            }
        }
    }
}

}  // namespace larmor::kernels::cpu
