// One entry point for the closed-form and Voronoi weights of density.h, by kind (the server keeps what
// it computes in its precompute cache, gadgets/precompute_cache.h).
#include <stdexcept>
#include <string>

#include "core/trajectory/density.h"

namespace larmor::trajectory {

RArray density_of(DensityKind kind, const RArray& coords, const Shape& image, int partitions) {
    switch (kind) {
        case DensityKind::radial_2d: return density_radial_2d(coords);
        case DensityKind::stack_of_stars: return density_stack_of_stars(coords, partitions);
        case DensityKind::radial_3d: return density_radial_3d(coords);
        case DensityKind::voronoi:
            if (image.rank() < 1) throw std::invalid_argument("density_of: voronoi needs the grid size, got " + image.str());
            return density_voronoi(coords, image[0] / 2.0);
        case DensityKind::hoge: return density_hoge(coords);
    }
    throw std::invalid_argument("density_of: unknown kind " + std::to_string(static_cast<int>(kind)));
}

}  // namespace larmor::trajectory
