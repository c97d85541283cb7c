#include "gadgets/sense/cartesian_sense.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/linops/algebra.h"
#include "core/linops/sampled_fft.h"
#include "core/linops/sense.h"
#include "core/linops/sense_normal.h"
#include "gadgets/sense/cartesian_buffer.h"

namespace larmor {

CartesianSense cartesian_sense(std::shared_ptr<Backend> backend, const CArray& kspace,
                               const std::vector<uint8_t>& sampled, const CArray& maps, float lambda,
                               CGOptions options, const CArray& second_maps, bool fused) {
    const Shape& s = kspace.shape();
    if (s.rank() != 4)
        throw std::invalid_argument("cg_sense: k-space " + s.str() + " should be [RO, E1, E2, C]");
    if (maps.shape() != s)
        throw std::invalid_argument("cg_sense: coil maps " + maps.shape().str() + " do not match k-space " + s.str());
    if (!second_maps.empty() && second_maps.shape() != s)
        throw std::invalid_argument("cg_sense: second coil maps " + second_maps.shape().str() + " do not match k-space " +
                                    s.str());
    const size_t ro = s[0], e1 = s[1], e2 = s[2];
    // The mask of sampled lines, repeated along the readout (broadcast over the coils).
    const RArray mask = readout_mask(sampled, ro, e1, e2);
    const AxisMask axes = e2 > 1 ? 0b111u : 0b011u;
    CartesianSense p;
    const LinOp coils = second_maps.empty() ? sense(backend, maps)
                                            : hstack({sense(backend, maps), sense(backend, second_maps)});
    p.encoding = compose(sampled_fft(backend, s, axes, mask), coils);
    p.image = backend->zeros(second_maps.empty() ? Shape{ro, e1, e2} : Shape{2 * ro * e1 * e2});
    // One 2D slice with one set of maps: CG runs on the fused normal operator (one pass over the coil
    // array per iteration instead of ten); the composed E^H E otherwise, and for E^H y in both cases.
    const std::string unfused = !fused                 ? std::string("asked for")
                                : !second_maps.empty() ? std::string("two sets of maps")
                                                       : sense_normal_unsupported(maps.shape(), backend->device());
    if (unfused.empty()) {
        p.normal = "fused";
        std::vector<float> lines(e1);
        for (size_t l = 0; l < e1; ++l) lines[l] = sampled[l] ? 1.f : 0.f;
        CArray b = backend->empty(p.image.shape());
        p.encoding->adjoint(kspace, b);
        p.solver = std::make_unique<ConjugateGradient>(sense_normal(backend, maps, lines, lambda), b, p.image, options);
    } else {
        p.normal = "composed (" + unfused + ")";
        p.solver = cg_least_squares(p.encoding, kspace, p.image, lambda, options);
    }
    return p;
}

}  // namespace larmor
