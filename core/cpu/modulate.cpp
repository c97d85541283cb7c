// Centring modulation (centring.h) applied in one pass over the array (out may be in: in place; else
// the pass is also the copy of an out-of-place transform's input): rows along x are independent,
// so each thread takes whole rows and forms the product of the other axes' factors once per row.
#include <omp.h>

#include "core/cpu/cpu_ops.h"

namespace larmor::cpu {

void modulate(const cfloat* in, cfloat* out, const Shape& s, const std::vector<std::vector<cfloat>>& tables, int threads) {
    const int rank = s.rank();
    if (rank == 0 || s.size() == 0) return;
    const size_t nx = s[0];
    const long long rows = static_cast<long long>(s.size() / nx);
    const std::vector<cfloat>& tx = tables[0];
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long r = 0; r < rows; ++r) {
        cfloat f(1.f, 0.f);
        size_t rem = static_cast<size_t>(r);
        for (int a = 1; a < rank; ++a) {
            const size_t i = rem % s[a];
            rem /= s[a];
            if (!tables[static_cast<size_t>(a)].empty()) f *= tables[static_cast<size_t>(a)][i];
        }
        const cfloat* src = in + static_cast<size_t>(r) * nx;
        cfloat* row = out + static_cast<size_t>(r) * nx;
        for (size_t x = 0; x < nx; ++x) {
            const cfloat w = tx.empty() ? f : f * tx[x];
            const float re = src[x].real() * w.real() - src[x].imag() * w.imag();
            const float im = src[x].real() * w.imag() + src[x].imag() * w.real();
            row[x] = cfloat(re, im);
        }
    }
}

}  // namespace larmor::cpu
