// The NUFFT's CUDA kernels in a build without nvcc (core/CMakeLists.txt drops this file when cuda/ is
// compiled): a clear refusal; no CUDA backend can exist in such a build anyway.
#include <string>

#include "core/linops/nufft_kernels.h"
#include "core/no_cuda.h"

namespace larmor::cuda {
std::unique_ptr<NufftPointSet> nufft_bin_points(Backend&, const NufftGrid&, const RArray&) {
    throw_no_cuda("nufft_bin_points");
}
void nufft_spread(Backend&, const NufftGrid&, const NufftPointSet&, const CArray&, CArray&) { throw_no_cuda("nufft_spread"); }
void nufft_interp(Backend&, const NufftGrid&, const NufftPointSet&, const CArray&, CArray&) { throw_no_cuda("nufft_interp"); }
void nufft_pad(Backend&, const NufftGrid&, const Shape&, const RArray&, const CArray&, CArray&) { throw_no_cuda("nufft_pad"); }
void nufft_crop(Backend&, const NufftGrid&, const Shape&, const RArray&, const CArray&, CArray&) { throw_no_cuda("nufft_crop"); }
std::unique_ptr<NufftGridFft> nufft_grid_fft(Backend&, const NufftGrid&, const Shape&) { throw_no_cuda("nufft_grid_fft"); }

}  // namespace larmor::cuda
