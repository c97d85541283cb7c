// The CUDA backprojection of a build without nvcc (core/CMakeLists.txt drops this file when cuda/ is
// compiled): a CUDA backend cannot exist in such a build, so reaching this is a clear refusal.
#include "core/recon/radial_fbp_kernels.h"
#include "core/no_cuda.h"

namespace larmor::cuda {

void radial_backproject(Backend&, const CArray&, const RArray&, const FbpGeometry&, FbpOutput, CArray&) {
    throw_no_cuda("radial_backproject");
}

}  // namespace larmor::cuda
