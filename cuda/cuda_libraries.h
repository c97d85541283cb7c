#pragma once
// cuFFT and NVRTC, loaded with dlopen when the first CUDA backend plans a transform, not when the
// process starts. Linked directly, the two cost a server that never uses a GPU (no device, or
// --backend cpu) ~30 MiB of resident memory for their relocations alone (27 MiB NVRTC, 4 MiB cuFFT,
// measured on larmor-server --backend cpu). The CUDA runtime itself stays linked: it is small, and
// touches the driver only on the first CUDA call.
#include <cufft.h>
#include <cufftXt.h>
#include <nvrtc.h>

namespace larmor::cuda {

// The cuFFT entry points Larmor calls, under their own names.
struct CufftLibrary {
    decltype(&::cufftCreate) create;
    decltype(&::cufftDestroy) destroy;
    decltype(&::cufftMakePlanMany) make_plan_many;
    decltype(&::cufftMakePlanMany64) make_plan_many64;
    decltype(&::cufftSetStream) set_stream;
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

// Loaded on the first call (thread-safe), kept for the life of the process. Throws
// std::runtime_error naming the library, where it was looked for and dlerror() when it cannot be
// loaded or lacks an entry point; a later call tries again.
const CufftLibrary& cufft_library();
const NvrtcLibrary& nvrtc_library();

}  // namespace larmor::cuda
