#include "core/linops/spirit.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "core/cpu/backend_checks.h"
#include "core/linops/spirit_kernels.h"

namespace larmor {
namespace {

class SpiritConsistency final : public LinearOperator {
public:
    SpiritConsistency(std::shared_ptr<Backend> be, const CArray& g, bool minus_identity)
        : LinearOperator(std::move(be), detail::without_last_axis(g.shape()), detail::without_last_axis(g.shape()),
                         minus_identity ? "SPIRiT G - I" : "SPIRiT G"),
          self_(minus_identity ? -1.f : 0.f) {
        // Both directions as out[p, o] = sum_c m[p, c, o] in[p, c] - in[p, o]: forward m = G (as given,
        // [pixels, C_source, C_target]); adjoint m[p, i, j] = conj(G_ji(p)), G's per-pixel conjugate
        // transpose, built on the first adjoint: POCS (l1-SPIRiT) applies only G, and at 3D sizes each
        // layout is gigabytes.
        coils_ = g.shape()[g.shape().rank() - 1];
        pixels_ = g.size() / (coils_ * coils_);
        forward_ = backend().to_device(g);
    }

protected:
    void apply_forward(const CArray& x, CArray& y) override { product(forward_, x, y); }
    void apply_adjoint(const CArray& y, CArray& x) override {
        if (adjoint_.empty()) build_adjoint();
        product(adjoint_, y, x);
    }

private:
    void build_adjoint() {
        const CArray h = backend().to_host(forward_);
        CArray a = CArray::host(forward_.shape());
        for (size_t i = 0; i < coils_; ++i)
            for (size_t j = 0; j < coils_; ++j)
                for (size_t p = 0; p < pixels_; ++p)
                    a.data()[p + pixels_ * (i + coils_ * j)] = std::conj(h.data()[p + pixels_ * (j + coils_ * i)]);
        adjoint_ = backend().to_device(a);
    }

    void product(const CArray& m, const CArray& in, CArray& out) {
        if (backend().device() == Device::Cpu)
            cpu::spirit_apply(m, in, out, pixels_, coils_, self_);
        else
            cuda::spirit_apply(backend(), m, in, out, pixels_, coils_, self_);
    }

    float self_;
    CArray forward_, adjoint_;
    size_t coils_ = 0, pixels_ = 0;
};

LinOp spirit_operator(std::shared_ptr<Backend> backend, const CArray& g, bool minus_identity) {
    const char* name = minus_identity ? "spirit_consistency" : "spirit_g";
    if (!backend) throw std::invalid_argument(std::string(name) + ": null backend");
    const Shape& s = g.shape();
    if (s.rank() < 3 || g.size() == 0 || s[s.rank() - 1] != s[s.rank() - 2])
        throw std::invalid_argument(std::string(name) + ": kernels " + s.str() + " should be a non-empty [X, Y..., C, C]");
    return std::make_shared<SpiritConsistency>(std::move(backend), g, minus_identity);
}

}  // namespace

LinOp spirit_consistency(std::shared_ptr<Backend> backend, const CArray& g) {
    return spirit_operator(std::move(backend), g, true);
}

LinOp spirit_g(std::shared_ptr<Backend> backend, const CArray& g) { return spirit_operator(std::move(backend), g, false); }

}  // namespace larmor
