#include "core/recon/spirit_problem.h"

#include <stdexcept>
#include <string>

namespace larmor {

SpiritProblem spirit_problem(const char* who, const CArray& kspace, const RArray& mask, const CArray& g) {
    const Shape& s = kspace.shape();
    const std::string w(who);
    if (s.rank() != 4) throw std::invalid_argument(w + ": k-space " + s.str() + " should be [RO, E1, E2, C]");
    SpiritProblem p;
    p.ro = s[0], p.e1 = s[1], p.e2 = s[2], p.coils = s[3];
    p.volume = p.e2 > 1;
    p.kspace_axes = p.volume ? 0b110u : 0b011u;
    const Shape g_want = p.volume ? Shape{p.ro, p.e1, p.e2, p.coils, p.coils} : Shape{p.ro, p.e1, p.coils, p.coils};
    if (g.shape() != g_want)
        throw std::invalid_argument(w + ": SPIRiT kernels " + g.shape().str() + " do not match k-space " + s.str() +
                                    " (want " + g_want.str() + ")");
    const Shape mask_want = p.volume ? Shape{p.ro, p.e1, p.e2} : Shape{p.ro, p.e1};
    if (mask.shape() != mask_want)
        throw std::invalid_argument(w + ": mask " + mask.shape().str() + " does not match k-space " + s.str() +
                                    " (want " + mask_want.str() + ")");
    return p;
}

}  // namespace larmor
