// Coil mixing as one complex matrix product (OpenBLAS cgemm, threaded by OpenBLAS itself).
// x [..., D] is column-major N x D; m (row-major C x D) read column-major is exactly m^T (D x C), so
// y = x * m^T needs no transposition.
#include <cblas.h>

#include <climits>
#include <stdexcept>
#include <string>

#include "gadgets/kernels/cpu/cpu_kernels.h"

namespace larmor::kernels::cpu {

void mix_last_axis(const CArray& x, const std::vector<cfloat>& m, CArray& y) {
    const Shape& xs = x.shape();
    const size_t d = xs[xs.rank() - 1];
    const size_t c = y.shape()[y.shape().rank() - 1];
    const size_t n = d ? x.size() / d : 0;
    if (n == 0 || c == 0) return;
    if (d == 0) {
        for (size_t i = 0; i < y.size(); ++i) y.data()[i] = cfloat(0.f, 0.f);
        return;
    }
    if (n > static_cast<size_t>(INT_MAX) || d > static_cast<size_t>(INT_MAX) || c > static_cast<size_t>(INT_MAX))
        throw std::invalid_argument("mix_last_axis: x " + xs.str() + " exceeds the 32-bit BLAS index range");
    const cfloat one(1.f, 0.f), zero(0.f, 0.f);
    cblas_cgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n), static_cast<int>(c),
                static_cast<int>(d), &one, x.data(), static_cast<int>(n), m.data(), static_cast<int>(d), &zero,
                y.data(), static_cast<int>(n));
}

}  // namespace larmor::kernels::cpu
