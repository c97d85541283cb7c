// The argument checks of the NUFFT's pad and crop (core/linops/nufft_kernels.h), one definition for
// both devices' kernels.
#include <stdexcept>
#include <string>

#include "core/linops/nufft_kernels.h"

namespace larmor {

void check_nufft_pad_arguments(const NufftGrid& g, const Shape& image, const RArray& weight, const CArray& x,
                               const CArray& grid, Device device, const char* who) {
    if (image.rank() != g.dims)
        throw std::invalid_argument(std::string(who) + ": image " + image.str() + " has " +
                                    std::to_string(image.rank()) + " axes, the grid " + std::to_string(g.dims));
    size_t image_size = 1;
    for (int d = 0; d < g.dims; ++d) {
        if (static_cast<long long>(image[d]) > g.n[d])
            throw std::invalid_argument(std::string(who) + ": image " + image.str() + " is larger than the grid along axis " +
                                        std::to_string(d) + " (" + std::to_string(g.n[d]) + ")");
        image_size *= image[d];
    }
    const size_t batch = static_cast<size_t>(g.batch);
    if (weight.size() != image_size || x.size() != image_size * batch ||
        grid.size() != static_cast<size_t>(g.grid_size()) * batch)
        throw std::invalid_argument(std::string(who) + ": weight " + weight.shape().str() + ", image " +
                                    x.shape().str() + " and grid " + grid.shape().str() + " do not match image " +
                                    image.str() + " x batch " + std::to_string(g.batch) + " on a grid of " +
                                    std::to_string(g.grid_size()) + " points");
    for (const Device d : {weight.device(), x.device(), grid.device()})
        if (d != device)
            throw std::invalid_argument(std::string(who) + ": arrays must be on " + device_name(device));
}

}  // namespace larmor
