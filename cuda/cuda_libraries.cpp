#include "cuda/cuda_libraries.h"

#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>

// Set by cuda/CMakeLists.txt: the sonames found at configure time and the toolkit's library folder.
#ifndef LARMOR_CUFFT_SONAME
#define LARMOR_CUFFT_SONAME "libcufft.so"
#endif
#ifndef LARMOR_NVRTC_SONAME
#define LARMOR_NVRTC_SONAME "libnvrtc.so"
#endif
#ifndef LARMOR_CUSOLVER_SONAME
#define LARMOR_CUSOLVER_SONAME "libcusolver.so"
#endif
#ifndef LARMOR_CUBLAS_SONAME
#define LARMOR_CUBLAS_SONAME "libcublas.so"
#endif
#ifndef LARMOR_CUDA_LIBRARY_DIR
#define LARMOR_CUDA_LIBRARY_DIR ""
#endif

namespace larmor::cuda {
namespace {

// By soname first (this binary's RUNPATH, LD_LIBRARY_PATH, the linker cache: the installed runtime
// wins), then in the toolkit folder of the build.
void* open_library(const char* soname) {
    void* h = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    std::string why = ::dlerror();
    const std::string dir = LARMOR_CUDA_LIBRARY_DIR;
    if (!dir.empty()) {
        const std::string path = dir + "/" + soname;
        h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
        why += "; " + std::string(::dlerror());
    }
    throw std::runtime_error(std::string("cannot load ") + soname + " (needed by the CUDA backend): " + why);
}

template <class F>
void bind(void* lib, const char* soname, const char* name, F& out) {
    ::dlerror();
    void* sym = ::dlsym(lib, name);
    if (!sym) throw std::runtime_error(std::string(soname) + " has no entry point " + name + ": " + ::dlerror());
    out = reinterpret_cast<F>(sym);
}

// Loads once; a failed attempt leaves nothing behind, so a later call tries again. Every cuFFT call
// of every session comes through here: once loaded, an acquire load is all it costs, no lock that
// concurrent sessions would contend on.
template <class Table, class Fill>
const Table& load_once(const char* soname, Fill fill) {
    static std::mutex m;
    static Table table{};
    static std::atomic<bool> loaded{false};
    if (loaded.load(std::memory_order_acquire)) return table;
    std::lock_guard<std::mutex> lock(m);
    if (!loaded.load(std::memory_order_relaxed)) {
        void* lib = open_library(soname);
        Table t{};
        try {
            fill(lib, t);
        } catch (...) {
            ::dlclose(lib);
            throw;
        }
        table = t;
        loaded.store(true, std::memory_order_release);  // the handle stays open: plans live until exit
    }
    return table;
}

}  // namespace

const CufftLibrary& cufft_library() {
    return load_once<CufftLibrary>(LARMOR_CUFFT_SONAME, [](void* lib, CufftLibrary& t) {
        const char* so = LARMOR_CUFFT_SONAME;
        bind(lib, so, "cufftCreate", t.create);
        bind(lib, so, "cufftDestroy", t.destroy);
        bind(lib, so, "cufftMakePlanMany", t.make_plan_many);
        bind(lib, so, "cufftMakePlanMany64", t.make_plan_many64);
        bind(lib, so, "cufftSetStream", t.set_stream);
        bind(lib, so, "cufftSetAutoAllocation", t.set_auto_allocation);
        bind(lib, so, "cufftSetWorkArea", t.set_work_area);
        bind(lib, so, "cufftXtSetJITCallback", t.xt_set_jit_callback);
        bind(lib, so, "cufftExecC2C", t.exec_c2c);
    });
}

const NvrtcLibrary& nvrtc_library() {
    return load_once<NvrtcLibrary>(LARMOR_NVRTC_SONAME, [](void* lib, NvrtcLibrary& t) {
        const char* so = LARMOR_NVRTC_SONAME;
        bind(lib, so, "nvrtcCreateProgram", t.create_program);
        bind(lib, so, "nvrtcDestroyProgram", t.destroy_program);
        bind(lib, so, "nvrtcCompileProgram", t.compile_program);
        bind(lib, so, "nvrtcGetProgramLogSize", t.get_program_log_size);
        bind(lib, so, "nvrtcGetProgramLog", t.get_program_log);
        bind(lib, so, "nvrtcGetLTOIRSize", t.get_ltoir_size);
        bind(lib, so, "nvrtcGetLTOIR", t.get_ltoir);
        bind(lib, so, "nvrtcGetErrorString", t.get_error_string);
    });
}

const CusolverLibrary& cusolver_library() {
    return load_once<CusolverLibrary>(LARMOR_CUSOLVER_SONAME, [](void* lib, CusolverLibrary& t) {
        const char* so = LARMOR_CUSOLVER_SONAME;
        bind(lib, so, "cusolverDnCreate", t.create);
        bind(lib, so, "cusolverDnDestroy", t.destroy);
        bind(lib, so, "cusolverDnSetStream", t.set_stream);
        bind(lib, so, "cusolverDnCreateSyevjInfo", t.create_syevj_info);
        bind(lib, so, "cusolverDnDestroySyevjInfo", t.destroy_syevj_info);
        bind(lib, so, "cusolverDnXsyevjSetSortEig", t.syevj_set_sort_eig);
        bind(lib, so, "cusolverDnCheevjBatched_bufferSize", t.cheevj_batched_buffer_size);
        bind(lib, so, "cusolverDnCheevjBatched", t.cheevj_batched);
        bind(lib, so, "cusolverDnCheevd_bufferSize", t.cheevd_buffer_size);
        bind(lib, so, "cusolverDnCheevd", t.cheevd);
        bind(lib, so, "cusolverDnCpotrfBatched", t.cpotrf_batched);
        bind(lib, so, "cusolverDnCpotrsBatched", t.cpotrs_batched);
        bind(lib, so, "cusolverDnCpotrf_bufferSize", t.cpotrf_buffer_size);
        bind(lib, so, "cusolverDnCpotrf", t.cpotrf);
        bind(lib, so, "cusolverDnCpotrs", t.cpotrs);
        bind(lib, so, "cusolverDnCreateGesvdjInfo", t.create_gesvdj_info);
        bind(lib, so, "cusolverDnDestroyGesvdjInfo", t.destroy_gesvdj_info);
        bind(lib, so, "cusolverDnXgesvdjSetSortEig", t.gesvdj_set_sort_eig);
        bind(lib, so, "cusolverDnCgesvdjBatched_bufferSize", t.cgesvdj_batched_buffer_size);
        bind(lib, so, "cusolverDnCgesvdjBatched", t.cgesvdj_batched);
        bind(lib, so, "cusolverDnCgesvdj_bufferSize", t.cgesvdj_buffer_size);
        bind(lib, so, "cusolverDnCgesvdj", t.cgesvdj);
    });
}

const CublasLibrary& cublas_library() {
    return load_once<CublasLibrary>(LARMOR_CUBLAS_SONAME, [](void* lib, CublasLibrary& t) {
        const char* so = LARMOR_CUBLAS_SONAME;
        bind(lib, so, "cublasCreate_v2", t.create);
        bind(lib, so, "cublasDestroy_v2", t.destroy);
        bind(lib, so, "cublasSetStream_v2", t.set_stream);
        bind(lib, so, "cublasSetWorkspace_v2", t.set_workspace);
        bind(lib, so, "cublasSetMathMode", t.set_math_mode);
        bind(lib, so, "cublasCherk_v2", t.cherk);
        bind(lib, so, "cublasCgemmStridedBatched", t.cgemm_strided_batched);
        bind(lib, so, "cublasGetStatusName", t.get_status_name);
    });
}

}  // namespace larmor::cuda
