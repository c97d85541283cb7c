#include "core/linops/sense_normal.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/linops/sense_normal_kernels.h"

namespace larmor {
namespace {

// [RO, E1, C] or [RO, E1, 1, C] -> {RO, E1, C}; empty message when it is one of them.
std::string slice_dims(const Shape& m, size_t& ro, size_t& e1, size_t& coils) {
    if (m.rank() == 3) {
        ro = m[0], e1 = m[1], coils = m[2];
    } else if (m.rank() == 4 && m[2] == 1) {
        ro = m[0], e1 = m[1], coils = m[3];
    } else {
        return "maps " + m.str() + " are not one 2D slice [RO, E1, C] or [RO, E1, 1, C]";
    }
    if (ro == 0 || e1 == 0 || coils == 0) return "maps " + m.str() + " are empty";
    return "";
}

class SenseNormal final : public LinearOperator {
public:
    SenseNormal(std::shared_ptr<Backend> be, const Shape& image, CArray maps, RArray mask, size_t ro, size_t e1,
                size_t coils, float lambda)
        : LinearOperator(be, image, image, "sense_normal"), maps_(std::move(maps)), mask_(std::move(mask)), ro_(ro),
          e1_(e1), coils_(coils), lambda_(lambda),
          plans_(be->device() == Device::Cpu ? cpu::sense_column_plans(e1) : nullptr) {}

protected:
    void apply_forward(const CArray& x, CArray& y) override {
        if (plans_)
            cpu::sense_normal_apply(*plans_, maps_, mask_, x, y, ro_, e1_, coils_, lambda_);
        else
            cuda::sense_normal_apply(backend(), maps_, mask_, x, y, ro_, e1_, coils_, lambda_);
    }
    void apply_adjoint(const CArray& y, CArray& x) override { apply_forward(y, x); }  // Hermitian
    // CUDA: CG's inner products in the kernel's epilogue. CPU: the default pair of calls (its
    // iteration is bound by the transforms, not by a second read of two images).
    void apply_forward_cg(const CArray& x, CArray& y, CArray& coefficients) override {
        if (plans_)
            LinearOperator::apply_forward_cg(x, y, coefficients);
        else
            cuda::sense_normal_apply_cg(backend(), maps_, mask_, x, y, coefficients, ro_, e1_, coils_, lambda_);
    }

private:
    CArray maps_;
    RArray mask_;
    size_t ro_, e1_, coils_;
    float lambda_;
    std::shared_ptr<cpu::SenseColumnPlans> plans_;
};

}  // namespace

std::string sense_normal_unsupported(const Shape& maps_shape, Device device) {
    size_t ro = 0, e1 = 0, coils = 0;
    std::string why = slice_dims(maps_shape, ro, e1, coils);
    if (!why.empty()) return why;
    if (device == Device::Cuda && !cuda::sense_normal_supports(e1))
        return "the CUDA kernel has no instance for " + std::to_string(e1) + " phase encodes (64, 128 or 256)";
    return "";
}

LinOp sense_normal(std::shared_ptr<Backend> backend, const CArray& maps, const std::vector<float>& lines, float lambda) {
    if (!backend) throw std::invalid_argument("sense_normal: null backend");
    const std::string why = sense_normal_unsupported(maps.shape(), backend->device());
    if (!why.empty()) throw std::invalid_argument("sense_normal: " + why);
    size_t ro = 0, e1 = 0, coils = 0;
    slice_dims(maps.shape(), ro, e1, coils);
    if (lines.size() != e1)
        throw std::invalid_argument("sense_normal: " + std::to_string(lines.size()) + " line weights for " +
                                    std::to_string(e1) + " phase encodes");
    if (!(lambda >= 0.f) || !std::isfinite(lambda))
        throw std::invalid_argument("sense_normal: lambda " + std::to_string(lambda) + " is not a finite value >= 0");
    // The centred pair F^H M F equals the plain pair against the mask shifted by E1/2 (fftshift of an
    // even or odd length alike: index k of the plain DFT is centred index (k + E1/2) mod E1), with the
    // pair's 1/E1 folded in.
    RArray mask = backend->host_real({e1});
    for (size_t k = 0; k < e1; ++k) {
        const float w = lines[(k + e1 / 2) % e1];
        if (!(w >= 0.f) || !std::isfinite(w))
            throw std::invalid_argument("sense_normal: line weight " + std::to_string(w) + " at line " +
                                        std::to_string((k + e1 / 2) % e1) + " is not a finite value >= 0");
        mask.data()[k] = w / float(e1);
    }
    const Shape image = maps.shape().rank() == 3 ? Shape{ro, e1} : Shape{ro, e1, 1};
    return std::make_shared<SenseNormal>(backend, image, backend->to_device(maps), backend->to_device(mask), ro, e1,
                                         coils, lambda);
}

}  // namespace larmor
