// The dense layer's Gram matrices on CUDA through cuBLAS (core/dense/dense_kernels.h), on the
// session's stream with a pooled handle (cuda/dense_handles.h):
//   one matrix   cublasCherk: the lower triangle of a^H a, half of a full product's work;
//   a batch      cublasCgemmStridedBatched (cuBLAS has no batched herk): the whole batch in one call,
//                both triangles computed.
// Either way a kernel then writes the upper triangle as the exact conjugate of the lower and zeroes
// the diagonal's imaginary parts (cuda/dense_kernels.h), so g is exactly Hermitian as the CPU twin's.
// cuBLAS gets its workspace from the backend (cublasSetWorkspace), charged to the session's budget:
// cuBLAS's recommended size, 32 MiB on Hopper and later, 4 MiB before (cuBLAS documentation,
// "cublasSetWorkspace()").
#include <string>

#include "core/dense/dense_kernels.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/cuda_libraries.h"
#include "cuda/dense_check.h"
#include "cuda/dense_device.h"
#include "cuda/dense_handles.h"
#include "cuda/dense_kernels.h"
#include "cuda/device_context.h"

namespace larmor::dense::cuda {
namespace {

size_t workspace_bytes(int device, const std::string& ctx) {
    int major = 0;
    LARMOR_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), ctx);
    return major >= 9 ? size_t{32} << 20 : size_t{4} << 20;
}

}  // namespace

void gram(Backend& be, const CArray& a, CArray& g, size_t m, size_t n, size_t batch) {
    const char* op = "gram";
    larmor::cuda::check_on_backend(be, a, op, "a");
    larmor::cuda::check_on_backend(be, g, op, "g");
    const std::string ctx = detail::call_context(be, op, a);
    const int device = larmor::cuda::backend_device(be);
    larmor::cuda::DeviceGuard guard(device);
    const larmor::cuda::CublasLibrary& lib = larmor::cuda::cublas_library();
    const cudaStream_t stream = larmor::cuda::backend_stream(be);
    const larmor::cuda::BlasHandle h(device, stream);
    const size_t ws_bytes = workspace_bytes(device, ctx);
    CArray ws = be.empty({ws_bytes / sizeof(cfloat)});
    LARMOR_CUBLAS_CHECK(lib.set_workspace(h.get(), ws.data(), ws_bytes), ctx);
    const int mi = static_cast<int>(m), ni = static_cast<int>(n);  // checked to fit (core/dense/dense.cpp)
    const float2* x = detail::dev(a);
    float2* y = detail::dev(g);
    if (batch == 1) {
        const float one = 1.f, zero = 0.f;
        LARMOR_CUBLAS_CHECK(lib.cherk(h.get(), CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_C, ni, mi, &one, x, mi, &zero, y, ni),
                            ctx);
    } else {
        const cuComplex one = make_cuComplex(1.f, 0.f), zero = make_cuComplex(0.f, 0.f);
        LARMOR_CUBLAS_CHECK(lib.cgemm_strided_batched(h.get(), CUBLAS_OP_C, CUBLAS_OP_N, ni, ni, mi, &one, x, mi,
                                                      static_cast<long long>(m * n), x, mi,
                                                      static_cast<long long>(m * n), &zero, y, ni,
                                                      static_cast<long long>(n * n), static_cast<int>(batch)),
                            ctx);
    }
    larmor::cuda::launch_hermitian_from_lower(y, ni, static_cast<long long>(batch), stream);
}

}  // namespace larmor::dense::cuda
