#pragma once
// cuFFT LTO load/store callbacks that turn a plain batched cuFFT into the centred orthonormal FFT
// with no extra pass over memory (modulation identity in core/cpu/centring.h). The callback source is
// generated per transform with sizes and strides as literals, so index arithmetic becomes
// multiply-shift sequences, compiled to LTO-IR by NVRTC (-dlto) and handed to
// cufftXtSetJITCallback; cuFFT links it into its kernels with nvJitLink.
#include <string>
#include <vector>

#include "core/backend.h"

namespace larmor::cuda {

// One transformed axis as seen from a cuFFT exec's data pointer: the element index within the
// transform is (offset / stride) % n, offset being the element offset cuFFT hands the callback.
struct CallbackAxis {
    unsigned long long stride;
    unsigned long long n;
};

struct CallbackSpec {
    std::vector<CallbackAxis> axes;
    FFTDirection dir;  // matters only with an odd axis (even axes give direction-free signs)
    double scale;      // orthonormal 1/sqrt(prod n), applied at store
    bool wide;         // offsets may exceed 32 bits
};

// Symbol names in the generated source: C++ linkage (what cuFFT's CUDA 13 samples use) and
// extern "C" twins, tried in that order.
constexpr const char* kLoadCallback = "larmor_centring_load";
constexpr const char* kStoreCallback = "larmor_centring_store";
constexpr const char* kLoadCallbackC = "larmor_centring_load_c";
constexpr const char* kStoreCallbackC = "larmor_centring_store_c";

std::string callback_source(const CallbackSpec& spec);

// LTO-IR of `source` for virtual architecture compute_<arch> (e.g. 90), compiled once per process
// and kept for its lifetime. Throws (NVRTC status and log) when compilation fails.
const std::vector<char>& callback_ltoir(const std::string& source, int arch);

}  // namespace larmor::cuda
