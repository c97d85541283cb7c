#include "gadgets/noncart/density_weights.h"

#include <cstdio>
#include <stdexcept>
#include <string>

#include "core/recon/pipe_menon_density.h"
#include "core/trajectory/density.h"
#include "core/trajectory/trajectory.h"

namespace larmor {
namespace {

trajectory::DensityKind analytic_kind(const TrajectoryBuffer& tb) {
    const size_t dims = tb.coords.shape()[0];
    if (tb.trajectory == "spiral") {
        if (dims != 2)
            throw std::runtime_error("analytic density weights: a spiral with " + std::to_string(dims) +
                                     "D coordinates (Hoge's formula is for 2D spirals)");
        return trajectory::DensityKind::hoge;
    }
    if (tb.partitions > 1) return trajectory::DensityKind::stack_of_stars;
    if (dims == 3) return trajectory::DensityKind::radial_3d;
    if (tb.trajectory == "radial" || tb.trajectory == "goldenangle") return trajectory::DensityKind::radial_2d;
    throw std::runtime_error("analytic density weights: no closed form for a 2D '" + tb.trajectory +
                             "' trajectory (the header must say radial, goldenangle or spiral); use "
                             "DENSITY_PIPE_MENON or DENSITY_VORONOI");
}

// The weights that came with the data, as sent (proto DENSITY_FROM_STREAM): the accumulator read and
// checked them, so only their absence is left to refuse, naming the readout that lacked them.
std::shared_ptr<const RArray> stream_weights(const TrajectoryBuffer& tb, size_t m) {
    if (tb.weights.empty())
        throw std::runtime_error(
            "density DENSITY_FROM_STREAM: the trajectory buffer carries no density weights (its newest readout, "
            "acquisition scan_counter " + std::to_string(tb.reference.scan_counter) + ", has trajectory_dimensions " +
            std::to_string(tb.reference.trajectory_dimensions) +
            "); set accumulate_readouts { trajectory_weights: true } for traj whose last component is the weight "
            "(3 = (kx, ky, w), 4 = (kx, ky, kz, w)), or choose a computed density");
    if (tb.weights.size() != m)
        throw std::runtime_error("density DENSITY_FROM_STREAM: " + std::to_string(tb.weights.size()) +
                                 " weights for " + std::to_string(m) + " samples");
    return std::make_shared<const RArray>(tb.weights.reshaped({m}));
}

}  // namespace

const char* density_name(config::DensityCompensation method) {
    switch (method) {
        case config::DENSITY_ANALYTIC: return "analytic";
        case config::DENSITY_VORONOI: return "Voronoi";
        case config::DENSITY_NONE: return "none";
        case config::DENSITY_FROM_STREAM: return "from the stream";
        default: return "Pipe-Menon";
    }
}

std::string density_key(const TrajectoryBuffer& tb, const DensityRequest& request) {
    const size_t dims = tb.coords.shape()[0], m = tb.coords.size() / dims;
    const unsigned long long hash = trajectory::trajectory_hash(tb.coords, tb.image);
    char key[256];
    switch (request.method) {
        case config::DENSITY_NONE:
        case config::DENSITY_FROM_STREAM: return "";
        case config::DENSITY_ANALYTIC:
            std::snprintf(key, sizeof key, "density v1 analytic %s partitions %zu image %s points %zu trajectory %016llx",
                          trajectory::to_string(analytic_kind(tb)), tb.partitions, tb.image.str().c_str(), m, hash);
            return key;
        case config::DENSITY_VORONOI:
            std::snprintf(key, sizeof key, "density v1 voronoi image %s points %zu trajectory %016llx",
                          tb.image.str().c_str(), m, hash);
            return key;
        default:
            std::snprintf(key, sizeof key,
                          "density v1 pipe-menon iterations %d tolerance %g image %s points %zu trajectory %016llx",
                          request.iterations, request.tolerance, tb.image.str().c_str(), m, hash);
            return key;
    }
}

std::shared_ptr<const RArray> density_weights(PrecomputeCache& cache, const std::shared_ptr<Backend>& be,
                                              const TrajectoryBuffer& tb, const DensityRequest& request) {
    const size_t dims = tb.coords.shape()[0], m = tb.coords.size() / dims;
    switch (request.method) {
        case config::DENSITY_NONE: {
            auto w = std::make_shared<RArray>(RArray::host({m}));
            std::fill(w->data(), w->data() + m, 1.f);
            return w;
        }
        case config::DENSITY_FROM_STREAM: return stream_weights(tb, m);
        case config::DENSITY_VORONOI:
            if (dims != 2)
                throw std::runtime_error("Voronoi density weights need a 2D trajectory; this one has " +
                                         std::to_string(dims) + "D coordinates (use DENSITY_PIPE_MENON)");
            break;
        default: break;
    }
    const std::string key = density_key(tb, request);  // refuses an analytic request without a closed form
    const bool persistent = request.method != config::DENSITY_ANALYTIC;
    const PrecomputeCache::RealEntry e = cache.get_real(key, persistent, [&]() -> RArray {
        switch (request.method) {
            case config::DENSITY_ANALYTIC:
                return trajectory::density_of(analytic_kind(tb), tb.coords, tb.image, static_cast<int>(tb.partitions))
                    .reshaped({m});
            case config::DENSITY_VORONOI:
                return trajectory::density_of(trajectory::DensityKind::voronoi, tb.coords, tb.image).reshaped({m});
            default: {
                PipeMenonOptions o;
                o.iterations = request.iterations;
                o.tolerance = request.tolerance;
                return be->to_host(pipe_menon_density(be, tb.image, tb.coords.reshaped({dims, m}), o));
            }
        }
    });
    if (e.value->size() != m)
        throw std::runtime_error("density weights: the cache's entry '" + key + "' holds " +
                                 std::to_string(e.value->size()) + " weights for " + std::to_string(m) + " samples");
    return e.value;
}

}  // namespace larmor
