#pragma once
// cuFFT plans of one CUDA backend, cached by (shape, axes) (and direction when an axis is odd, since
// the odd-size twiddles depend on it), bound to the session's stream, and the way each transform is
// centred, chosen per plan. Every transform runs OUT OF PLACE: it reads `in`, leaves it unchanged,
// and writes `out`. LARMOR_CUDA_CENTRING overrides the default:
//   strided (where the shape qualifies, cuda/fft_layout.h strided_layout: some axis above x
//             transformed, those axes powers of two in 2..1024, x even) Larmor's own kernel
//             (cuda/fft_strided.h) along each strided axis, the first pass reading the input with
//             the shifts and signs of ALL transformed axes and the scale folded in (out of place),
//             the others plain in place; then bare cuFFT (no callbacks, so cuFFT keeps its fast
//             row kernel) along x in place. Other shapes fall back to load, silently. Meant to
//             become the default (kDefaultCentring in fft_plans.cpp) once it passes the GPU tests.
//   load      (the default, and strided's fallback) one cuFFT LTO LOAD callback (fft_callbacks.h, shifted_load_source) that reads x at
//             the half-shifted index, times the sign / twiddle and the orthonormal scale: the centred
//             transform is F(w), w[n] = L[n] x[(n + N/2) mod N], with no store callback and no extra
//             pass, for even and odd sizes. Reading other elements than cuFFT asks for is why the
//             transform is out of place. Several cuFFT runs (more than 3 or non-adjacent axes)
//             ping-pong between `out` and a scratch buffer.
//   callbacks cuFFT LTO load AND store callbacks applying the two diagonal modulations of
//             core/cpu/centring.h (each element read and written where cuFFT asks). cuFFT's kernels
//             run slower with a store callback (bench/FLOORS-fft.md).
//   swap      bare cuFFT, then one in-place pass over `out` swapping each element with its partner
//             k + N/2 and applying sign and scale (fftshift . F . ifftshift = P . F, P a signed half
//             swap); even sizes only. The fallback for even sizes when a plan refuses callbacks (cuFFT
//             answers CUFFT_INTERNAL_ERROR for some layouts, e.g. interleaved batches or tiny 1D sizes).
//   kernels   copy to `out`, then bare cuFFT between two modulation passes; the fallback for odd sizes.
// A fallback prints one warning per process.
//
// Plans are shared by every session of the process (core/plan_registry.h, one registry per device):
// a shape is planned once per process, so a session's first image of a shape seen before pays no
// planning (60 ms per session with LTO callback plans before). A cuFFT handle may not be used by two
// host threads at once, so each shared transform has its own lock, held only while its runs are
// queued; each session queues them on its own stream with its own work area (plans are made with
// cuFFT's auto-allocation off, and the work area is allocated per session, charged to its device
// budget), so sessions sharing a plan never share scratch memory on the device.
#include <cufft.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/plan_registry.h"
#include "cuda/device_context.h"
#include "cuda/fft_layout.h"
#include "cuda/kernels.h"

namespace larmor::cuda {

enum class Centring { Load, Callbacks, Swap, Kernels, Strided };
const char* centring_name(Centring c);

class CufftPlanCache {
public:
    explicit CufftPlanCache(std::shared_ptr<DeviceContext> ctx);
    ~CufftPlanCache();
    CufftPlanCache(const CufftPlanCache&) = delete;
    CufftPlanCache& operator=(const CufftPlanCache&) = delete;

    // Centred orthonormal FFT of the device array `in` of `shape` over `live` (axes longer than 1)
    // into `out` (same size, must not overlap `in`), queued on the context's stream; `in` is left
    // unchanged. `scratch` is called at most once, for a third buffer of the same size, when the
    // transform needs one (several cuFFT runs with the load callback); it must stay allocated until
    // the queued work is done (stream-ordered memory of the context's stream is).
    void execute(const float2* in, float2* out, const Shape& shape, AxisMask live, FFTDirection dir,
                 const std::function<float2*()>& scratch);

    struct Transform;

private:
    // A shared transform and this session's work area for it.
    struct Use {
        std::shared_ptr<Transform> transform;
        std::shared_ptr<Storage> work;
    };
    Use& get(const Shape& shape, AxisMask live, FFTDirection dir);

    std::shared_ptr<DeviceContext> ctx_;
    std::map<std::vector<size_t>, Use> plans_;
    Use* last_ = nullptr;  // most recent transform and its key
    Shape last_shape_;
    AxisMask last_live_ = 0;
    int last_dkey_ = 0;
};

// Process-wide record for logs, tests and benchmarks: the centring of the transform a session most
// recently took up (made, or found in the process's plans), and whether a request for callbacks (load or callbacks) ever fell back (with the first
// reason).
Centring last_planned_centring();
size_t last_work_area_bytes();  // of that transform
// The process's cuFFT plan registry (all devices), for the status endpoint and tests.
PlanRegistryStats cufft_plan_stats();
void cufft_drop_idle_plans();
bool fft_callbacks_healthy();
std::string fft_callbacks_failure();

}  // namespace larmor::cuda
