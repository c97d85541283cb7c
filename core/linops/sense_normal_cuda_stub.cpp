// The fused CG-SENSE normal operator's CUDA kernel in a build without nvcc (core/CMakeLists.txt drops
// this file when cuda/ is compiled).
#include "core/linops/sense_normal_kernels.h"
#include "core/no_cuda.h"

namespace larmor::cuda {

bool sense_normal_supports(size_t) { return false; }
void sense_normal_apply(Backend&, const CArray&, const RArray&, const CArray&, CArray&, size_t, size_t, size_t, float) {
    throw_no_cuda("sense_normal_apply");
}
void sense_normal_apply_cg(Backend&, const CArray&, const RArray&, const CArray&, CArray&, CArray&, size_t, size_t,
                           size_t, float) {
    throw_no_cuda("sense_normal_apply_cg");
}

}  // namespace larmor::cuda
