// ESPIRiT's CUDA step in a build without nvcc (core/CMakeLists.txt drops this file when cuda/ is
// compiled): a clear refusal; no CUDA backend can exist in such a build anyway.
#include <stdexcept>

#include "core/coils/espirit_kernels.h"

namespace larmor::coils::cuda {

void espirit_eigenvectors(Backend&, const CArray&, const CArray&, const CArray&, const CArray&, CArray&, RArray&,
                          const EspiritPixelProblem&) {
    throw std::runtime_error("espirit_eigenvectors: this Larmor build has no CUDA backend (built without nvcc)");
}

}  // namespace larmor::coils::cuda
