#pragma once
// The CUDA NUFFT's point set (core/linops/nufft_kernels.h) and the tiling it was sorted for, shared by
// the binning (nufft_bin.cu), spreading (nufft_spread.cu) and interpolation (nufft_interp.cu) kernels.
// The layout follows cuFINUFFT (Shih et al., IPDPSW 2021, sec. III): the oversampled grid is cut into
// rectangular bins; points are sorted by bin (a counting sort, so the order inside a bin is arbitrary)
// and each bin's points are split into sub-problems of at most kSubproblemPoints, the unit of work of
// one thread block of the shared-memory spreader.
#include <memory>

#include "core/linops/nufft_kernels.h"

namespace larmor::cuda {

// Points per sub-problem: bounds one block's work where points cluster (radial centres).
constexpr int kSubproblemPoints = 1024;
// Largest shared-memory tile the bin shape may need (bytes): three such blocks fit in one H100 SM.
constexpr int kMaxTileBytes = 64 * 1024;

struct NufftTiling {
    int dims = 0;
    int width = 0;
    int n[3] = {1, 1, 1};     // grid per axis (1 for unused axes)
    int bin[3] = {1, 1, 1};   // bin extent per axis, a power of two
    int nbins[3] = {1, 1, 1};  // bins per axis: ceil(n / bin)
    int tile[3] = {1, 1, 1};  // shared-memory tile per axis: bin + width on used axes, else 1
    long long bin_count() const { return static_cast<long long>(nbins[0]) * nbins[1] * nbins[2]; }
    long long tile_size() const { return static_cast<long long>(tile[0]) * tile[1] * tile[2]; }
};

// The bin shape for a grid and width: 2D 32x32 and 1D 1024 (tiles of a few KB); in 3D the largest of
// 16x16x8, 8x8x8, 8x8x4, 4x4x4 whose tile (bin + width per axis, complex float) fits kMaxTileBytes.
NufftTiling nufft_tiling(const NufftGrid& g);

class CudaNufftPointSet final : public NufftPointSet {
public:
    CudaNufftPointSet(Backend& be, const NufftGrid& g);
    Device device() const override { return Device::Cuda; }
    size_t bytes() const override { return coords.bytes() + ints.bytes(); }

    NufftTiling tiling;
    long long points = 0;
    long long max_subproblems = 0;  // nbins + ceil(M / kSubproblemPoints): at least the actual number
    int device_id = 0;

    // Device arrays, all charged to the session's device budget (allocated through the Backend).
    RArray coords;  // [M, dims]: the wrapped coordinates in sorted order, axis a at a * M
    RArray ints;    // int32 storage of the index arrays below (reinterpreted floats, both 4 bytes)
    int* perm = nullptr;       // [M] original index of sorted point i
    int* bin_of = nullptr;     // [M] bin of original point m (scratch of the sort)
    int* rank_of = nullptr;    // [M] rank of original point m within its bin (scratch of the sort)
    int* bin_count = nullptr;  // [nbins]
    int* bin_start = nullptr;  // [nbins + 1] first sorted index of each bin; bin_start[nbins] = M
    int* sub_start = nullptr;  // [nbins + 1] first sub-problem of each bin
    int* sub_bin = nullptr;    // [max_subproblems] bin of each sub-problem
    int* sub_first = nullptr;  // [max_subproblems] first sorted point of each sub-problem
    int* sub_total = nullptr;  // [1] number of sub-problems

    const float* coord(int axis) const { return coords.data() + static_cast<long long>(axis) * points; }
};

// The point set behind `p`, checked against `g` (same dims, grid, width and M; any batch and beta),
// or std::invalid_argument naming what differs. `what` names the caller.
const CudaNufftPointSet& cuda_point_set(const NufftGrid& g, const NufftPointSet& p, const char* what);

// Checks the fields of g (dims 1..3, n >= 1, width 2..16, batch >= 1, M >= 0, grid and M at most 2^30).
void check_nufft_grid(const NufftGrid& g, const char* what);

// Whether the per-bin shared-memory tiles beat one thread per point, for spreading and interpolation
// alike: the tile must fit kMaxTileBytes, and a bin must hold enough points that its tile (copied in
// or added back once per sub-problem) costs less than width^dims global accesses per point (average
// points per bin above tile / width^dims). Sparse points and small grids go to GM-sort.
bool shared_tiles_pay_off(const NufftGrid& g, const NufftTiling& t);

// How nufft_spread accumulates: per-bin shared-memory tiles ("SM") or one thread per sorted point
// adding straight into global memory ("GM-sort"), Shih et al. sec. III-A/B; OwnedPlanes is the shared
// tile in 3D with each warp the only writer of its z-planes, so without shared atomics
// (nufft_spread_planes.cu; widths up to 8). Auto picks by density, and OwnedPlanes over SharedTiles
// where it applies.
enum class SpreadMethod { Auto, SharedTiles, GlobalSorted, OwnedPlanes };
// The method Auto resolves to for this grid and point set.
SpreadMethod nufft_spread_choice(const NufftGrid& g, const NufftPointSet& p);
// nufft_spread with an explicit method (tests and benchmarks compare both).
void nufft_spread_with(Backend& be, const NufftGrid& g, const NufftPointSet& p, const CArray& samples, CArray& grid,
                       SpreadMethod method);

// How nufft_interp gathers: one thread per sorted point reading the grid through L1/L2 ("GM-sort"),
// or per sub-problem, the bin's tile (bin + width per axis) copied into shared memory with coalesced
// loads and each point read from there ("SM", cuFINUFFT's type-2 method 2). Auto picks by density,
// with the same rule as spreading. TileRows (3D, widths up to 8): the shared tile too, but 16 lanes per
// point, one per (window row, plane parity), so the lanes of a point read distinct banks
// (cuda/nufft_interp.cu); chosen explicitly until it is timed (Auto keeps the two measured methods).
enum class InterpMethod { Auto, SharedTiles, GlobalSorted, TileRows };
InterpMethod nufft_interp_choice(const NufftGrid& g, const NufftPointSet& p);
void nufft_interp_with(Backend& be, const NufftGrid& g, const NufftPointSet& p, const CArray& grid, CArray& samples,
                       InterpMethod method);

}  // namespace larmor::cuda
