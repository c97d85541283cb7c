#include "cuda/fft_layout.h"

#include <cmath>

namespace larmor::cuda {

bool has_odd_axis(const Shape& shape, AxisMask live) {
    for (int a = 0; a < shape.rank(); ++a)
        if ((live & (1u << a)) && shape[a] % 2 == 1) return true;
    return false;
}

std::vector<FftRunLayout> fft_layout(const Shape& shape, AxisMask live, FFTDirection dir) {
    std::vector<FftRunLayout> runs;
    const bool wide = shape.size() > 0xffffffffull;
    int a = 0;
    while (a < shape.rank()) {
        if (!(live & (1u << a))) {
            ++a;
            continue;
        }
        int b = a;  // run a..b, at most 3 axes
        while (b + 1 < shape.rank() && (live & (1u << (b + 1))) && b - a < 2) ++b;
        const long long inner = static_cast<long long>(shape.stride(a));
        long long run = 1;
        for (int k = a; k <= b; ++k) run *= static_cast<long long>(shape[k]);
        const long long outer = static_cast<long long>(shape.size()) / (inner * run);

        FftRunLayout r;
        for (int k = b; k >= a; --k) r.n.push_back(static_cast<long long>(shape[k]));
        r.stride = inner;
        if (inner == 1) {  // contiguous transforms, batched over everything above
            r.dist = run;
            r.batch = outer;
            r.execs = 1;
            r.step = 0;
        } else if (outer <= inner) {  // batch over the inner axes (neighbouring transforms interleave)
            r.dist = 1;
            r.batch = inner;
            r.execs = outer;
            r.step = inner * run;
        } else {  // batch over the outer axes, loop over the inner offset
            r.dist = inner * run;
            r.batch = outer;
            r.execs = inner;
            r.step = 1;
        }
        // Every exec pointer sits at an offset that is a multiple of stride(b+1) plus an inner index
        // below stride(a), and the inner index is either part of `offset` (< stride(a)) or removed
        // from it, so (offset / stride(k)) % n(k) is the index along axis k in all three cases. The
        // shifted load moves only along the run's own axes, within the same transform, so the offset
        // it reads is valid from the same exec pointer too.
        r.callbacks.dir = dir;
        r.callbacks.scale = 1.0 / std::sqrt(static_cast<double>(run));
        r.callbacks.wide = wide;
        for (int k = a; k <= b; ++k)
            r.callbacks.axes.push_back({static_cast<unsigned long long>(shape.stride(k)),
                                        static_cast<unsigned long long>(shape[k])});
        runs.push_back(std::move(r));
        a = b + 1;
    }
    return runs;
}

StridedLayout strided_layout(const Shape& shape, AxisMask live, FFTDirection dir) {
    StridedLayout out;
    const int rank = shape.rank();
    if (rank > kStridedMaxRank || shape.size() == 0) return out;
    bool any = false;
    double n_total = 1;
    for (int a = 0; a < rank; ++a) {
        if (!(live & (1u << a))) continue;
        const long long n = static_cast<long long>(shape[a]);
        n_total *= static_cast<double>(n);
        if (a == 0) {
            if (n % 2 != 0) return out;
            continue;
        }
        if (n < 2 || n > kStridedMaxN || (n & (n - 1)) != 0) return out;
        // blocks of one launch: ceil(inner / 8) tiles (the narrowest tile) x outer
        const long long inner = static_cast<long long>(shape.stride(a));
        const long long outer = static_cast<long long>(shape.size()) / (inner * n);
        if (static_cast<double>((inner + 7) / 8) * static_cast<double>(outer) > 2147483647.0) return out;
        any = true;
    }
    if (!any) return out;
    for (int a = rank - 1; a >= 1; --a) {
        if (!(live & (1u << a))) continue;
        StridedFftArgs p;
        p.n = static_cast<long long>(shape[a]);
        p.inner = static_cast<long long>(shape.stride(a));
        p.outer = static_cast<long long>(shape.size()) / (p.inner * p.n);
        p.sign = dir == FFTDirection::Forward ? -1 : 1;
        p.shift = out.passes.empty() ? 1 : 0;
        p.scale = p.shift ? static_cast<float>(1.0 / std::sqrt(n_total)) : 1.f;
        if (p.shift) {
            for (int k = 0; k < a; ++k) {
                p.below_n[p.below_rank] = static_cast<long long>(shape[k]);
                if (live & (1u << k)) p.below_live |= 1u << p.below_rank;
                ++p.below_rank;
            }
            for (int k = a + 1; k < rank; ++k) {
                p.above_n[p.above_rank] = static_cast<long long>(shape[k]);
                if (live & (1u << k)) p.above_live |= 1u << p.above_rank;
                ++p.above_rank;
            }
        }
        out.passes.push_back(p);
    }
    if (live & 1u) {
        out.x_pass = true;
        const long long x = static_cast<long long>(shape[0]);
        out.x_run.n = {x};
        out.x_run.stride = 1;
        out.x_run.dist = x;
        out.x_run.batch = static_cast<long long>(shape.size()) / x;
        out.x_run.execs = 1;
        out.x_run.step = 0;
        out.x_run.callbacks.dir = dir;
    }
    out.ok = true;
    return out;
}

}  // namespace larmor::cuda
