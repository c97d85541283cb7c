// The CUDA side of the gadget kernels in a build without nvcc: no CUDA backend can exist there, so
// reaching these means a caller passed a CUDA array anyway; refuse clearly.
#include <string>

#include "gadgets/kernels/cuda/cuda_kernels.h"
#include "core/no_cuda.h"

namespace larmor::kernels::cuda {
void place_lines(Backend&, const CArray&, const std::vector<LinePlacement>&, CArray&, const checks::PlaceDims&) {
    throw_no_cuda("place_lines");
}
void mix_place_lines(Backend&, const CArray&, const CArray&, const std::vector<LinePlacement>&, CArray&,
                     const checks::MixPlaceDims&) {
    throw_no_cuda("mix_place_lines");
}
void mix_last_axis(Backend&, const CArray&, const std::vector<cfloat>&, CArray&, const checks::MixDims&) {
    throw_no_cuda("mix_last_axis");
}

}  // namespace larmor::kernels::cuda
