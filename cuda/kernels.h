#pragma once
// Launchers of the CUDA backend's own kernels (kernels.cu, walsh.cu). All are queued on `stream`
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

// x [pixels, coils] column-major; y [pixels].
void launch_rss(const float2* x, long long pixels, long long coils, float2* y, cudaStream_t stream);
void launch_combine(const float2* x, const float2* maps, long long pixels, long long coils, float2* y,
                    cudaStream_t stream);

// Walsh maps (walsh.cu): x and maps [nx, ny, slices, coils], exact eigenvectors every `stride`
// pixels in x and y, interpolated in between; scratch needs walsh_scratch_bytes(dims).
constexpr int kWalshMaxCoils = 64;
struct WalshDims {
    long long nx = 0, ny = 0, slices = 0;
    int coils = 0;
    int kernel = 1;
    int stride = 1;
};
size_t walsh_scratch_bytes(const WalshDims& d);
void launch_walsh(const float2* x, const WalshDims& d, void* scratch, float2* maps, cudaStream_t stream);
// The Walsh-combined image y [nx, ny, slices] (Backend::walsh_combine): the maps are interpolated
// from the grid inside the combination and never stored; scratch needs walsh_combine_scratch_bytes.
size_t walsh_combine_scratch_bytes(const WalshDims& d);
void launch_walsh_combine(const float2* x, const WalshDims& d, void* scratch, float2* y, cudaStream_t stream);

// True when this binary carries code the current device can run (checked by cuda_available()).
bool kernels_loadable();

}  // namespace larmor::cuda
