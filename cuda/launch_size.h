#pragma once
// Grid size of the grid-stride kernels of the CUDA backend: enough blocks of `threads` to cover
// `work` elements, at least one, at most `cap` (each thread then loops over the rest).
#include <algorithm>

namespace larmor::cuda {

inline unsigned grid_stride_blocks(long long work, int threads, long long cap = 1 << 20) {
    return static_cast<unsigned>(std::max(1LL, std::min((work + threads - 1) / threads, cap)));
}

}  // namespace larmor::cuda
