// CPU kernels of the finite-difference operator: each output element reads its two neighbours, so
// the loops are independent per element (OpenMP over all of them).
#include <omp.h>

#include "core/linops/finite_difference_kernels.h"

namespace larmor::cpu {
namespace {

using ll = long long;

// Index of the neighbour of i at +step (step = +1 or -1) along an axis of extent n and stride s.
inline size_t neighbour(size_t i, size_t n, size_t s, int step) {
    const size_t c = (i / s) % n;
    if (step > 0) return c + 1 == n ? i - c * s : i + s;
    return c == 0 ? i + (n - 1) * s : i - s;
}

}  // namespace

void finite_difference_forward(const CArray& x, CArray& y, const DiffGeometry& g) {
    const size_t n = g.shape.size();
    const cfloat* in = x.data();
    cfloat* out = y.data();
    for (size_t k = 0; k < g.axes.size(); ++k) {
        const size_t len = g.shape[g.axes[k]], s = g.shape.stride(g.axes[k]);
#pragma omp parallel for schedule(static)
        for (ll i = 0; i < ll(n); ++i) out[k * n + size_t(i)] = in[neighbour(size_t(i), len, s, +1)] - in[i];
    }
}

void finite_difference_adjoint(const CArray& y, CArray& x, const DiffGeometry& g) {
    const size_t n = g.shape.size();
    const cfloat* in = y.data();
    cfloat* out = x.data();
#pragma omp parallel for schedule(static)
    for (ll i = 0; i < ll(n); ++i) {
        cfloat acc(0.f, 0.f);
        for (size_t k = 0; k < g.axes.size(); ++k) {
            const size_t len = g.shape[g.axes[k]], s = g.shape.stride(g.axes[k]);
            acc += in[k * n + neighbour(size_t(i), len, s, -1)] - in[k * n + size_t(i)];
        }
        out[i] = acc;
    }
}

}  // namespace larmor::cpu
