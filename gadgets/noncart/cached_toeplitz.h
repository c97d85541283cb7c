#pragma once
// Q's spectrum (core/linops/toeplitz.h) through the server's precompute cache (gadgets/precompute_cache.h):
// keyed by everything Q depends on (the trajectory's hash and point count, the grid, the weights'
// contents, the voxel basis, the method and its accuracy), computed by the first session that needs it,
// uploaded to the asking session's backend by every later one, and persisted where the server keeps a
// directory (a 256^3 spectrum of a kooshball costs 1.5 s exactly on an H100, its upload milliseconds).
#include <memory>
#include <string>

#include "core/linops/toeplitz.h"
#include "gadgets/precompute_cache.h"

namespace larmor {

struct CachedSpectrum {
    CArray spectrum;  // on the session's backend
    PrecomputeCache::Source source = PrecomputeCache::Source::Computed;
    double seconds = 0;          // what it took here: computing, reading the file, or the upload
    double compute_seconds = 0;  // what computing it took, wherever and whenever that was
};

// The cache key of Q for these inputs. coords: host [dims, M]; weights: host [M] or empty (W = I).
std::string toeplitz_key(const Shape& image, const RArray& coords, const RArray& weights, const ToeplitzOptions& options);

// coords: host [dims, M]; weights: host [M] or empty (W = I).
CachedSpectrum cached_toeplitz_spectrum(PrecomputeCache& cache, const std::shared_ptr<Backend>& be, const Shape& image,
                                        const RArray& coords, const RArray& weights, const ToeplitzOptions& options);

}  // namespace larmor
