#pragma once
// The exact non-uniform DFT as an operator: forward F (image -> k-space samples at arbitrary points),
// adjoint F^H, whose application to the data is the "FHd" of Stone et al., "Accelerating advanced MRI
// reconstructions on GPUs", J. Parallel Distrib. Comput. 68:1307 (2008), eq. (3):
//   F^H d (x_n) = sum_m phi*(k_m) d(k_m) exp(i 2 pi k_m . x_n),
// with phi the Fourier transform of the voxel basis function. No gridding, no kernel, no
// approximation: O(N M) work, which a GPU makes affordable (core/linops/nudft_kernels.h).
//
// Same conventions as the NUFFT (core/linops/nufft.h), so either can stand in for the other:
// ishape = [image..., batch] (image = [N0], [N0, N1] or [N0, N1, N2]), oshape = [M, batch], and
//   forward: y[m, b] = N^{-1/2} phi(k_m) sum_n x[n, b] exp(-2 pi i sum_a k[a, m] (n_a - N_a/2) / N_a),
// N = prod N_a, k in cycles per FOV. With the Dirac basis (phi = 1) it is what the NUFFT approximates.
#include <memory>
#include <string>
#include <vector>

#include "core/linops/linop.h"

namespace larmor {

// The voxel basis function: Dirac (a voxel is a point sample of the object; phi = 1) or Box (a voxel
// is the object's mean over its cube; phi(k) = prod_a sinc(pi k_a / N_a), 2/pi at the edge of
// k-space along one axis). The box is the physically modelled choice of Stone et al.
enum class VoxelBasis { Dirac, Box };
const char* voxel_basis_name(VoxelBasis b);

struct NudftOptions {
    VoxelBasis basis = VoxelBasis::Dirac;
    // Sine and cosine: false = the device's fast approximations (CUDA __sincosf on the phase reduced
    // to one turn: relative error of F^H d about 1e-6), true = accurate ones (sincospif). The CPU
    // always tabulates its factors in double.
    bool accurate_sincos = false;
};

// phi(k_m) for each point of coords [dims, M] (host), for an image of `image`'s shape.
std::vector<float> voxel_basis_weights(const RArray& coords_host, const Shape& image, VoxelBasis basis);

// coords: RArray [dims, M] (dims = image rank), cycles per FOV, on the host or the backend's device.
// Any finite point is accepted (the exact DFT has no grid to fall off); a NaN or infinite coordinate
// is refused naming the point and axis.
LinOp nudft(std::shared_ptr<Backend> be, const Shape& image, size_t batch, const RArray& coords,
            const NudftOptions& opts = {});

}  // namespace larmor
