#pragma once
// cuFFT, NVRTC, cuSOLVER and cuBLAS, loaded with dlopen when a CUDA backend first needs them (plans a
// transform; calls the dense layer, core/dense/dense.h), not when the process starts. Linked directly,
// cuFFT and NVRTC alone cost a server that never uses a GPU (no device, or --backend cpu) ~30 MiB of
// resident memory for their relocations (27 MiB NVRTC, 4 MiB cuFFT, measured on larmor-server
// --backend cpu); cuSOLVER (140 MiB on disk) with its cuBLAS, cuBLASLt and cuSPARSE would add more.
// The CUDA runtime itself stays linked: it is small, and touches the driver only on the first CUDA
// call.
#include <cublas_v2.h>
#include <cufft.h>
#include <cufftXt.h>
#include <cusolverDn.h>
#include <nvrtc.h>

namespace larmor::cuda {

// The cuFFT entry points Larmor calls, under their own names.
struct CufftLibrary {
    decltype(&::cufftCreate) create;
    decltype(&::cufftDestroy) destroy;
    decltype(&::cufftMakePlanMany) make_plan_many;
    decltype(&::cufftMakePlanMany64) make_plan_many64;
    decltype(&::cufftSetStream) set_stream;
    decltype(&::cufftSetAutoAllocation) set_auto_allocation;
    decltype(&::cufftSetWorkArea) set_work_area;
    decltype(&::cufftXtSetJITCallback) xt_set_jit_callback;
    decltype(&::cufftExecC2C) exec_c2c;
};

struct NvrtcLibrary {
    decltype(&::nvrtcCreateProgram) create_program;
    decltype(&::nvrtcDestroyProgram) destroy_program;
    decltype(&::nvrtcCompileProgram) compile_program;
    decltype(&::nvrtcGetProgramLogSize) get_program_log_size;
    decltype(&::nvrtcGetProgramLog) get_program_log;
    decltype(&::nvrtcGetLTOIRSize) get_ltoir_size;
    decltype(&::nvrtcGetLTOIR) get_ltoir;
    decltype(&::nvrtcGetErrorString) get_error_string;
};

// The cuSOLVER (dense) entry points of the dense layer (cuda/dense_cusolver.cpp). libcusolver needs
// libcublas, libcublasLt, libcusparse and libnvJitLink; the toolkit's copy finds them beside itself
// (its RUNPATH is $ORIGIN), also when opened by full path.
struct CusolverLibrary {
    decltype(&::cusolverDnCreate) create;
    decltype(&::cusolverDnDestroy) destroy;
    decltype(&::cusolverDnSetStream) set_stream;
    // Jacobi eigensolver (n <= 32, batched) and its parameters
    decltype(&::cusolverDnCreateSyevjInfo) create_syevj_info;
    decltype(&::cusolverDnDestroySyevjInfo) destroy_syevj_info;
    decltype(&::cusolverDnXsyevjSetSortEig) syevj_set_sort_eig;
    decltype(&::cusolverDnCheevjBatched_bufferSize) cheevj_batched_buffer_size;
    decltype(&::cusolverDnCheevjBatched) cheevj_batched;
    // divide and conquer eigensolver (one matrix per call)
    decltype(&::cusolverDnCheevd_bufferSize) cheevd_buffer_size;
    decltype(&::cusolverDnCheevd) cheevd;
    // Cholesky: batched (small n) and blocked (one matrix per call)
    decltype(&::cusolverDnCpotrfBatched) cpotrf_batched;
    decltype(&::cusolverDnCpotrsBatched) cpotrs_batched;
    decltype(&::cusolverDnCpotrf_bufferSize) cpotrf_buffer_size;
    decltype(&::cusolverDnCpotrf) cpotrf;
    decltype(&::cusolverDnCpotrs) cpotrs;
    // Jacobi SVD: batched (m, n <= 32) and one matrix per call
    decltype(&::cusolverDnCreateGesvdjInfo) create_gesvdj_info;
    decltype(&::cusolverDnDestroyGesvdjInfo) destroy_gesvdj_info;
    decltype(&::cusolverDnXgesvdjSetSortEig) gesvdj_set_sort_eig;
    decltype(&::cusolverDnCgesvdjBatched_bufferSize) cgesvdj_batched_buffer_size;
    decltype(&::cusolverDnCgesvdjBatched) cgesvdj_batched;
    decltype(&::cusolverDnCgesvdj_bufferSize) cgesvdj_buffer_size;
    decltype(&::cusolverDnCgesvdj) cgesvdj;
};

// The cuBLAS entry points of the dense layer (cuda/dense_cublas.cpp), under the _v2 names cuBLAS
// exports (cublas_v2.h maps the plain names onto them).
struct CublasLibrary {
    decltype(&::cublasCreate_v2) create;
    decltype(&::cublasDestroy_v2) destroy;
    decltype(&::cublasSetStream_v2) set_stream;
    decltype(&::cublasSetWorkspace_v2) set_workspace;
    decltype(&::cublasSetMathMode) set_math_mode;
    decltype(&::cublasCherk_v2) cherk;
    decltype(&::cublasCgemmStridedBatched) cgemm_strided_batched;
    decltype(&::cublasGetStatusName) get_status_name;
};

// Loaded on the first call (thread-safe), kept for the life of the process. Throws
// std::runtime_error naming the library, where it was looked for and dlerror() when it cannot be
// loaded or lacks an entry point; a later call tries again.
const CufftLibrary& cufft_library();
const NvrtcLibrary& nvrtc_library();
const CusolverLibrary& cusolver_library();
const CublasLibrary& cublas_library();

}  // namespace larmor::cuda
