#include "core/linops/sense.h"

#include <stdexcept>
#include <utility>

#include "core/cpu/backend_checks.h"

namespace larmor {
namespace {

class Sense final : public LinearOperator {
public:
    Sense(std::shared_ptr<Backend> be, const CArray& maps)
        : LinearOperator(std::move(be), detail::without_last_axis(maps.shape()), maps.shape(), "SENSE") {
        maps_ = backend().to_device(maps);
        weight_ = backend().empty(ishape());
        backend().reduce_conj_mul(maps_, maps_, weight_);
    }

protected:
    void apply_forward(const CArray& x, CArray& y) override { backend().mul(maps_, x, y); }
    void apply_adjoint(const CArray& y, CArray& x) override { backend().reduce_conj_mul(maps_, y, x); }
    void apply_normal(const CArray& x, CArray& z) override { backend().mul(x, weight_, z); }

private:
    CArray maps_;
    CArray weight_;  // sum_c |s_c|^2
};

}  // namespace

LinOp sense(std::shared_ptr<Backend> backend, const CArray& maps) {
    if (!backend) throw std::invalid_argument("sense: null backend");
    if (maps.shape().rank() < 2 || maps.size() == 0)
        throw std::invalid_argument("sense: maps " + maps.shape().str() + " should be a non-empty [X, ..., C]");
    return std::make_shared<Sense>(std::move(backend), maps);
}

}  // namespace larmor
