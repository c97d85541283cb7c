// The dense layer's CUDA implementation in a build without nvcc (core/CMakeLists.txt drops this file
// when cuda/ is compiled): a clear refusal; no CUDA backend can exist in such a build anyway.
#include <string>

#include "core/dense/dense_kernels.h"
#include "core/no_cuda.h"

namespace larmor::dense::cuda {
void hermitian_eig(Backend&, const CArray&, RArray&, CArray&, size_t, size_t) { throw_no_cuda("dense::hermitian_eig"); }
void cholesky_solve(Backend&, const CArray&, CArray&, size_t, size_t, size_t) { throw_no_cuda("dense::cholesky_solve"); }
void svd(Backend&, const CArray&, RArray&, CArray&, CArray&, size_t, size_t, size_t) { throw_no_cuda("dense::svd"); }
void gram(Backend&, const CArray&, CArray&, size_t, size_t, size_t) { throw_no_cuda("dense::gram"); }

}  // namespace larmor::dense::cuda
