// The dense layer on CUDA through cuSOLVER (core/dense/dense_kernels.h; gram is in
// cuda/dense_cublas.cpp). Every call runs on the session's stream with a pooled handle
// (cuda/dense_handles.h); workspaces, copies and info flags are backend arrays, so they are charged to
// the session's device budget and freed stream-ordered. Each call ends by reading back the first
// failing info flag (cuda/dense_device.h), which waits for the stream. Routines, by size (cuSOLVER
// documentation, "cuSolverDN: dense LAPACK"):
//
//   hermitian_eig  n <= 32: cusolverDnCheevjBatched, the whole batch in one call (Jacobi; the
//                  routine is documented for n <= 32, one matrix per thread block in shared memory),
//                  sorted ascending. n > 32: cusolverDnCheevd, one call per matrix (Householder
//                  tridiagonalisation on cuBLAS level-3 updates, then divide and conquer).
//                  Why cheevd and not cusolverDnXsyevBatched for n > 32, without a measurement: the
//                  large-n caller is ESPIRiT's Gram matrix (n = k^2 C, hundreds), one per calibration,
//                  where a batched routine has nothing to batch and cheevd is cuSOLVER's established
//                  dense path with LAPACK's algorithm (the CPU twin's, so both fail and agree alike);
//                  XsyevBatched exists only from cuSOLVER 11.7 (CUDA 12.6 U2) on and wants a host
//                  workspace too. The cost is a batch of n > 32 matrices (per-pixel matrices of more than
//                  32 coils), which runs as a loop of cheevd calls; compress coils to 32 or fewer first.
//   cholesky_solve n <= 32: cusolverDnCpotrfBatched, then cusolverDnCpotrsBatched (which takes one
//                  right-hand side per entry: the batch is paired with each right-hand side, nrhs
//                  entries per matrix). n > 32: cusolverDnCpotrf + cusolverDnCpotrs per matrix (blocked,
//                  any nrhs). potrf factors a copy of a, so a stays as it is.
//   svd            m, n <= 32: cusolverDnCgesvdjBatched (Jacobi, documented for m, n <= 32; full U and
//                  V, whose first k columns are the thin factors), else cusolverDnCgesvdj with econ = 1
//                  per matrix (thin U and V directly; V itself, not V^H). Both sorted descending.
#include <algorithm>
#include <climits>
#include <string>

#include "core/dense/dense.h"
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

using detail::dev;
using detail::first_failure;
using detail::ints;
using detail::pointers;
using larmor::cuda::CusolverLibrary;
using larmor::cuda::cusolver_library;
using larmor::cuda::DeviceGuard;
using larmor::cuda::SolverHandle;

// The largest order of cuSOLVER's Jacobi batched routines (syevjBatched, gesvdjBatched), and the
// size up to which the Cholesky runs batched too (one launch for the whole batch beats a loop of
// calls for small matrices; above it the blocked potrf has level-3 work per matrix).
constexpr size_t kBatchedMaxOrder = 32;

// Jacobi parameter objects: tolerance and sweeps stay at cuSOLVER's defaults (machine accuracy,
// 100 sweeps); sorting is asked for explicitly.
class SyevjParams {
public:
    explicit SyevjParams(const CusolverLibrary& lib, const std::string& ctx) : lib_(lib) {
        LARMOR_CUSOLVER_CHECK(lib_.create_syevj_info(&p_), ctx);
        try {
            LARMOR_CUSOLVER_CHECK(lib_.syevj_set_sort_eig(p_, 1), ctx);
        } catch (...) {
            lib_.destroy_syevj_info(p_);
            throw;
        }
    }
    ~SyevjParams() { lib_.destroy_syevj_info(p_); }
    SyevjParams(const SyevjParams&) = delete;
    SyevjParams& operator=(const SyevjParams&) = delete;
    syevjInfo_t get() const { return p_; }

private:
    const CusolverLibrary& lib_;
    syevjInfo_t p_ = nullptr;
};

