// The CUDA backprojection of a build without nvcc (core/CMakeLists.txt drops this file when cuda/ is
// compiled): a CUDA backend cannot exist in such a build, so reaching this is a clear refusal.
#include <stdexcept>

#include "core/recon/radial_fbp_kernels.h"

namespace larmor::cuda {

void radial_backproject(Backend&, const CArray&, const RArray&, const FbpGeometry&, FbpOutput, CArray&) {
    throw std::runtime_error("radial_backproject: this Larmor build has no CUDA backend (built without nvcc)");
}

}  // namespace larmor::cuda
