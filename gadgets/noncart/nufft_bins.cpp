#include "gadgets/noncart/nufft_bins.h"

#include <cstdio>
#include <string>

#include <spdlog/spdlog.h>

namespace larmor {

std::string nufft_bins_key(const Backend& be, const NufftGrid& g, const RArray& u_host) {
    char key[256];
    const int device = be.device_index();
    std::snprintf(key, sizeof key,
                  "nufft-bins v1 %s%d dims %d grid %lldx%lldx%lld width %d batch %lld points %lld coordinates %016llx",
                  device < 0 ? "cpu" : "cuda:", device < 0 ? 0 : device, g.dims, g.n[0], g.n[1], g.n[2], g.width,
                  g.batch, g.points, static_cast<unsigned long long>(hash_words(u_host.data(), u_host.bytes())));
    return key;
}

std::shared_ptr<const NufftPointSet> CachedNufftBins::bins(Backend& be, const NufftGrid& g, const RArray& u,
                                                           const RArray& u_host) {
    const int device = be.device_index();
    const std::string key = nufft_bins_key(be, g, u_host);
    try {
        const auto value = cache_.get_object(
            key, device,
            [&]() -> PrecomputeCache::Object {
                if (device < 0) {
                    std::shared_ptr<const NufftPointSet> set = nufft_bin_points(be, g, u);
                    return {set, set->bytes(), 0};
                }
                // u is written on the session's stream; the cache's backend reads it on its own.
                be.synchronize();
                std::unique_lock<std::mutex> lock;
                Backend& owner = cache_.device_backend(device, lock);
                std::shared_ptr<const NufftPointSet> set = nufft_bin_points(owner, g, u);
                owner.synchronize();
                return {set, 0, set->bytes()};
            },
            &last_);
        return std::static_pointer_cast<const NufftPointSet>(value);
    } catch (const MemoryBudgetExceeded& e) {
        spdlog::info("NUFFT bins not cached ({}): binned by the session", e.what());
    }
    last_ = PrecomputeCache::Source::Computed;
    return nufft_bin_points(be, g, u);
}

}  // namespace larmor
