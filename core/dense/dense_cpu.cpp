// The dense layer on the CPU (core/dense/dense_kernels.h): LAPACK through LAPACKE's _work entry points
// (column-major, so LAPACKE passes the matrices through without transposing, and the workspaces are
// ours: queried once per call, allocated once per thread and charged to the backend's budget), CBLAS
// for the Gram matrices. Routines (LAPACK 3.11 users' guide and the routines' headers):
//   hermitian_eig  cheevd, JOBZ = 'V', UPLO = 'L': Householder tridiagonalisation, divide and conquer
//                  (for n <= 25 LAPACK's cstedc falls back to implicit QL/QR itself); eigenvalues ascending.
//   cholesky_solve cpotrf (UPLO = 'L', A = L L^H) into a per-thread copy of a, then cpotrs.
//   svd            cgesdd, JOBZ = 'S' (thin U and V^H); V^H conjugate-transposed into v.
//   gram           cblas_cherk (lower triangle of A^H A, half of cgemm's work), then the upper triangle
//                  mirrored as the exact conjugate.
//
// Threads: OpenMP over the batch, or OpenBLAS's threads inside each matrix. A batch of small matrices
// runs one matrix per OpenMP thread with OpenBLAS single-threaded (core/dense/blas_threads.h): small
// LAPACK calls hardly parallelise inside (their BLAS-2 steps are latency-bound, and OpenBLAS threads
// only above its own size thresholds), so OpenBLAS's threads would only add wake-ups, and two pools
// (OpenMP's and OpenBLAS's) on the same cores oversubscribe them. One large matrix, or fewer large
// matrices than threads, runs one matrix at a time with OpenBLAS threading its level-3 steps (the
// tridiagonal reduction's and the back-transformation's updates, cherk's blocks): there the threads
// have work of O(n^3) to share. kThreadedBlasOrder is the order from which a matrix counts as large;
// the measurements behind the choice are in the constant's comment.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dense/blas_threads.h"
#include "core/dense/dense.h"
#include "core/dense/dense_kernels.h"
#include "core/dense/lapacke_cpp.h"

