#pragma once
// The exact non-uniform DFT's own kernels (core/linops/nudft.h): one CPU definition
// (core/linops/nudft_cpu.cpp) and one CUDA definition (cuda/nudft.cu; a build without nvcc has a stub
// that throws). They compute the raw sums, without normalisation or voxel basis (the operator adds
// those as per-sample weights):
//   adjoint  image[n, b]   = sum_m samples[m, b] exp(+2 pi i sum_a k[a, m] c_a(n) / N_a)
//   forward  samples[m, b] = sum_n image[n, b]   exp(-2 pi i sum_a k[a, m] c_a(n) / N_a)
// over a grid of `extent` voxels per axis with voxel coordinates c_a(n) = n_a - extent_a / 2. For the
// operator's image the extent is N itself; Toeplitz's kernel Q lives on the 2N grid with the image's N
// in the exponent (core/linops/toeplitz.h).
//
// Accuracy. The phase is kept in turns and reduced to [-1/2, 1/2) before the sine and cosine: each
// product k c is split into its rounded value and its exact rounding error (an fma), so the phase of
// a voxel far from the centre is as accurate as one near it (a plain float product loses 2^-24 of
// up to N^2/4 turns, 1e-5 rad at 128^3). The phase is separable, exp(i 2 pi (k_x x + k_y y + k_z z)) =
// e_x e_y e_z, which both backends use: e_x comes from a table per sample and voxel column, so the
// inner loop is four multiply-adds per sample and voxel and nothing else.
#include <vector>

#include "core/backend.h"

namespace larmor {

struct NudftGeometry {
    int dims = 0;                       // 1, 2 or 3: the rows of coords
    size_t extent[3] = {1, 1, 1};       // voxels per axis of the grid summed over (unused axes 1)
    size_t image[3] = {1, 1, 1};        // N_a in the exponent
    size_t batch = 1;                   // transforms sharing the points (coils)
    size_t points = 0;                  // M
    // Sine and cosine: false = the hardware's fast approximations where a device has them (CUDA
    // __sincosf on the reduced phase, absolute error about 4e-7), true = correctly rounded ones.
    bool accurate = false;

    size_t voxels() const { return extent[0] * extent[1] * extent[2]; }
};

namespace cpu {
// coords: host [dims, M] (axis 0 fastest: point m's coordinates together) in cycles per FOV; samples [M, batch]; image [voxels, batch] (overwritten).
void nudft_adjoint(const RArray& coords, const CArray& samples, CArray& image, const NudftGeometry& g);
void nudft_forward(const RArray& coords, const CArray& image, CArray& samples, const NudftGeometry& g);
}  // namespace cpu

namespace cuda {
// The adjoint kernel's launch shape: `rows` threads per block (= samples per shared-memory tile), each
// summing `voxels` voxels along x. The default is the tuning run's pick (bench/fhd_bench.cpp,
// BM_FhdGpuLaunch; bench/RESULTS.md, H100 2026-11-28): 128 x 16 was within 9 % of the fastest shape on
// each case (3D 128^3: 161 ms, fastest 256 x 16 148 ms, the former 128 x 8 193 ms; 2D 256^2 x 8 coils:
// 29.2 ms, fastest 26.9 ms) and the fastest on the small 2D case (128^2, one coil: 0.191 ms), where
// 256-thread blocks leave SMs idle (0.347 ms). The others are compiled for that run only (fast sincos).
struct NudftAdjointLaunch {
    int rows = 128;
    int voxels = 16;
};
std::vector<NudftAdjointLaunch> nudft_adjoint_launches();

// The same on the backend's device (coords there too), queued on the backend's stream.
void nudft_adjoint(Backend& be, const RArray& coords, const CArray& samples, CArray& image, const NudftGeometry& g,
                   NudftAdjointLaunch launch = {});
void nudft_forward(Backend& be, const RArray& coords, const CArray& image, CArray& samples, const NudftGeometry& g);
}  // namespace cuda

}  // namespace larmor
