#pragma once
// The NUFFT's convolution kernels (core/linops/nufft.h): binning the non-uniform points, spreading
// them onto the oversampled grid (the adjoint, "gridding") and interpolating the grid at them (the
// forward). One CPU definition (core/linops/nufft_cpu.cpp: threaded, tiled) and one CUDA definition
// (cuda/nufft_*.cu: points sorted into tiles and accumulated in shared memory, interpolation by
// gather; a build without nvcc has core/linops/nufft_cuda_stub.cpp, which throws).
//
// The kernel is the "exponential of semicircle" of Barnett, Magland & af Klinteberg (SIAM J. Sci.
// Comput. 41:C479, 2019): phi(z) = exp(beta (sqrt(1 - z^2) - 1)) for |z| <= 1, else 0, with
// z = 2 (g - u) / width for grid point g and point coordinate u (both in grid units). Everything above
// these functions (choosing width and beta from the tolerance, deapodisation, zero-padding, the FFT,
// scaling) is the operator's, so the two devices only differ here.
#include <memory>

#include "core/backend.h"

namespace larmor {

struct NufftGrid {
    int dims = 2;                    // 1, 2 or 3
    long long n[3] = {1, 1, 1};      // oversampled grid per axis, axis 0 fastest; 1 for unused axes
    long long batch = 1;             // transforms that share the points (coils)
    long long points = 0;            // M
    int width = 0;                   // kernel support in grid points, 2..16
    float beta = 0.f;                // shape parameter of phi

    long long grid_size() const { return n[0] * n[1] * n[2]; }
};

// The points of a plan as one device keeps them (sorted, binned); made by nufft_bin_points and reused
// by every spread and interpolation until the points change ("set points" of a FINUFFT plan).
// A point set is not modified once binned, so plans of several sessions on one device may share it
// (gadgets/noncart/nufft_bins.h); the CPU kernels keep their tile buffers per thread, not in the set.
class NufftPointSet {
public:
    virtual ~NufftPointSet() = default;
    virtual Device device() const = 0;
    // Memory the set holds (host vectors on the CPU, device arrays on CUDA), for a cache's accounting.
    virtual size_t bytes() const = 0;
};

// Arguments shared by both devices:
//  u       RArray [dims, M] (coordinate fastest, the ISMRMRD trajectory layout), each coordinate in
//          grid units, already wrapped into [0, n_a); on the backend's device (host for the CPU).
//  samples CArray [M, batch]: sample m of transform b at m + b M.
//  grid    CArray [n0, n1, n2, batch] (rank = dims + 1): periodic; point u covers grid points g with
//          |g - u| < width / 2 per axis (wrapping around the edges).
// spread overwrites grid with sum_m phi(g - u_m) samples[m]; interp overwrites samples with
// sum_g phi(g - u_m) grid[g]. So interp is exactly the adjoint of spread.
//
// The steps around the convolution, fused so that the oversampled grid is written or read once:
//  pad     grid = 0, then for each image pixel i (per axis a, offset j_a = i_a - N_a/2 from the centre)
//          grid[j mod n] = weight[i] x[i] (every transform of the batch); image = [N...] (dims axes),
//          x [image..., batch], weight [image] real.
//  crop    its adjoint: x[i] = weight[i] grid[j mod n].
//  fft     the plain DFT (unnormalised, not centred, in place) over the dims axes of grid [n..., batch],
//          batched over the transforms: exp(-2 pi i g j / n) forward, exp(+...) inverse.
// The grid of the convolution keeps k = 0 at its centre n/2 (the points are u = sigma k + n/2, see
// nufft.cpp): for even n, reading a pixel at j mod n and multiplying it by (-1)^j (folded into the
// operator's weight) is the same as a centred FFT, without its shift passes or callbacks.
// Two entry points, because a plan made for the image may skip work that the NUFFT never sees:
//  from_image  the forward's transform: grid is zero outside the image's footprint (what pad leaves),
//              and the whole result is defined;
//  to_image    the adjoint's: any grid, but only the footprint of the result is defined (what crop reads).
// Both are the full transform in 1D and 2D; in 3D both devices prune along z.
class NufftGridFft {
public:
    virtual ~NufftGridFft() = default;
    virtual void from_image(CArray& grid, FFTDirection dir) = 0;
    virtual void to_image(CArray& grid, FFTDirection dir) = 0;
};

// The point set of u for grid g on be's device (cpu:: or cuda::nufft_bin_points); its device arrays are
// allocated by (and charged to) `be`.
std::unique_ptr<NufftPointSet> nufft_bin_points(Backend& be, const NufftGrid& g, const RArray& u);

// Throws std::invalid_argument naming the shapes unless image has the grid's dims and fits it, weight
// holds one value per pixel, x and grid hold batch images and grids, and all three live on `device`.
void check_nufft_pad_arguments(const NufftGrid& g, const Shape& image, const RArray& weight, const CArray& x,
                               const CArray& grid, Device device, const char* who);

namespace cpu {
void nufft_pad(const NufftGrid& g, const Shape& image, const RArray& weight, const CArray& x, CArray& grid);
void nufft_crop(const NufftGrid& g, const Shape& image, const RArray& weight, const CArray& grid, CArray& x);
// image: the operator's image shape (its footprint on the grid decides what a 3D plan prunes).
std::unique_ptr<NufftGridFft> nufft_grid_fft(const NufftGrid& g, const Shape& image);
std::unique_ptr<NufftPointSet> nufft_bin_points(const NufftGrid& g, const RArray& u);
void nufft_spread(const NufftGrid& g, const NufftPointSet& p, const CArray& samples, CArray& grid);
void nufft_interp(const NufftGrid& g, const NufftPointSet& p, const CArray& grid, CArray& samples);
}  // namespace cpu

namespace cuda {
void nufft_pad(Backend& be, const NufftGrid& g, const Shape& image, const RArray& weight, const CArray& x,
               CArray& grid);
void nufft_crop(Backend& be, const NufftGrid& g, const Shape& image, const RArray& weight, const CArray& grid,
                CArray& x);
// image: the operator's image shape (its footprint on the grid decides what the 3D plan prunes).
std::unique_ptr<NufftGridFft> nufft_grid_fft(Backend& be, const NufftGrid& g, const Shape& image);
std::unique_ptr<NufftPointSet> nufft_bin_points(Backend& be, const NufftGrid& g, const RArray& u);
void nufft_spread(Backend& be, const NufftGrid& g, const NufftPointSet& p, const CArray& samples, CArray& grid);
void nufft_interp(Backend& be, const NufftGrid& g, const NufftPointSet& p, const CArray& grid, CArray& samples);
}  // namespace cuda

}  // namespace larmor
