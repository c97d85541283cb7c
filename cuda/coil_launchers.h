#pragma once
// Launchers of the CUDA kernels of the coil maps and combinations (core/coils: coil reductions,
// Walsh maps). All are queued on `stream` and check the launch; arguments are validated by the caller
// (core/coils/coil_checks.h).
#include <cuda_runtime.h>

#include <cstddef>

namespace larmor::coils::cuda {

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
// The Walsh-combined image y [nx, ny, slices] (coils::walsh_combine): the maps are interpolated
// from the grid inside the combination and never stored; scratch needs walsh_combine_scratch_bytes.
size_t walsh_combine_scratch_bytes(const WalshDims& d);
void launch_walsh_combine(const float2* x, const WalshDims& d, void* scratch, float2* y, cudaStream_t stream);

}  // namespace larmor::coils::cuda
