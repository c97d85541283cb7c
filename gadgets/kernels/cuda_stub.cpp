// The CUDA side of the gadget kernels in a build without nvcc: no CUDA backend can exist there, so
// reaching these means a caller passed a CUDA array anyway; refuse clearly.
#include <stdexcept>
#include <string>

#include "gadgets/kernels/cuda/cuda_kernels.h"

namespace larmor::kernels::cuda {
namespace {
[[noreturn]] void no_cuda(const char* what) {
    throw std::runtime_error(std::string(what) + ": this Larmor build has no CUDA backend (built without nvcc)");
}
}  // namespace

void place_lines(Backend&, const CArray&, const std::vector<LinePlacement>&, CArray&, const checks::PlaceDims&) {
    no_cuda("place_lines");
}
void mix_place_lines(Backend&, const CArray&, const CArray&, const std::vector<LinePlacement>&, CArray&,
                     const checks::MixPlaceDims&) {
    no_cuda("mix_place_lines");
}
void mix_last_axis(Backend&, const CArray&, const std::vector<cfloat>&, CArray&, const checks::MixDims&) {
    no_cuda("mix_last_axis");
}

}  // namespace larmor::kernels::cuda
