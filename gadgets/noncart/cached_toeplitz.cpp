#include "gadgets/noncart/cached_toeplitz.h"

#include <chrono>
#include <cstdio>
#include <string>

#include "core/trajectory/trajectory.h"

namespace larmor {

std::string toeplitz_key(const Shape& image, const RArray& coords, const RArray& weights, const ToeplitzOptions& o) {
    char key[320];
    std::snprintf(key, sizeof key,
                  "toeplitz-q v1 image %s points %zu trajectory %016llx weights %016llx basis %s method %s "
                  "accurate %d tolerance %g",
                  image.str().c_str(), coords.shape().rank() > 1 ? coords.shape()[1] : coords.size(),
                  static_cast<unsigned long long>(trajectory::trajectory_hash(coords, image)),
                  static_cast<unsigned long long>(weights.empty() ? 0 : fnv1a64(weights.data(), weights.bytes())),
                  voxel_basis_name(o.basis), o.method == ToeplitzOptions::Method::Exact ? "exact" : "nufft",
                  o.accurate_sincos ? 1 : 0, o.method == ToeplitzOptions::Method::Exact ? 0.0 : o.nufft_tolerance);
    return key;
}

CachedSpectrum cached_toeplitz_spectrum(PrecomputeCache& cache, const std::shared_ptr<Backend>& be, const Shape& image,
                                        const RArray& coords, const RArray& weights, const ToeplitzOptions& o) {
    const auto t0 = std::chrono::steady_clock::now();
    const PrecomputeCache::Entry e = cache.get(toeplitz_key(image, coords, weights, o), true, [&] {
        CArray q = toeplitz_spectrum(be, image, coords, weights, o);
        return be->to_host(q);
    });
    CachedSpectrum out;
    // The CPU backend's to_device would hand out the cached storage itself: the session gets its own copy.
    if (be->device() == Device::Cpu) {
        out.spectrum = be->empty(e.value->shape());
        be->copy(*e.value, out.spectrum);
    } else {
        out.spectrum = be->to_device(*e.value);
    }
    out.source = e.source;
    out.compute_seconds = e.compute_seconds;
    be->synchronize();
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

}  // namespace larmor
