#include "gadgets/noncart/density_weights.h"

#include <list>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include "core/recon/pipe_menon_density.h"
#include "core/trajectory/density.h"
#include "core/trajectory/trajectory.h"

namespace larmor {
namespace {

// Pipe-Menon weights cost tens of spread/interpolation passes: a small LRU cache of its own beside the
// analytic one of core/trajectory (which covers the closed forms), keyed by trajectory hash, grid,
// iterations and kernel tolerance. Weights do not depend on the device, so one cache serves every
// session whatever its backend.
class PipeMenonCache {
public:
    std::shared_ptr<const RArray> get(const std::shared_ptr<Backend>& be, const Shape& image, const RArray& coords,
                                      const DensityRequest& r) {
        const Key key{trajectory::trajectory_hash(coords, image), image.str(), r.iterations, r.tolerance};
        {
            std::lock_guard<std::mutex> lock(m_);
            for (auto it = entries_.begin(); it != entries_.end(); ++it)
                if (it->first == key) {
                    entries_.splice(entries_.begin(), entries_, it);
                    return it->second;
                }
        }
        // Computed outside the lock: two sessions meeting the same new trajectory at once both compute
        // it (same result), rather than one session's reconstruction waiting for the other's.
        PipeMenonOptions o;
        o.iterations = r.iterations;
        o.tolerance = r.tolerance;
        auto w = std::make_shared<const RArray>(pipe_menon_density(be, image, coords, o));
        std::lock_guard<std::mutex> lock(m_);
        entries_.emplace_front(key, w);
        if (entries_.size() > kCapacity) entries_.pop_back();
        return w;
    }

private:
    static constexpr size_t kCapacity = 16;
    using Key = std::tuple<uint64_t, std::string, int, double>;
    std::mutex m_;
    std::list<std::pair<Key, std::shared_ptr<const RArray>>> entries_;
};

PipeMenonCache& pipe_menon_cache() {
    static PipeMenonCache c;
    return c;
}

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

std::shared_ptr<const RArray> density_weights(const std::shared_ptr<Backend>& be, const TrajectoryBuffer& tb,
                                              const DensityRequest& request) {
    const size_t dims = tb.coords.shape()[0], m = tb.coords.size() / dims;
    const RArray coords = tb.coords.reshaped({dims, m});
    switch (request.method) {
        case config::DENSITY_NONE: {
            auto w = std::make_shared<RArray>(RArray::host({m}));
            std::fill(w->data(), w->data() + m, 1.f);
            return w;
        }
        case config::DENSITY_ANALYTIC: {
            auto w = trajectory::cached_density(analytic_kind(tb), tb.coords, tb.image, static_cast<int>(tb.partitions));
            return std::make_shared<const RArray>(w->reshaped({m}));
        }
        case config::DENSITY_VORONOI: {
            if (dims != 2)
                throw std::runtime_error("Voronoi density weights need a 2D trajectory; this one has " +
                                         std::to_string(dims) + "D coordinates (use DENSITY_PIPE_MENON)");
            auto w = trajectory::cached_density(trajectory::DensityKind::voronoi, tb.coords, tb.image);
            return std::make_shared<const RArray>(w->reshaped({m}));
        }
        case config::DENSITY_FROM_STREAM: return stream_weights(tb, m);
        default:
            return pipe_menon_cache().get(be, tb.image, coords, request);
    }
}

}  // namespace larmor
