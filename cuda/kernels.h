#pragma once
// Launchers of the CUDA backend's own kernels (kernels.cu). All are queued on `stream`
// and check the launch; arguments are validated by the caller.
#include <cuda_runtime.h>

#include <string>

namespace larmor::cuda {

constexpr int kMaxRank = 8;

struct Dims {
    int rank = 0;
    long long n[kMaxRank] = {};
};

// Centring modulation of a whole array for the fallback FFT path (no cuFFT callbacks): multiplies
// by the load factors (store == false) or the store factors times `scale` (store == true) of every
// listed axis, see core/cpu/centring.h.
struct ModulationArgs {
    int count = 0;
    long long stride[kMaxRank] = {};
    long long n[kMaxRank] = {};
    int sign = -1;  // s of the transform: -1 forward, +1 inverse
    int store = 0;
    float scale = 1.f;
};
void launch_modulation(float2* data, long long size, const ModulationArgs& args, cudaStream_t stream);

// Centring for even sizes in one pass after a bare cuFFT: for every axis in `live` (all even),
// y[k] = (-1)^(k + N/2) X[(k + N/2) mod N] (fftshift . F . ifftshift = P . F with P a signed half
// swap, see core/cpu/centring.h), times `scale`. P pairs k with k + N/2 on all live axes at once, an
// involution, so each thread swaps one pair in place: one read and one write per element.
struct HalfSwapArgs {
    Dims dims;
    unsigned live = 0;
    float scale = 1.f;
};
void launch_half_swap(float2* data, const HalfSwapArgs& args, cudaStream_t stream);

void launch_crop_pad(const float2* src, const Dims& src_dims, float2* dst, const Dims& dst_dims, cudaStream_t stream);

// True when this binary carries code the current device can run (checked by cuda_available()).
bool kernels_loadable();

}  // namespace larmor::cuda
