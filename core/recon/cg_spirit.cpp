#include "core/recon/cg_spirit.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/linops/algebra.h"
#include "core/linops/sampled_fft.h"
#include "core/linops/spirit.h"
#include "core/recon/spirit_problem.h"

namespace larmor {

CgSpirit cg_spirit(std::shared_ptr<Backend> backend, const CArray& kspace, const std::vector<uint8_t>& sampled,
                   const CArray& g, float lambda, CGOptions options) {
    const Shape& s = kspace.shape();
    if (s.rank() != 4 || s[2] != 1)
        throw std::invalid_argument("cg_spirit: k-space " + s.str() + " should be [RO, E1, 1, C]");
    const size_t ro = s[0], e1 = s[1];
    if (sampled.size() != e1)
        throw std::invalid_argument("cg_spirit: sampling mask of " + std::to_string(sampled.size()) + " lines for " +
                                    std::to_string(e1) + " E1 lines");
    RArray mask = RArray::host({ro, e1});
    for (size_t l = 0; l < e1; ++l) std::fill(mask.data() + l * ro, mask.data() + (l + 1) * ro, sampled[l] ? 1.f : 0.f);
    return cg_spirit(std::move(backend), kspace, mask, g, lambda, options);
}

LinOp spirit_encoding(std::shared_ptr<Backend> backend, const CArray& kspace, const RArray& mask, const CArray& g,
                      float lambda, const char* who) {
    const SpiritProblem sp = spirit_problem(who, kspace, mask, g);
    if (!(lambda > 0.f))
        throw std::invalid_argument(std::string(who) + ": consistency lambda " + std::to_string(lambda) +
                                    " should be > 0");
    const LinOp data = sampled_fft(backend, kspace.shape(), sp.kspace_axes, mask);
    const LinOp consistency = spirit_consistency(backend, g.reshaped({sp.ro, sp.e1, sp.e2, sp.coils, sp.coils}));
    return vstack({data, scale(cfloat(std::sqrt(lambda), 0.f), consistency)});
}

CgSpirit cg_spirit(std::shared_ptr<Backend> backend, const CArray& kspace, const RArray& mask, const CArray& g,
                   float lambda, CGOptions options) {
    const Shape& s = kspace.shape();
    CgSpirit p;
    p.encoding = spirit_encoding(backend, kspace, mask, g, lambda, "cg_spirit");
    // y = [the sampled k-space; 0]: a consistent image has no SPIRiT residual.
    CArray y = backend->zeros(p.encoding->oshape());
    CArray head = y.view(0, s);
    backend->copy(kspace, head);
    p.images = backend->zeros(s);
    p.solver = cg_least_squares(p.encoding, y, p.images, 0.f, options);
    return p;
}

}  // namespace larmor
