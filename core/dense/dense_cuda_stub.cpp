// The dense layer's CUDA implementation in a build without nvcc (core/CMakeLists.txt drops this file
// when cuda/ is compiled): a clear refusal; no CUDA backend can exist in such a build anyway.
#include <stdexcept>
#include <string>

#include "core/dense/dense_kernels.h"

namespace larmor::dense::cuda {
namespace {
[[noreturn]] void no_cuda(const char* what) {
    throw std::runtime_error(std::string("dense::") + what +
                             ": this Larmor build has no CUDA backend (built without nvcc), so no cuSOLVER or cuBLAS");
}
}  // namespace

void hermitian_eig(Backend&, const CArray&, RArray&, CArray&, size_t, size_t) { no_cuda("hermitian_eig"); }
void cholesky_solve(Backend&, const CArray&, CArray&, size_t, size_t, size_t) { no_cuda("cholesky_solve"); }
void svd(Backend&, const CArray&, RArray&, CArray&, CArray&, size_t, size_t, size_t) { no_cuda("svd"); }
void gram(Backend&, const CArray&, CArray&, size_t, size_t, size_t) { no_cuda("gram"); }

}  // namespace larmor::dense::cuda
