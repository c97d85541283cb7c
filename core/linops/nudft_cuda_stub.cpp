// The exact NUDFT's CUDA kernels in a build without nvcc (core/CMakeLists.txt drops this file when
// cuda/ is compiled): a clear refusal; no CUDA backend can exist in such a build anyway.
#include <stdexcept>
#include <string>

#include "core/linops/nudft_kernels.h"

namespace larmor::cuda {
namespace {
[[noreturn]] void no_cuda(const char* what) {
    throw std::runtime_error(std::string(what) + ": this Larmor build has no CUDA backend (built without nvcc)");
}
}  // namespace

std::vector<NudftAdjointLaunch> nudft_adjoint_launches() { return {}; }
void nudft_adjoint(Backend&, const RArray&, const CArray&, CArray&, const NudftGeometry&, NudftAdjointLaunch) {
    no_cuda("nudft_adjoint");
}
void nudft_forward(Backend&, const RArray&, const CArray&, CArray&, const NudftGeometry&) { no_cuda("nudft_forward"); }

}  // namespace larmor::cuda
