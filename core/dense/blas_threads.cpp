#include "core/dense/blas_threads.h"

#include <cblas.h>

#include <mutex>

namespace larmor::dense::detail {
namespace {

// openblas_get_parallel(): 0 sequential, 1 pthreads, 2 OpenMP (OpenBLAS's cblas.h).
constexpr int kPthreads = 1;

std::mutex g_mutex;
int g_users = 0;       // live SingleThreadedBlas objects
int g_saved = 0;       // OpenBLAS's thread count before the first of them

}  // namespace

SingleThreadedBlas::SingleThreadedBlas() {
    if (openblas_get_parallel() != kPthreads) return;
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_users++ == 0) {
        g_saved = openblas_get_num_threads();
        openblas_set_num_threads(1);
    }
}

SingleThreadedBlas::~SingleThreadedBlas() {
    if (openblas_get_parallel() != kPthreads) return;
    std::lock_guard<std::mutex> lock(g_mutex);
    if (--g_users == 0 && g_saved > 1) openblas_set_num_threads(g_saved);
}

}  // namespace larmor::dense::detail
