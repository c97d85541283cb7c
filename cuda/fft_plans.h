#pragma once
// cuFFT plans of one CUDA backend, cached by (shape, axes) (and direction when an axis is odd, since
// the odd-size modulation depends on it), bound to the session's stream, and the way each transform
// is centred (core/cpu/centring.h), chosen per plan; LARMOR_CUDA_CENTRING overrides the default:
//   callbacks (default) cuFFT LTO load/store callbacks (fft_callbacks.h: NVRTC -dlto, then
//             cufftXtSetJITCallback): the modulation rides in cuFFT's own loads and stores, no extra
//             pass. Measured on an H100 (bench/FLOORS-fft.md) it is still the fastest centring, though
//             cuFFT's callback kernels run slower than its plain ones (1.3x-1.7x of a bare cuFFT).
//   swap      bare cuFFT, then one in-place pass swapping each element with its partner k + N/2 and
//             applying sign and scale (fftshift . F . ifftshift = P . F, P a signed half swap); even
//             sizes only. The fallback when a plan refuses callbacks (cuFFT answers
//             CUFFT_INTERNAL_ERROR for some layouts, e.g. interleaved batches or tiny 1D sizes).
//   kernels   bare cuFFT between two modulation passes; the fallback for odd sizes.
// A fallback prints one warning per process.
#include <cufft.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/backend.h"
#include "cuda/device_context.h"
#include "cuda/fft_layout.h"
#include "cuda/kernels.h"

namespace larmor::cuda {

enum class Centring { Callbacks, Swap, Kernels };
const char* centring_name(Centring c);

class CufftPlanCache {
public:
    explicit CufftPlanCache(std::shared_ptr<DeviceContext> ctx);
    ~CufftPlanCache();
    CufftPlanCache(const CufftPlanCache&) = delete;
    CufftPlanCache& operator=(const CufftPlanCache&) = delete;

    // Centred orthonormal FFT of the device array `data` of `shape` over `live` (axes longer than 1),
    // in place, queued on the context's stream.
    void execute(float2* data, const Shape& shape, AxisMask live, FFTDirection dir);

private:
    struct Transform;
    Transform& get(const Shape& shape, AxisMask live, FFTDirection dir);

    std::shared_ptr<DeviceContext> ctx_;
    std::map<std::vector<size_t>, std::unique_ptr<Transform>> plans_;
    Transform* last_ = nullptr;  // most recent transform and its key
    Shape last_shape_;
    AxisMask last_live_ = 0;
    int last_dkey_ = 0;
};

// Process-wide record for logs, tests and benchmarks: the centring of the most recently planned
// transform, and whether a request for callbacks ever fell back (with the first reason).
Centring last_planned_centring();
bool fft_callbacks_healthy();
std::string fft_callbacks_failure();

}  // namespace larmor::cuda