namespace larmor::dense::cpu {
namespace {

// Matrices of this order or larger run one at a time with OpenBLAS threaded, unless there are at
// least as many of them as OpenMP threads (then every thread has a whole matrix to itself, which
// beats sharing each one). Measured with bench/dense_bench.cpp on the 2-core CI machine (AMD EPYC,
// 2026-11-28, shared with other niced test runs, so +-30 %), the alternative forced through the
// environment (OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=2: one matrix at a time, OpenBLAS threaded):
//   hermitian_eig n = 32 x 65536:   OpenMP over the batch 11.0 s, one at a time 17.8 s
//   hermitian_eig n = 8, 14 x 65536: 0.8-1.0 s and 2.5-3.5 s either way (each call is ~12 / 40 us,
//                                   mostly per-call overhead; with 2 threads the process used about
//                                   one core, so they wait on something shared: presumably
//                                   OpenBLAS's per-call buffer allocation, which takes a process-wide
//                                   lock in builds without thread-local buffers; not profiled)
//   hermitian_eig n = 504 x 2:      OpenMP over the batch 153 ms, one at a time 207 ms
//   n = 504, one matrix (threaded vs OPENBLAS_NUM_THREADS=1): cholesky_solve 3.5 vs 5 ms, gram 3.1
//                                   vs 6 ms; hermitian_eig 90-118 ms either way (its tridiagonal
//                                   reduction is half BLAS-2, memory-bound, which threads hardly speed).
// The order bound matters only where 1 < batch < threads, which 2 cores cannot show: below 128 a
// matrix's level-3 blocks are too small for OpenBLAS to split well (its own threading thresholds),
// above it they are not, and OpenMP over a few matrices would leave most cores idle.
constexpr size_t kThreadedBlasOrder = 128;

struct BatchPlan {
    bool parallel = false;  // OpenMP over the batch, OpenBLAS single-threaded
    int slots = 1;          // per-thread scratch sets
};

BatchPlan plan(size_t order, size_t batch) {
    const int threads = std::max(1, omp_get_max_threads());
    BatchPlan p;
    p.parallel = threads > 1 && batch > 1 && (order < kThreadedBlasOrder || batch >= static_cast<size_t>(threads));
    p.slots = p.parallel ? static_cast<int>(std::min<size_t>(static_cast<size_t>(threads), batch)) : 1;
    return p;
}

// body(matrix, slot) for every matrix of the batch; slot < plan.slots names the scratch set of the
// thread running it. body must not throw (it records LAPACK's info instead).
template <class F>
void for_each_matrix(const BatchPlan& p, size_t batch, F&& body) {
    if (!p.parallel) {
        for (size_t i = 0; i < batch; ++i) body(i, 0);
        return;
    }
    const detail::SingleThreadedBlas single;
    const long long count = static_cast<long long>(batch);
    // Dynamic: the iterative parts (QR sweeps, divide and conquer deflation) take a different time
    // for each matrix; chunks of 8 keep the scheduling cost small beside even a 2 x 2 matrix's call.
#pragma omp parallel for num_threads(p.slots) schedule(dynamic, 8)
    for (long long i = 0; i < count; ++i) body(static_cast<size_t>(i), omp_get_thread_num());
}

// First matrix whose info is not 0, or batch.
size_t first_failure(const std::vector<lapack_int>& info) {
    const auto it = std::find_if(info.begin(), info.end(), [](lapack_int v) { return v != 0; });
    return static_cast<size_t>(it - info.begin());
}

// A negative info is an argument LAPACK refused: a bug here, not a property of the data.
[[noreturn]] void bad_argument(const char* op, const char* routine, size_t index, lapack_int info) {
    throw std::logic_error(std::string(op) + ": LAPACK " + routine + " refused its argument " +
                           std::to_string(-info) + " for matrix " + std::to_string(index));
}

size_t work_size(float queried) { return std::max<size_t>(1, static_cast<size_t>(std::ceil(queried))); }

int as_int(size_t v) { return static_cast<int>(v); }  // sizes were checked to fit (core/dense/dense.cpp)

}  // namespace

void hermitian_eig(Backend& be, const CArray& a, RArray& values, CArray& vectors, size_t n, size_t batch) {
    const char* op = "hermitian_eig";
    const lapack_int ni = as_int(n);
    be.copy(a, vectors);  // cheevd works in place (nothing to copy when vectors is a itself)
    cfloat wq;
    float rq = 0;
    lapack_int iq = 0;
    lapack_int info = LAPACKE_cheevd_work(LAPACK_COL_MAJOR, 'V', 'L', ni, vectors.data(), ni, values.data(), &wq, -1,
                                          &rq, -1, &iq, -1);
    if (info != 0) bad_argument(op, "cheevd (workspace query)", 0, info);
    const size_t lwork = work_size(wq.real()), lrwork = work_size(rq), liwork = std::max<size_t>(1, size_t(iq));

    const BatchPlan p = plan(n, batch);
    const size_t slots = static_cast<size_t>(p.slots);
    CArray work = be.empty({lwork * slots});
    RArray rwork = be.empty_real({lrwork * slots});
    std::vector<lapack_int> iwork(liwork * slots);
    std::vector<lapack_int> infos(batch, 0);
    cfloat* vec = vectors.data();
    float* val = values.data();
    for_each_matrix(p, batch, [&](size_t i, int slot) {
        const size_t s = static_cast<size_t>(slot);
        infos[i] = LAPACKE_cheevd_work(LAPACK_COL_MAJOR, 'V', 'L', ni, vec + i * n * n, ni, val + i * n,
                                       work.data() + s * lwork, as_int(lwork), rwork.data() + s * lrwork,
                                       as_int(lrwork), iwork.data() + s * liwork, as_int(liwork));
    });
    const size_t bad = first_failure(infos);
    if (bad == batch) return;
    if (infos[bad] < 0) bad_argument(op, "cheevd", bad, infos[bad]);
    throw std::runtime_error(no_convergence_message(op, "LAPACK cheevd", bad, batch, infos[bad]));
}

void cholesky_solve(Backend& be, const CArray& a, CArray& b, size_t n, size_t nrhs, size_t batch) {
    const char* op = "cholesky_solve";
    const lapack_int ni = as_int(n), ri = as_int(nrhs);
    const BatchPlan p = plan(n, batch);
    CArray factors = be.empty({n * n * static_cast<size_t>(p.slots)});  // a stays as it is
    std::vector<lapack_int> potrf(batch, 0), potrs(batch, 0);
    const cfloat* src = a.data();
    cfloat* rhs = b.data();
    for_each_matrix(p, batch, [&](size_t i, int slot) {
        cfloat* l = factors.data() + static_cast<size_t>(slot) * n * n;
        std::copy(src + i * n * n, src + (i + 1) * n * n, l);
        potrf[i] = LAPACKE_cpotrf_work(LAPACK_COL_MAJOR, 'L', ni, l, ni);
        if (potrf[i] == 0) potrs[i] = LAPACKE_cpotrs_work(LAPACK_COL_MAJOR, 'L', ni, ri, l, ni, rhs + i * n * nrhs, ni);
    });
    const size_t bad = first_failure(potrf);
    if (bad < batch) {
        if (potrf[bad] < 0) bad_argument(op, "cpotrf", bad, potrf[bad]);
        const size_t minor = static_cast<size_t>(potrf[bad]);
        throw NotPositiveDefinite(not_positive_definite_message(op, bad, batch, n, minor), bad, minor);
    }
    const size_t bad_solve = first_failure(potrs);
    if (bad_solve < batch) bad_argument(op, "cpotrs", bad_solve, potrs[bad_solve]);
}

void svd(Backend& be, const CArray& a, RArray& s, CArray& u, CArray& v, size_t m, size_t n, size_t batch) {
    const char* op = "svd";
    const size_t k = std::min(m, n), mx = std::max(m, n);
    const lapack_int mi = as_int(m), ni = as_int(n), ki = as_int(k);
    const BatchPlan p = plan(mx, batch);
    const size_t slots = static_cast<size_t>(p.slots);
    // cgesdd destroys its input: each thread factors a copy. V^H (k x n) lands in scratch too.
    CArray copies = be.empty({m * n * slots});
    CArray vts = be.empty({k * n * slots});
    cfloat wq;
    float rdummy = 0;
    lapack_int idummy = 0;
    lapack_int info = LAPACKE_cgesdd_work(LAPACK_COL_MAJOR, 'S', mi, ni, copies.data(), mi, s.data(), u.data(), mi,
                                          vts.data(), ki, &wq, -1, &rdummy, &idummy);
    if (info != 0) bad_argument(op, "cgesdd (workspace query)", 0, info);
    const size_t lwork = work_size(wq.real());
    // cgesdd's documented minimum for JOBZ = 'S' (LAPACK >= 3.7): max(5 mn^2 + 5 mn, 2 mx mn + 2 mn^2 + mn).
    const size_t lrwork = std::max(5 * k * k + 5 * k, 2 * mx * k + 2 * k * k + k);
    const size_t liwork = 8 * k;
    CArray work = be.empty({lwork * slots});
    RArray rwork = be.empty_real({lrwork * slots});
    std::vector<lapack_int> iwork(liwork * slots);
    std::vector<lapack_int> infos(batch, 0);
    const cfloat* src = a.data();
    float* sv = s.data();
    cfloat* uv = u.data();
    cfloat* vv = v.data();
    for_each_matrix(p, batch, [&](size_t i, int slot) {
        const size_t t = static_cast<size_t>(slot);
        cfloat* c = copies.data() + t * m * n;
        cfloat* vt = vts.data() + t * k * n;
        std::copy(src + i * m * n, src + (i + 1) * m * n, c);
        infos[i] = LAPACKE_cgesdd_work(LAPACK_COL_MAJOR, 'S', mi, ni, c, mi, sv + i * k, uv + i * m * k, mi, vt, ki,
                                       work.data() + t * lwork, as_int(lwork), rwork.data() + t * lrwork,
                                       iwork.data() + t * liwork);
        if (infos[i] != 0) return;
        cfloat* vi = vv + i * n * k;  // v(j, c) = conj(vt(c, j))
        for (size_t c2 = 0; c2 < k; ++c2)
            for (size_t j = 0; j < n; ++j) vi[j + c2 * n] = std::conj(vt[c2 + j * k]);
    });
    const size_t bad = first_failure(infos);
    if (bad == batch) return;
    if (infos[bad] < 0) bad_argument(op, "cgesdd", bad, infos[bad]);
    throw std::runtime_error(no_convergence_message(op, "LAPACK cgesdd", bad, batch, infos[bad]));
}

void gram(Backend&, const CArray& a, CArray& g, size_t m, size_t n, size_t batch) {
    const blasint mi = as_int(m), ni = as_int(n);
    const cfloat* src = a.data();
    cfloat* dst = g.data();
    for_each_matrix(plan(std::max(m, n), batch), batch, [&](size_t i, int) {
        cfloat* gi = dst + i * n * n;
        cblas_cherk(CblasColMajor, CblasLower, CblasConjTrans, ni, mi, 1.f, src + i * m * n, mi, 0.f, gi, ni);
        // cherk leaves the upper triangle alone and the diagonal real (BLAS reference); write the
        // upper as the exact conjugate of the lower.
        for (size_t j = 0; j < n; ++j) {
            gi[j + j * n] = cfloat(gi[j + j * n].real(), 0.f);
            for (size_t r = j + 1; r < n; ++r) gi[j + r * n] = std::conj(gi[r + j * n]);
        }
    });
}

}  // namespace larmor::dense::cpu