class GesvdjParams {
public:
    explicit GesvdjParams(const CusolverLibrary& lib, const std::string& ctx) : lib_(lib) {
        LARMOR_CUSOLVER_CHECK(lib_.create_gesvdj_info(&p_), ctx);
        try {
            LARMOR_CUSOLVER_CHECK(lib_.gesvdj_set_sort_eig(p_, 1), ctx);
        } catch (...) {
            lib_.destroy_gesvdj_info(p_);
            throw;
        }
    }
    ~GesvdjParams() { lib_.destroy_gesvdj_info(p_); }
    GesvdjParams(const GesvdjParams&) = delete;
    GesvdjParams& operator=(const GesvdjParams&) = delete;
    gesvdjInfo_t get() const { return p_; }

private:
    const CusolverLibrary& lib_;
    gesvdjInfo_t p_ = nullptr;
};

// A complex workspace of `lwork` elements (cuSOLVER's *_bufferSize counts elements of the data type).
CArray workspace(Backend& be, int lwork) { return be.empty({static_cast<size_t>(std::max(1, lwork))}); }

int as_int(size_t v) { return static_cast<int>(v); }  // sizes were checked to fit (core/dense/dense.cpp)

// Throws for the first matrix whose info flag is not 0: a negative flag is an argument cuSOLVER
// refused (a bug here), a positive one the routine's failure to converge.
void throw_on_failure(Backend& be, const CArray& info, size_t batch, const char* op, const char* routine) {
    const detail::InfoFailure f = first_failure(be, reinterpret_cast<const int*>(info.data()), batch);
    if (f.index < 0) return;
    if (f.info < 0)
        throw std::logic_error(std::string(op) + ": cuSOLVER " + routine + " refused its argument " +
                               std::to_string(-f.info) + " for matrix " + std::to_string(f.index));
    const std::string what = std::string("cuSOLVER ") + routine;
    throw std::runtime_error(no_convergence_message(op, what.c_str(), static_cast<size_t>(f.index), batch, f.info));
}

}  // namespace

void hermitian_eig(Backend& be, const CArray& a, RArray& values, CArray& vectors, size_t n, size_t batch) {
    const char* op = "hermitian_eig";
    larmor::cuda::check_on_backend(be, a, op, "a");
    larmor::cuda::check_on_backend(be, values, op, "values");
    larmor::cuda::check_on_backend(be, vectors, op, "vectors");
    const std::string ctx = detail::call_context(be, op, a);
    const int device = larmor::cuda::backend_device(be);
    DeviceGuard g(device);
    const CusolverLibrary& lib = cusolver_library();
    be.copy(a, vectors);  // the routines work in place (nothing to copy when vectors is a itself)
    SolverHandle h(device, larmor::cuda::backend_stream(be));
    const int ni = as_int(n);
    CArray info = detail::int_scratch(be, batch);
    float2* v = dev(vectors);
    float* w = values.data();
    if (n <= kBatchedMaxOrder) {
        const SyevjParams params(lib, ctx);
        int lwork = 0;
        LARMOR_CUSOLVER_CHECK(lib.cheevj_batched_buffer_size(h.get(), CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER,
                                                             ni, v, ni, w, &lwork, params.get(), as_int(batch)),
                              ctx);
        CArray work = workspace(be, lwork);
        LARMOR_CUSOLVER_CHECK(lib.cheevj_batched(h.get(), CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, ni, v, ni,
                                                 w, dev(work), lwork, ints(info), params.get(), as_int(batch)),
                              ctx);
        throw_on_failure(be, info, batch, op, "cheevjBatched");
        return;
    }
    int lwork = 0;
    LARMOR_CUSOLVER_CHECK(
        lib.cheevd_buffer_size(h.get(), CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, ni, v, ni, w, &lwork), ctx);
    CArray work = workspace(be, lwork);  // reused by each matrix in turn: the calls are stream-ordered
    for (size_t i = 0; i < batch; ++i)
        LARMOR_CUSOLVER_CHECK(lib.cheevd(h.get(), CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, ni, v + i * n * n,
                                         ni, w + i * n, dev(work), lwork, ints(info) + i),
                              ctx + ", matrix " + std::to_string(i));
    throw_on_failure(be, info, batch, op, "cheevd");
}

