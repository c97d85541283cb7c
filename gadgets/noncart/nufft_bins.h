#pragma once
// The NUFFT's binned points kept in the server's precompute cache (gadgets/precompute_cache.h), so the
// sessions of a repeated protocol on one device sort the trajectory once: the key is the device, the
// oversampled grid, the kernel width, the batch and the wrapped coordinates themselves (their
// hash_words), which is everything the binning reads. CUDA sets are binned with the cache's own backend on
// that device, so their memory is charged to the cache's budget there and survives the session that
// asked first; CPU sets are host vectors charged to the cache's host budget. When the cache cannot hold
// a set (its budget is full, or the device is out of memory) the plan bins its own, as without a cache.
#include "core/linops/nufft.h"
#include "gadgets/precompute_cache.h"

namespace larmor {

class CachedNufftBins final : public NufftBinSource {
public:
    explicit CachedNufftBins(PrecomputeCache& cache) : cache_(cache) {}
    std::shared_ptr<const NufftPointSet> bins(Backend& be, const NufftGrid& g, const RArray& u,
                                              const RArray& u_host) override;
    // Where the last set came from (for logs and tests).
    PrecomputeCache::Source last_source() const { return last_; }

private:
    PrecomputeCache& cache_;
    PrecomputeCache::Source last_ = PrecomputeCache::Source::Computed;
};

// The cache key of a binning.
std::string nufft_bins_key(const Backend& be, const NufftGrid& g, const RArray& u_host);

}  // namespace larmor
