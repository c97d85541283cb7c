#include "core/recon/cg_spirit.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "core/linops/algebra.h"
#include "core/linops/sampled_fft.h"
#include "core/linops/spirit.h"

namespace larmor {

CgSpirit cg_spirit(std::shared_ptr<Backend> backend, const CArray& kspace, const std::vector<uint8_t>& sampled,
                   const CArray& g, float lambda, CGOptions options) {
    const Shape& s = kspace.shape();
    if (s.rank() != 4 || s[2] != 1)
        throw std::invalid_argument("cg_spirit: k-space " + s.str() + " should be [RO, E1, 1, C]");
    const size_t ro = s[0], e1 = s[1], nc = s[3];
    if (g.shape() != Shape({ro, e1, nc, nc}))
        throw std::invalid_argument("cg_spirit: SPIRiT kernels " + g.shape().str() + " do not match k-space " + s.str() +
                                    " (want [RO, E1, C, C])");
    if (sampled.size() != e1)
        throw std::invalid_argument("cg_spirit: sampling mask of " + std::to_string(sampled.size()) + " lines for " +
                                    std::to_string(e1) + " E1 lines");
    if (!(lambda > 0.f)) throw std::invalid_argument("cg_spirit: lambda " + std::to_string(lambda) + " should be > 0");
    RArray mask = RArray::host({ro, e1});
    for (size_t l = 0; l < e1; ++l) std::fill(mask.data() + l * ro, mask.data() + (l + 1) * ro, sampled[l] ? 1.f : 0.f);

    CgSpirit p;
    const LinOp data = sampled_fft(backend, s, 0b011u, mask);
    const LinOp consistency = spirit_consistency(backend, g.reshaped({ro, e1, 1, nc, nc}));
    p.encoding = vstack({data, scale(cfloat(std::sqrt(lambda), 0.f), consistency)});
    // y = [the sampled k-space; 0]: a consistent image has no SPIRiT residual.
    CArray y = backend->zeros(p.encoding->oshape());
    CArray head = y.view(0, s);
    backend->copy(kspace, head);
    p.images = backend->zeros(s);
    p.solver = cg_least_squares(p.encoding, y, p.images, 0.f, options);
    return p;
}

}  // namespace larmor
