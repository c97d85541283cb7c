#pragma once
// Density compensation weights of a trajectory buffer, as a chain asks for them (proto
// DensityCompensation), computed once per trajectory and kept in a process-wide cache keyed by the
// trajectory's hash, the image grid and the method: a repeated protocol (the same spokes every
// repetition, or a real-time window that cycles through the same angles) pays once.
#include <memory>

#include "chain.pb.h"
#include "core/backend.h"
#include "gadgets/message.h"

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
std::shared_ptr<const RArray> density_weights(const std::shared_ptr<Backend>& be, const TrajectoryBuffer& tb,
                                              const DensityRequest& request);

const char* density_name(config::DensityCompensation method);

}  // namespace larmor
