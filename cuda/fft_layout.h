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

}  // namespace larmor::cuda
