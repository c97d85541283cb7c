#pragma once
// The backprojection kernels of the radial FBP (core/recon/radial_fbp.h): one CPU definition
// (core/recon/radial_fbp_cpu.cpp) and one CUDA definition (cuda/radial_backprojection.cu; a build
// without nvcc has core/recon/radial_fbp_cuda_stub.cpp, which throws).
//
// Contract, shared by both devices:
//  proj   CArray [samples, spokes, coils]: filtered projections, already scaled (every constant of
//         the reconstruction is folded into the filter), sample p of spoke j of coil c at
//         p + samples (j + spokes c).
//  steps  RArray [4, spokes]: (a_j, b_j, c_j, d_j). a_j, b_j: the change of the projection
//         coordinate p (in samples) per pixel along axis 0 and axis 1, so pixel (n0, n1) of spoke j
//         reads
//             p = samples/2 + (n0 - N0/2) a_j + (n1 - N1/2) b_j
//         (samples/2 and N/2 in integer division), linearly interpolated between floor(p) and
//         floor(p) + 1, a neighbour outside [0, samples) counting as 0. c_j, d_j: the spoke's k-space
//         shift in cycles per pixel along axis 0 and axis 1; the value read is multiplied by
//             exp(2 pi i phi),  phi = (n0 - N0/2) c_j + (n1 - N1/2) d_j   (cycles),
//         the Fourier shift theorem for a spoke whose FFT origin (sample samples/2) is not at k = 0.
//         A spoke with c_j = d_j = 0 (a centred one) must take no phase at all, so centred data cost
//         and round exactly as before; phi is reduced to [-1/2, 1/2] cycles before the sine and cosine.
//  out    Coils: CArray [N0, N1, coils], out = sum_j proj_j(p) exp(2 pi i phi_j);
//         Rss:   CArray [N0, N1], out = sqrt(sum_c |sum_j proj_jc(p) exp(2 pi i phi_j)|^2) + 0i.
// Everything is on the backend's device (host memory for the CPU).
#include "core/backend.h"

namespace larmor {

struct FbpGeometry {
    long long n0 = 0, n1 = 0;  // image
    long long samples = 0, spokes = 0, coils = 0;
    // Some spoke has c_j or d_j != 0. False lets a kernel leave the phase out altogether (on the GPU
    // the per-spoke test alone cost 4 % of a centred 3-coil reconstruction).
    bool phased = false;
};

enum class FbpOutput { Coils, Rss };

namespace cpu {
void radial_backproject(const CArray& proj, const RArray& steps, const FbpGeometry& g, FbpOutput mode, CArray& out);
}  // namespace cpu

namespace cuda {
void radial_backproject(Backend& be, const CArray& proj, const RArray& steps, const FbpGeometry& g, FbpOutput mode,
                        CArray& out);
}  // namespace cuda

}  // namespace larmor
