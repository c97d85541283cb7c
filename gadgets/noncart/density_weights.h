#pragma once
// Density compensation weights of a trajectory buffer, as a chain asks for them (proto
// DensityCompensation), computed once per trajectory and kept in the server's precompute cache
// (gadgets/precompute_cache.h) keyed by the trajectory's hash, the image grid and the method: a repeated
// protocol (the same spokes every repetition, a real-time window that cycles through the same angles,
// the next patient's identical scan) pays once. Pipe-Menon and Voronoi weights, which take passes of
// the NUFFT's convolution or a geometry pass per sample, are also written to the cache's directory;
// the closed forms are cheaper to compute than to read back and stay in memory.
#include <memory>
#include <string>

#include "chain.pb.h"
#include "core/backend.h"
#include "gadgets/message.h"
#include "gadgets/precompute_cache.h"

namespace larmor {

struct DensityRequest {
    config::DensityCompensation method = config::DENSITY_PIPE_MENON;
    int iterations = 20;        // Pipe-Menon
    double tolerance = 1e-3;    // Pipe-Menon's kernel
};

// Weights [samples * readouts] (host), per unit k-space area in cycles per FOV (core/trajectory's
// convention), for the coordinates of `tb`. DENSITY_NONE gives ones; DENSITY_FROM_STREAM the weights the
// buffer brought (tb.weights, as sent: refused when it has none). Throws std::runtime_error naming
// the trajectory when the method does not apply (analytic weights of a trajectory that is neither
// radial nor spiral, Voronoi cells of a 3D trajectory).
// Computed ones come from `cache` (the session's: precompute_cache(ctx)); the returned array is shared
// and never modified.
std::shared_ptr<const RArray> density_weights(PrecomputeCache& cache, const std::shared_ptr<Backend>& be,
                                              const TrajectoryBuffer& tb, const DensityRequest& request);

// The cache key of the weights `request` computes for `tb` ("" for DENSITY_NONE and DENSITY_FROM_STREAM,
// which are not cached).
std::string density_key(const TrajectoryBuffer& tb, const DensityRequest& request);

const char* density_name(config::DensityCompensation method);

}  // namespace larmor
