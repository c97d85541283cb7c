#pragma once
// OpenBLAS's own threads against OpenMP threads over a batch (core/dense/dense_cpu.cpp says when each
// is used). While a SingleThreadedBlas exists, every OpenBLAS call (BLAS and the LAPACK built on it)
// runs on its calling thread only, so that an OpenMP loop over a batch of matrices, one matrix per
// thread, does not start OpenBLAS's thread pool from each of its threads (threads x threads workers
// on threads cores).
//
// How depends on the OpenBLAS build (openblas_get_parallel(), OpenBLAS's cblas.h):
//   pthreads (Debian's libopenblas0-pthread, the one on our machines): openblas_set_num_threads(1),
//            and the previous count restored when the last SingleThreadedBlas of the process goes.
//            The setting is process-wide, so a concurrent session's large single-matrix call also runs
//            single-threaded meanwhile: slower, never wrong.
//   OpenMP:  nothing to do: OpenBLAS runs single-threaded inside an OpenMP parallel region by itself
//            (it checks omp_in_parallel()), and its openblas_set_num_threads would change the
//            caller's OpenMP thread count (omp_set_num_threads) instead.
//   sequential: nothing to do.
namespace larmor::dense::detail {

class SingleThreadedBlas {
public:
    SingleThreadedBlas();
    ~SingleThreadedBlas();
    SingleThreadedBlas(const SingleThreadedBlas&) = delete;
    SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;
};

}  // namespace larmor::dense::detail
