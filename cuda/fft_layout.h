#pragma once
// How a centred FFT over any set of axes of a column-major (x fastest) array maps onto cuFFT plans.
// Pure host logic, no CUDA calls, so it is unit-tested on machines without a GPU.
//
// cuFFT's advanced layout expresses a transform of rank <= 3 over contiguous axes with one batch
// dimension. The requested axes are therefore split into runs of <= 3 adjacent axes, each its own
// plan, executed one after the other (the transforms along different axes commute). A run with
// axes below it (inner > 1) and axes above it (outer > 1) has two batch dimensions: the plan
// batches over the larger one and the smaller one becomes a loop of cufftExec calls at shifted
// pointers. Each run carries its own callbacks for the centring of its axes (shifted load, or load
// and store modulation); the factors of different axes multiply and their shifts compose, so the
// runs together give the full centred transform.
#include <vector>

#include "core/backend.h"
#include "cuda/fft_callbacks.h"

namespace larmor::cuda {

struct FftRunLayout {
    std::vector<long long> n;  // transform sizes, slowest axis first (cuFFT order)
    long long stride = 1;      // element distance between neighbours along the run's fastest axis
    long long dist = 0;        // element distance between batched transforms
    long long batch = 1;
    long long execs = 1;       // cufftExec calls ...
    long long step = 0;        // ... at data + e * step
    CallbackSpec callbacks;    // modulation of this run's axes, offsets relative to data + e * step
};

// `live`: axes to transform, all longer than 1 (see detail::check_fft_axes).
std::vector<FftRunLayout> fft_layout(const Shape& shape, AxisMask live, FFTDirection dir);

// True when some axis in `live` has odd length (then the callbacks depend on the direction).
bool has_odd_axis(const Shape& shape, AxisMask live);

// The `strided` centring (cuda/fft_strided.h): each transformed axis above x (stride > 1) is a pass
// of Larmor's own kernel, highest axis first; the first pass reads the input with the centring of
// ALL transformed axes (w[n] = (-1)^n x[(n + N/2) mod N] per axis, even sizes) and the orthonormal
// scale, writing the output buffer; later passes are plain FFTs in place on it; x, when transformed,
// is a last bare cuFFT pass (no callbacks) in place. One pass = one kernel launch over the array seen
// as [inner, n, outer] (inner = the axis's stride).
constexpr int kStridedMaxRank = 8;
constexpr long long kStridedMaxN = 1024;
struct StridedFftArgs {
    long long n = 0;       // axis length, a power of two in [2, kStridedMaxN]
    long long inner = 1;   // the axis's stride: product of the lengths below it
    long long outer = 1;   // product of the lengths above it
    int sign = -1;         // -1 forward, +1 inverse
    int shift = 0;         // 1: first pass, reads with the centring of every transformed axis and the scale
    float scale = 1.f;     // orthonormal scale (first pass), else 1
    // Axes below (fastest first; product = inner) and above (product = outer) this one, and which
    // of them are transformed (bit k = k-th listed axis), for the first pass's shifted read.
    int below_rank = 0;
    long long below_n[kStridedMaxRank] = {};
    unsigned below_live = 0;
    int above_rank = 0;
    long long above_n[kStridedMaxRank] = {};
    unsigned above_live = 0;
};
struct StridedLayout {
    bool ok = false;                     // the shape qualifies; else the caller falls back
    std::vector<StridedFftArgs> passes;  // in execution order
    bool x_pass = false;                 // then a bare cuFFT run along x, in place, last
    FftRunLayout x_run;                  // n = {X}, stride 1, dist X, batch = size / X
};
// Qualifies when some axis above x is transformed, every such axis is a power of two in
// [2, kStridedMaxN], x (when transformed) is even, and every launch fits the grid (< 2^31 blocks).
StridedLayout strided_layout(const Shape& shape, AxisMask live, FFTDirection dir);

}  // namespace larmor::cuda
