// Density weights carried in the traj (phantom.h, StreamWeights): what a chain with DENSITY_PIPE_MENON or
// DENSITY_ANALYTIC computes, so that the same chain with DENSITY_FROM_STREAM reproduces its image.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/backend.h"
#include "core/recon/pipe_menon_density.h"
#include "core/trajectory/density.h"
#include "core/trajectory/trajectory.h"
#include "tools/phantom/phantom.h"

namespace larmor::phantom {
namespace {

// The closed form the chain picks for this trajectory (gadgets/noncart/density_weights.cpp picks it from
// the header's trajectory type, which writer.cpp sets from the same kind).
trajectory::DensityKind analytic_kind(Trajectory t) {
  switch (t) {
    case Trajectory::spiral: return trajectory::DensityKind::hoge;
    case Trajectory::stack_of_stars: return trajectory::DensityKind::stack_of_stars;
    case Trajectory::radial3d: return trajectory::DensityKind::radial_3d;
    default: return trajectory::DensityKind::radial_2d;
  }
}

larmor::Shape image_of(const PhantomSpec& s) {
  const auto n = [](int v) { return static_cast<size_t>(v); };
  return trajectory_dimensions(s) == 3 ? larmor::Shape{n(s.nx), n(s.ny), n(s.nz)} : larmor::Shape{n(s.nx), n(s.ny)};
}

}  // namespace

const char* to_string(StreamWeights w) {
  switch (w) {
    case StreamWeights::none: return "none";
    case StreamWeights::pipe_menon: return "pipe-menon";
    case StreamWeights::analytic: return "analytic";
  }
  return "?";
}

StreamWeights stream_weights_from_string(const std::string& name) {
  for (StreamWeights w : {StreamWeights::none, StreamWeights::pipe_menon, StreamWeights::analytic})
    if (name == to_string(w)) return w;
  throw std::invalid_argument("phantom spec: unknown stream weights '" + name + "' (none, pipe-menon, analytic)");
}

larmor::RArray coords_as_streamed(const larmor::RArray& cycles, const larmor::Shape& image) {
  larmor::RArray out = trajectory::cycles_to_normalised(cycles, image);
  const size_t dims = cycles.shape()[0], m = cycles.size() / dims;
  for (size_t i = 0; i < m; ++i)
    for (size_t d = 0; d < dims; ++d) {
      const double n = static_cast<double>(image[d]);
      float& v = out.data()[i * dims + d];
      v = static_cast<float>(std::clamp(v * n, -n / 2, n / 2));
    }
  return out;
}

larmor::RArray stream_density_weights(const PhantomSpec& s, const larmor::RArray& coords) {
  const larmor::Shape image = image_of(s);
  const larmor::RArray read = coords_as_streamed(coords, image);
  const size_t m = read.size() / read.shape()[0];
  switch (s.weights_in_traj) {
    case StreamWeights::pipe_menon: {
      // The chain's defaults (gadgets/gridding.cpp): 20 iterations, the kernel of NUFFT tolerance 1e-3.
      return pipe_menon_density(make_cpu_backend(), image, read.reshaped({read.shape()[0], m}), PipeMenonOptions{});
    }
    case StreamWeights::analytic: {
      const int partitions = s.trajectory == Trajectory::stack_of_stars ? s.nz : 1;
      return trajectory::density_of(analytic_kind(s.trajectory), read, image, partitions).reshaped({m});
    }
    case StreamWeights::none: break;
  }
  throw std::invalid_argument("stream_density_weights: the spec asks for no weights (weights_in_traj none)");
}

}  // namespace larmor::phantom
