// Centred crop / zero-pad: destination index j along an axis of length M reads source index
// j - M/2 + N/2 (N the source length), so the centres N/2 and M/2 coincide; indices outside [0, N)
// are zero.
#include <algorithm>
#include <vector>

#include "core/cpu/cpu_ops.h"

namespace larmor::cpu {

void crop_pad_centred(const CArray& src, CArray& dst, int threads) {
    const Shape& ss = src.shape();
    const Shape& ds = dst.shape();
    const int rank = ds.rank();
    if (dst.size() == 0) return;
    if (rank == 0) {
        dst.data()[0] = src.data()[0];
        return;
    }
    std::vector<long long> shift(static_cast<size_t>(rank));  // src index = dst index + shift
    for (int a = 0; a < rank; ++a)
        shift[static_cast<size_t>(a)] = static_cast<long long>(ss[a] / 2) - static_cast<long long>(ds[a] / 2);
    const long long nx = static_cast<long long>(ds[0]), sx = static_cast<long long>(ss[0]);
    // x range of the destination row that has a source
    const long long x0 = std::max(0LL, -shift[0]), x1 = std::min(nx, sx - shift[0]);
    const long long rows = static_cast<long long>(dst.size() / ds[0]);
    const cfloat* in = src.data();
    cfloat* out = dst.data();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long r = 0; r < rows; ++r) {
        cfloat* row = out + r * nx;
        long long rem = r, soff = 0;
        bool inside = src.size() > 0;
        for (int a = 1; a < rank && inside; ++a) {
            const long long j = rem % static_cast<long long>(ds[a]);
            rem /= static_cast<long long>(ds[a]);
            const long long i = j + shift[static_cast<size_t>(a)];
            if (i < 0 || i >= static_cast<long long>(ss[a]))
                inside = false;
            else
                soff += i * static_cast<long long>(ss.stride(a));
        }
        if (!inside || x0 >= x1) {
            std::fill(row, row + nx, cfloat(0.f, 0.f));
            continue;
        }
        std::fill(row, row + x0, cfloat(0.f, 0.f));
        std::copy(in + soff + x0 + shift[0], in + soff + x1 + shift[0], row + x0);
        std::fill(row + x1, row + nx, cfloat(0.f, 0.f));
    }
}

}  // namespace larmor::cpu
