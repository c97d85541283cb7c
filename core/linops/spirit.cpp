#include "core/linops/spirit.h"

#include <stdexcept>
#include <utility>

#include "core/cpu/backend_checks.h"
#include "core/linops/spirit_kernels.h"

namespace larmor {
namespace {

class SpiritConsistency final : public LinearOperator {
public:
    SpiritConsistency(std::shared_ptr<Backend> be, const CArray& g)
        : LinearOperator(std::move(be), detail::without_last_axis(g.shape()), detail::without_last_axis(g.shape()),
                         "SPIRiT") {
        // Both directions as out[p, o] = sum_c m[p, c, o] in[p, c] - in[p, o]: forward m = G (as given,
        // [pixels, C_source, C_target]); adjoint m[p, i, j] = conj(G_ji(p)), G's per-pixel conjugate transpose.
        const CArray h = backend().to_host(g);
        coils_ = g.shape()[g.shape().rank() - 1];
        pixels_ = h.size() / (coils_ * coils_);
        CArray a = CArray::host(g.shape());
        for (size_t i = 0; i < coils_; ++i)
            for (size_t j = 0; j < coils_; ++j)
                for (size_t p = 0; p < pixels_; ++p)
                    a.data()[p + pixels_ * (i + coils_ * j)] = std::conj(h.data()[p + pixels_ * (j + coils_ * i)]);
        forward_ = backend().to_device(h);
        adjoint_ = backend().to_device(a);
    }

protected:
    void apply_forward(const CArray& x, CArray& y) override { product(forward_, x, y); }
    void apply_adjoint(const CArray& y, CArray& x) override { product(adjoint_, y, x); }

private:
    void product(const CArray& m, const CArray& in, CArray& out) {
        if (backend().device() == Device::Cpu)
            cpu::spirit_apply(m, in, out, pixels_, coils_);
        else
            cuda::spirit_apply(backend(), m, in, out, pixels_, coils_);
    }

    CArray forward_, adjoint_;
    size_t coils_ = 0, pixels_ = 0;
};

}  // namespace

LinOp spirit_consistency(std::shared_ptr<Backend> backend, const CArray& g) {
    if (!backend) throw std::invalid_argument("spirit_consistency: null backend");
    const Shape& s = g.shape();
    if (s.rank() < 3 || g.size() == 0 || s[s.rank() - 1] != s[s.rank() - 2])
        throw std::invalid_argument("spirit_consistency: kernels " + s.str() +
                                    " should be a non-empty [X, Y..., C, C]");
    return std::make_shared<SpiritConsistency>(std::move(backend), g);
}

}  // namespace larmor
