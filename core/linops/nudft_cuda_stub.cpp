// The exact NUDFT's CUDA kernels in a build without nvcc (core/CMakeLists.txt drops this file when
// cuda/ is compiled): a clear refusal; no CUDA backend can exist in such a build anyway.
#include <string>

#include "core/linops/nudft_kernels.h"
#include "core/no_cuda.h"

namespace larmor::cuda {
std::vector<NudftAdjointLaunch> nudft_adjoint_launches() { return {}; }
void nudft_adjoint(Backend&, const RArray&, const CArray&, CArray&, const NudftGeometry&, NudftAdjointLaunch) {
    throw_no_cuda("nudft_adjoint");
}
void nudft_forward(Backend&, const RArray&, const CArray&, CArray&, const NudftGeometry&) { throw_no_cuda("nudft_forward"); }

}  // namespace larmor::cuda
