// The wavelet's CUDA kernels in a build without nvcc (core/CMakeLists.txt drops this file when cuda/
// is compiled).
#include "core/linops/wavelet_kernels.h"
#include "core/no_cuda.h"

namespace larmor::cuda {

void wavelet_pass(Backend&, const CArray&, CArray&, const Shape&, int, bool, size_t) { throw_no_cuda("wavelet_pass"); }
void wavelet_threshold(Backend&, float, const CArray&, CArray&, size_t, const Shape&) {
    throw_no_cuda("wavelet_threshold");
}

}  // namespace larmor::cuda
