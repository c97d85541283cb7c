#include "core/linops/finite_difference.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "core/linops/finite_difference_kernels.h"

namespace larmor {
namespace {

Shape stacked(const Shape& s, size_t n) {
    Shape o = s;
    o.push_back(n);
    return o;
}

class FiniteDifference final : public LinearOperator {
public:
    FiniteDifference(std::shared_ptr<Backend> be, const Shape& shape, std::vector<int> axes)
        : LinearOperator(std::move(be), shape, stacked(shape, axes.size()), "finite_difference"),
          g_{shape, std::move(axes)} {}

protected:
    void apply_forward(const CArray& x, CArray& y) override {
        if (backend().device() == Device::Cpu)
            cpu::finite_difference_forward(x, y, g_);
        else
            cuda::finite_difference_forward(backend(), x, y, g_);
    }
    void apply_adjoint(const CArray& y, CArray& x) override {
        if (backend().device() == Device::Cpu)
            cpu::finite_difference_adjoint(y, x, g_);
        else
            cuda::finite_difference_adjoint(backend(), y, x, g_);
    }

private:
    DiffGeometry g_;
};

}  // namespace

LinOp finite_difference(std::shared_ptr<Backend> backend, const Shape& shape, const std::vector<int>& axes) {
    if (!backend) throw std::invalid_argument("finite_difference: null backend");
    if (axes.empty()) throw std::invalid_argument("finite_difference: no axes for shape " + shape.str());
    if (shape.rank() >= Shape::kMaxRank)
        throw std::invalid_argument("finite_difference: shape " + shape.str() + " leaves no room for the stacked axis");
    for (size_t i = 0; i < axes.size(); ++i) {
        if (axes[i] < 0 || axes[i] >= shape.rank())
            throw std::invalid_argument("finite_difference: axis " + std::to_string(axes[i]) + " is not an axis of " +
                                        shape.str());
        for (size_t j = 0; j < i; ++j)
            if (axes[j] == axes[i])
                throw std::invalid_argument("finite_difference: axis " + std::to_string(axes[i]) + " named twice");
    }
    return std::make_shared<FiniteDifference>(std::move(backend), shape, axes);
}

}  // namespace larmor
