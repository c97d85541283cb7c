// The in-place SPIRiT step of POCS (core/iter/prox.h): the kernels of core/linops/spirit_kernels.h, which
// stage each pixel's coil vector before writing it, with no identity term (self = 0).
#include <stdexcept>
#include <string>
#include <utility>

#include "core/cpu/backend_checks.h"
#include "core/iter/prox.h"
#include "core/linops/spirit_kernels.h"

namespace larmor {
namespace {

class SpiritStep final : public Prox {
public:
    SpiritStep(std::shared_ptr<Backend> be, const CArray& g)
        : Prox(std::move(be), detail::without_last_axis(g.shape())), g_(backend().to_device(g)) {
        coils_ = g.shape()[g.shape().rank() - 1];
        pixels_ = g.size() / (coils_ * coils_);
    }

    void apply(float, const CArray& x, CArray& out) override {
        check(x, out, "spirit_step");
        if (!same_view(x, out) && overlaps(x, out))
            throw std::invalid_argument("spirit_step: out partly overlaps x");
        if (backend().device() == Device::Cpu)
            cpu::spirit_apply(g_, x, out, pixels_, coils_, 0.f);
        else
            cuda::spirit_apply(backend(), g_, x, out, pixels_, coils_, 0.f);
    }

private:
    CArray g_;
    size_t coils_ = 0, pixels_ = 0;
};

}  // namespace

std::unique_ptr<Prox> spirit_step(std::shared_ptr<Backend> backend, const CArray& g) {
    if (!backend) throw std::invalid_argument("spirit_step: null backend");
    const Shape& s = g.shape();
    if (s.rank() < 3 || g.size() == 0 || s[s.rank() - 1] != s[s.rank() - 2])
        throw std::invalid_argument("spirit_step: kernels " + s.str() + " should be a non-empty [X, Y..., C, C]");
    return std::make_unique<SpiritStep>(std::move(backend), g);
}

}  // namespace larmor
