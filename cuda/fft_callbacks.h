#pragma once
// cuFFT LTO callbacks that turn a plain batched cuFFT into the centred orthonormal FFT with no extra
// pass over memory. The callback source is generated per transform with sizes and strides as
// literals, so index arithmetic becomes multiply-shift sequences, compiled to LTO-IR by NVRTC
// (-dlto) and handed to cufftXtSetJITCallback; cuFFT links it into its kernels with nvJitLink.
//
// Two kinds:
//   shifted load (the default, shifted_load_source): a LOAD callback only. Along an axis of length N
//     with c = N/2 (integer division), fftshift . F . ifftshift = F(w) with
//         w[n] = L[n] * x[(n + c) mod N],   L[n] = exp(-s 2 pi i (c n mod N) / N)
//     (s = -1 forward, +1 inverse; L[n] = (-1)^n for even N), and over several axes the shifts and
//     factors of every axis combine; the orthonormal scale 1/sqrt(prod N) is folded in. No store
//     callback, which keeps cuFFT on its fast store path. The load reads another element than the
//     one cuFFT asks for, so the transform must run OUT OF PLACE (in place, cuFFT may already have
//     overwritten an element a later load still needs).
//   load/store modulation (callback_source): the two diagonal modulations of core/cpu/centring.h,
//     each element read and written where cuFFT asks; works in place. Kept for comparison.
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
    double scale;      // orthonormal 1/sqrt(prod n): at store (modulation), at load (shifted load)
    bool wide;         // offsets may exceed 32 bits
};

// Symbol names in the generated source: C++ linkage (what cuFFT's CUDA 13 samples use) and
// extern "C" twins, tried in that order.
constexpr const char* kLoadCallback = "larmor_centring_load";
constexpr const char* kStoreCallback = "larmor_centring_store";
constexpr const char* kLoadCallbackC = "larmor_centring_load_c";
constexpr const char* kStoreCallbackC = "larmor_centring_store_c";
constexpr const char* kShiftedLoadCallback = "larmor_shifted_load";
constexpr const char* kShiftedLoadCallbackC = "larmor_shifted_load_c";

// Load + store modulation (in place capable).
std::string callback_source(const CallbackSpec& spec);
// Shifted, modulated and scaled load (out of place only); defines kShiftedLoadCallback and its C twin.
std::string shifted_load_source(const CallbackSpec& spec);

// LTO-IR of `source` for virtual architecture compute_<arch> (e.g. 90), compiled once per process
// and kept for its lifetime. Throws (NVRTC status and log) when compilation fails.
const std::vector<char>& callback_ltoir(const std::string& source, int arch);

}  // namespace larmor::cuda
