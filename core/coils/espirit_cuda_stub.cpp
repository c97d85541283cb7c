// ESPIRiT's CUDA step in a build without nvcc (core/CMakeLists.txt drops this file when cuda/ is
// compiled): a clear refusal; no CUDA backend can exist in such a build anyway.
#include "core/coils/espirit_kernels.h"
#include "core/no_cuda.h"

namespace larmor::coils::cuda {

void espirit_eigenvectors(Backend&, const CArray&, const CArray&, const CArray&, const CArray&, CArray&, RArray&,
                          const EspiritPixelProblem&) {
    throw_no_cuda("espirit_eigenvectors");
}

}  // namespace larmor::coils::cuda
