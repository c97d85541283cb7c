#pragma once
// The NUFFT plan a non-Cartesian gadget keeps between buffers: rebuilt when the image grid, the number
// of points or of coils changes, given new points (set_points: only the binning is redone) when the
// trajectory changes (a real-time window's spokes move every frame), and reused untouched when the
// trajectory repeats (same hash). A new plan takes its binned points from the server's precompute cache
// (gadgets/noncart/nufft_bins.h), where another session with the same trajectory may have left them.
#include <cstdint>
#include <memory>

#include "core/linops/nufft.h"
#include "gadgets/noncart/nufft_bins.h"

namespace larmor {

class NufftPlanCache {
public:
    // The plan for coords [dims, M] on `image` x `batch` on `be`; cache: the session's
    // (precompute_cache(ctx)).
    std::shared_ptr<Nufft> get(PrecomputeCache& cache, const std::shared_ptr<Backend>& be, const Shape& image,
                               size_t batch, const RArray& coords, const NufftOptions& opts);

private:
    std::unique_ptr<CachedNufftBins> bins_;
    std::shared_ptr<Nufft> plan_;
    Shape image_;
    size_t batch_ = 0, points_ = 0;
    double tolerance_ = 0, upsampling_ = 0;
    uint64_t hash_ = 0;
};

}  // namespace larmor