void cholesky_solve(Backend& be, const CArray& a, CArray& b, size_t n, size_t nrhs, size_t batch) {
    const char* op = "cholesky_solve";
    larmor::cuda::check_on_backend(be, a, op, "a");
    larmor::cuda::check_on_backend(be, b, op, "b");
    const std::string ctx = detail::call_context(be, op, a);
    const int device = larmor::cuda::backend_device(be);
    DeviceGuard g(device);
    const CusolverLibrary& lib = cusolver_library();
    const cudaStream_t stream = larmor::cuda::backend_stream(be);
    CArray factors = be.empty(a.shape());
    be.copy(a, factors);
    SolverHandle h(device, stream);
    const int ni = as_int(n);
    CArray info = detail::int_scratch(be, batch);
    auto check_factors = [&] {
        const detail::InfoFailure f = first_failure(be, ints(info), batch);
        if (f.index < 0) return;
        if (f.info < 0)
            throw std::logic_error(std::string(op) + ": cuSOLVER potrf refused its argument " +
                                   std::to_string(-f.info) + " for matrix " + std::to_string(f.index));
        const size_t index = static_cast<size_t>(f.index), minor = static_cast<size_t>(f.info);
        throw NotPositiveDefinite(not_positive_definite_message(op, index, batch, n, minor), index, minor);
    };
    if (n <= kBatchedMaxOrder) {
        // potrsBatched takes nrhs = 1 only ("only nrhs = 1 is supported"): entry e = i * nrhs + r
        // pairs matrix i with its right-hand side r.
        const size_t entries = batch * nrhs;
        if (entries > static_cast<size_t>(INT_MAX))
            throw std::invalid_argument(std::string(op) + ": " + std::to_string(batch) + " matrices x " +
                                        std::to_string(nrhs) + " right-hand sides of b " + b.shape().str() +
                                        " exceed cuSOLVER's 32-bit batch count");
        CArray aptr = detail::pointer_scratch(be, entries), bptr = detail::pointer_scratch(be, entries);
        larmor::cuda::launch_pointer_array(pointers(aptr), dev(factors), static_cast<long long>(batch), 1,
                                           static_cast<long long>(n * n), 0, stream);
        LARMOR_CUSOLVER_CHECK(lib.cpotrf_batched(h.get(), CUBLAS_FILL_MODE_LOWER, ni, pointers(aptr), ni, ints(info),
                                                 as_int(batch)),
                              ctx);
        check_factors();
        larmor::cuda::launch_pointer_array(pointers(aptr), dev(factors), static_cast<long long>(entries),
                                           static_cast<long long>(nrhs), static_cast<long long>(n * n), 0, stream);
        larmor::cuda::launch_pointer_array(pointers(bptr), dev(b), static_cast<long long>(entries),
                                           static_cast<long long>(nrhs), static_cast<long long>(n * nrhs),
                                           static_cast<long long>(n), stream);
        CArray solve_info = detail::int_scratch(be, 1);
        LARMOR_CUSOLVER_CHECK(lib.cpotrs_batched(h.get(), CUBLAS_FILL_MODE_LOWER, ni, 1, pointers(aptr), ni,
                                                 pointers(bptr), ni, ints(solve_info), as_int(entries)),
                              ctx);
        throw_on_failure(be, solve_info, 1, op, "potrsBatched");
        return;
    }
    int lwork = 0;
    LARMOR_CUSOLVER_CHECK(lib.cpotrf_buffer_size(h.get(), CUBLAS_FILL_MODE_LOWER, ni, dev(factors), ni, &lwork), ctx);
    CArray work = workspace(be, lwork);
    for (size_t i = 0; i < batch; ++i)
        LARMOR_CUSOLVER_CHECK(lib.cpotrf(h.get(), CUBLAS_FILL_MODE_LOWER, ni, dev(factors) + i * n * n, ni, dev(work),
                                         lwork, ints(info) + i),
                              ctx + ", matrix " + std::to_string(i));
    check_factors();
    CArray solve_info = detail::int_scratch(be, batch);
    for (size_t i = 0; i < batch; ++i)
        LARMOR_CUSOLVER_CHECK(lib.cpotrs(h.get(), CUBLAS_FILL_MODE_LOWER, ni, as_int(nrhs), dev(factors) + i * n * n,
                                         ni, dev(b) + i * n * nrhs, ni, ints(solve_info) + i),
                              ctx + ", matrix " + std::to_string(i));
    throw_on_failure(be, solve_info, batch, op, "potrs");
}

