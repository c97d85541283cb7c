// The SPIRiT operator's CUDA kernel in a build without nvcc (core/CMakeLists.txt drops this file when
// cuda/ is compiled).
#include "core/linops/spirit_kernels.h"
#include "core/no_cuda.h"

namespace larmor::cuda {

void spirit_apply(Backend&, const CArray&, const CArray&, CArray&, size_t, size_t, float) { throw_no_cuda("spirit_apply"); }

}  // namespace larmor::cuda
