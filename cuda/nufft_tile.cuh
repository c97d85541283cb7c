#pragma once
// Where the cells of a shared-memory tile (nufft_points.h: bin + width per axis, origin o) lie in the
// periodic grid, for the kernels that copy a tile in (interpolation) or add it back (spreading).
// Worked out per cell, the grid index of flat cell i costs three integer divisions (ix, iy, iz) and
// three modulo wraps, about a hundred instructions: for a 3D tile that was several times the cost of
// the points' own taps. Here the block computes once the wrapped x offset of each tile column and the
// wrapped offset of each row (iy, iz), in shared memory; a cell then costs a float multiply for its
// row, two shared loads and an add.
#include <cuda_runtime.h>

#include "cuda/nufft_device.cuh"
#include "cuda/nufft_points.h"

namespace larmor::cuda {

// The sub-problem of block blockIdx.x (nufft_points.h): its points [first, end) of one bin, and the
// tile's first grid point per axis, the bin's first minus floor(W/2). A point of the bin at u covers
// ceil(u - W/2) ... ceil(u - W/2) + W - 1, which lies in [origin, origin + bin + W). valid is false
// for the surplus blocks of the launch's upper bound (the actual count stays on the device).
struct SubProblem {
    bool valid = false;
    int first = 0, end = 0;
    int o[3] = {0, 0, 0};
};

template <int D, int W>
__device__ __forceinline__ SubProblem sub_problem(const NufftTiling& t, const int* sub_total, const int* sub_bin,
                                                  const int* sub_first, const int* bin_start) {
    SubProblem p;
    const int s = blockIdx.x;
    if (s >= *sub_total) return p;
    const int bin = sub_bin[s];
    p.valid = true;
    p.first = sub_first[s];
    p.end = min(p.first + kSubproblemPoints, bin_start[bin + 1]);
    const int bx = bin % t.nbins[0], by = (bin / t.nbins[0]) % t.nbins[1], bz = bin / (t.nbins[0] * t.nbins[1]);
    p.o[0] = bx * t.bin[0] - W / 2;
    if (D >= 2) p.o[1] = by * t.bin[1] - W / 2;
    if (D >= 3) p.o[2] = bz * t.bin[2] - W / 2;
    return p;
}

// Shared ints the index tables take: one per tile column and one per row.
inline long long tile_index_ints(const NufftTiling& t) {
    return static_cast<long long>(t.tile[0]) + static_cast<long long>(t.tile[1]) * t.tile[2];
}

// Fills the tables in `scratch` (tile_index_ints ints) with the block's threads; the block
// synchronises before the first TileIndex::grid_offset.
__device__ __forceinline__ void fill_tile_index(int* scratch, const NufftTiling& t, int ox, int oy, int oz) {
    for (int i = threadIdx.x; i < t.tile[0]; i += blockDim.x) scratch[i] = wrap_index(ox + i, t.n[0]);
    int* rowoff = scratch + t.tile[0];
    const int rows = t.tile[1] * t.tile[2];
    for (int r = threadIdx.x; r < rows; r += blockDim.x) {
        const int iy = r % t.tile[1], iz = r / t.tile[1];
        rowoff[r] = t.n[0] * (wrap_index(oy + iy, t.n[1]) + t.n[1] * wrap_index(oz + iz, t.n[2]));
    }
}

// The filled tables, read. Made where they are used, so the spreading loop before it keeps no
// registers for them.
class TileIndex {
public:
    __device__ TileIndex(const int* scratch, int tx)
        : xoff_(scratch), rowoff_(scratch + tx), tx_(tx), inv_tx_(1.f / static_cast<float>(tx)) {}

    // The grid index (within one transform; below 2^30, nufft_bin.cu checks) of flat tile cell i.
    // The row is (i + 1/2) / tx in float: exact for i below 2^22, far above the largest tile.
    __device__ __forceinline__ int grid_offset(int i) const {
        const int row = static_cast<int>((static_cast<float>(i) + 0.5f) * inv_tx_);
        return xoff_[i - row * tx_] + rowoff_[row];
    }

private:
    const int* xoff_;
    const int* rowoff_;
    int tx_;
    float inv_tx_;
};

}  // namespace larmor::cuda
