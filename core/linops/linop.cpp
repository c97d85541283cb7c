#include "core/linops/linop.h"

#include <stdexcept>
#include <utility>

namespace larmor {

LinearOperator::LinearOperator(std::shared_ptr<Backend> backend, Shape ishape, Shape oshape, std::string name)
    : backend_(std::move(backend)), ishape_(ishape), oshape_(oshape), name_(std::move(name)) {
    if (!backend_) throw std::invalid_argument(name_ + ": null backend");
}

std::string LinearOperator::describe() const { return name_ + " " + ishape_.str() + " -> " + oshape_.str(); }

void LinearOperator::check(const CArray& a, const Shape& want, const char* op, const char* what) const {
    if (a.shape() != want)
        throw std::invalid_argument(describe() + ": " + op + " " + what + " is " + a.shape().str() + ", expected " +
                                    want.str());
    if (a.size() != 0 && a.device() != backend_->device())
        throw std::invalid_argument(describe() + ": " + op + " " + what + " lives on " + device_name(a.device()) +
                                    ", the operator on " + device_name(backend_->device()));
    if (a.size() != 0 && !a.data())
        throw std::invalid_argument(describe() + ": " + op + " " + what + " " + a.shape().str() + " has no storage");
}

void LinearOperator::forward(const CArray& x, CArray& y) {
    check(x, ishape_, "forward", "input");
    check(y, oshape_, "forward", "output");
    if (overlaps(x, y)) throw std::invalid_argument(describe() + ": forward output overlaps its input");
    apply_forward(x, y);
}

void LinearOperator::adjoint(const CArray& y, CArray& x) {
    check(y, oshape_, "adjoint", "input");
    check(x, ishape_, "adjoint", "output");
    if (overlaps(x, y)) throw std::invalid_argument(describe() + ": adjoint output overlaps its input");
    apply_adjoint(y, x);
}

void LinearOperator::normal(const CArray& x, CArray& z) {
    check(x, ishape_, "normal", "input");
    check(z, ishape_, "normal", "output");
    if (overlaps(x, z)) throw std::invalid_argument(describe() + ": normal output overlaps its input");
    apply_normal(x, z);
}

void LinearOperator::apply_normal(const CArray& x, CArray& z) {
    if (!normal_tmp_.storage()) normal_tmp_ = backend_->empty(oshape_);
    apply_forward(x, normal_tmp_);
    apply_adjoint(normal_tmp_, z);
}

void LinearOperator::forward_cg(const CArray& x, CArray& y, CArray& coefficients) {
    if (ishape_ != oshape_) throw std::invalid_argument(describe() + ": forward_cg needs a square operator");
    check(x, ishape_, "forward_cg", "input");
    check(y, oshape_, "forward_cg", "output");
    if (overlaps(x, y)) throw std::invalid_argument(describe() + ": forward_cg output overlaps its input");
    apply_forward_cg(x, y, coefficients);
}

void LinearOperator::apply_forward_cg(const CArray& x, CArray& y, CArray& coefficients) {
    apply_forward(x, y);
    backend_->cg_coefficients(x, y, coefficients);
}

CArray& LinearOperator::scratch(int slot, const Shape& shape) {
    CArray& a = scratch_[slot];
    if (a.shape() != shape || !a.storage()) a = backend_->empty(shape);
    return a;
}

}  // namespace larmor
