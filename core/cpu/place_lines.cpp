// Batch of processed readout lines into the k-space buffer (Backend::place_lines).
#include "core/cpu/cpu_ops.h"

namespace larmor::cpu {

void place_lines(const CArray& src, const std::vector<Backend::LinePlacement>& where, CArray& dst, size_t l, size_t k,
                 size_t e, size_t c, int threads) {
    const cfloat* s = src.data();
    cfloat* d = dst.data();
    const long long jobs = static_cast<long long>(where.size() * c);
#pragma omp parallel for num_threads(threads) schedule(static) if (jobs * static_cast<long long>(l) > 65536)
    for (long long j = 0; j < jobs; ++j) {
        const size_t p = static_cast<size_t>(j) % where.size(), ch = static_cast<size_t>(j) / where.size();
        const Backend::LinePlacement& w = where[p];
        const cfloat* in = s + (ch * k + p) * l;
        cfloat* out = d + (ch * e + w.line) * l;
        if (w.keep == 0.f) {
            for (size_t i = 0; i < l; ++i) out[i] = w.scale * in[i];
        } else {
            for (size_t i = 0; i < l; ++i) out[i] = w.keep * out[i] + w.scale * in[i];
        }
    }
}

}  // namespace larmor::cpu
