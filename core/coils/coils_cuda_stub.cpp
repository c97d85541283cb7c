// The CUDA side of the coil kernels in a build without nvcc (core/CMakeLists.txt drops this file when
// cuda/ is compiled): no CUDA backend can exist there, so reaching these means a caller passed a CUDA
// array anyway; refuse clearly.
#include <string>

#include "core/coils/coil_kernels.h"
#include "core/no_cuda.h"

namespace larmor::coils::cuda {
void rss_last_axis(Backend&, const CArray&, CArray&) { throw_no_cuda("rss_last_axis"); }
void combine_last_axis(Backend&, const CArray&, const CArray&, CArray&) { throw_no_cuda("combine_last_axis"); }
void walsh_sensitivities(Backend&, const CArray&, int, int, CArray&) { throw_no_cuda("walsh_sensitivities"); }
void walsh_combine(Backend&, const CArray&, int, int, CArray&) { throw_no_cuda("walsh_combine"); }

}  // namespace larmor::coils::cuda