void svd(Backend& be, const CArray& a, RArray& s, CArray& u, CArray& v, size_t m, size_t n, size_t batch) {
    const char* op = "svd";
    larmor::cuda::check_on_backend(be, a, op, "a");
    larmor::cuda::check_on_backend(be, s, op, "s");
    larmor::cuda::check_on_backend(be, u, op, "u");
    larmor::cuda::check_on_backend(be, v, op, "v");
    const std::string ctx = detail::call_context(be, op, a);
    const int device = larmor::cuda::backend_device(be);
    DeviceGuard g(device);
    const CusolverLibrary& lib = cusolver_library();
    const cudaStream_t stream = larmor::cuda::backend_stream(be);
    const size_t k = std::min(m, n);
    const int mi = as_int(m), ni = as_int(n);
    CArray work_a = be.empty(a.shape());  // both routines overwrite their input
    be.copy(a, work_a);
    SolverHandle h(device, stream);
    const GesvdjParams params(lib, ctx);
    CArray info = detail::int_scratch(be, batch);
    float* sv = s.data();
    if (m <= kBatchedMaxOrder && n <= kBatchedMaxOrder) {
        // gesvdjBatched has no economy mode: U is m x m and V n x n per matrix. The thin factors are
        // their first k columns, i.e. the first m k (n k) elements of each; the square one of the two
        // (k = m: U; k = n: V) is written straight into the output.
        CArray u_full = k == m ? u : be.empty({m * m * batch});
        CArray v_full = k == n ? v : be.empty({n * n * batch});
        int lwork = 0;
        LARMOR_CUSOLVER_CHECK(lib.cgesvdj_batched_buffer_size(h.get(), CUSOLVER_EIG_MODE_VECTOR, mi, ni, dev(work_a),
                                                              mi, sv, dev(u_full), mi, dev(v_full), ni, &lwork,
                                                              params.get(), as_int(batch)),
                              ctx);
        CArray work = workspace(be, lwork);
        LARMOR_CUSOLVER_CHECK(lib.cgesvdj_batched(h.get(), CUSOLVER_EIG_MODE_VECTOR, mi, ni, dev(work_a), mi, sv,
                                                  dev(u_full), mi, dev(v_full), ni, dev(work), lwork, ints(info),
                                                  params.get(), as_int(batch)),
                              ctx);
        auto first_columns = [&](const CArray& full, CArray& thin, size_t rows) {
            if (same_view(full, thin)) return;
            const size_t e = sizeof(cfloat);
            LARMOR_CUDA_CHECK(cudaMemcpy2DAsync(thin.data(), rows * k * e, full.data(), rows * rows * e, rows * k * e,
                                                batch, cudaMemcpyDeviceToDevice, stream),
                              ctx + ", thin factor");
        };
        first_columns(u_full, u, m);
        first_columns(v_full, v, n);
        throw_on_failure(be, info, batch, op, "gesvdjBatched");
        return;
    }
    int lwork = 0;
    LARMOR_CUSOLVER_CHECK(lib.cgesvdj_buffer_size(h.get(), CUSOLVER_EIG_MODE_VECTOR, 1, mi, ni, dev(work_a), mi, sv,
                                                  dev(u), mi, dev(v), ni, &lwork, params.get()),
                          ctx);
    CArray work = workspace(be, lwork);
    for (size_t i = 0; i < batch; ++i)
        LARMOR_CUSOLVER_CHECK(lib.cgesvdj(h.get(), CUSOLVER_EIG_MODE_VECTOR, 1, mi, ni, dev(work_a) + i * m * n, mi,
                                          sv + i * k, dev(u) + i * m * k, mi, dev(v) + i * n * k, ni, dev(work), lwork,
                                          ints(info) + i, params.get()),
                              ctx + ", matrix " + std::to_string(i));
    throw_on_failure(be, info, batch, op, "gesvdj");
}

}  // namespace larmor::dense::cuda
