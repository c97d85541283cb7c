#include "gadgets/noncart/nufft_plan_cache.h"

#include "core/trajectory/trajectory.h"

namespace larmor {

std::shared_ptr<Nufft> NufftPlanCache::get(PrecomputeCache& cache, const std::shared_ptr<Backend>& be,
                                           const Shape& image, size_t batch, const RArray& coords,
                                           const NufftOptions& opts) {
    const size_t points = coords.size() / coords.shape()[0];
    const uint64_t hash = trajectory::trajectory_hash(coords, image);
    if (!plan_ || image != image_ || batch != batch_ || points != points_ || opts.tolerance != tolerance_ ||
        opts.upsampling != upsampling_) {
        if (!bins_) bins_ = std::make_unique<CachedNufftBins>(cache);
        plan_.reset();  // its memory back before the new one is made
        plan_ = Nufft::create(be, image, batch, coords, opts, bins_.get());
        image_ = image;
        batch_ = batch;
        points_ = points;
        tolerance_ = opts.tolerance;
        upsampling_ = opts.upsampling;
    } else if (hash != hash_) {
        plan_->set_points(coords);
    }
    hash_ = hash;
    return plan_;
}

}  // namespace larmor
