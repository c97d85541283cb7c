#include "core/iter/pocs.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace larmor {
namespace {

Backend& backend_of(const std::vector<std::unique_ptr<Prox>>& steps) {
    if (steps.empty() || !steps.front()) throw std::invalid_argument("POCS: no steps");
    return steps.front()->backend();
}

}  // namespace

Pocs::Pocs(std::vector<std::unique_ptr<Prox>> steps, CArray x, int iterations, bool track_residuals,
           double tolerance)
    : steps_(std::move(steps)), be_(backend_of(steps_)), x_(std::move(x)), iterations_(iterations),
      track_(track_residuals), tolerance_(tolerance) {
    for (size_t i = 0; i < steps_.size(); ++i) {
        if (!steps_[i]) throw std::invalid_argument("POCS: step " + std::to_string(i) + " is null");
        if (steps_[i]->shape() != x_.shape())
            throw std::invalid_argument("POCS: step " + std::to_string(i) + " acts on " + steps_[i]->shape().str() +
                                        ", x is " + x_.shape().str());
    }
    if (iterations < 1) throw std::invalid_argument("POCS: iterations " + std::to_string(iterations) + " < 1");
    scalars_ = be_.zeros({2});
    if (track_) {
        previous_ = be_.empty(x_.shape());
        be_.copy(x_, previous_);
    }
}

void Pocs::update() {
    if (!track_) {
        for (auto& s : steps_) s->apply(1.f, x_, x_);
        ++iteration_;
        return;
    }
    // previous_ holds the last iterate (the start, then each change_norms leaves x there): one pass for
    // the change, the size and the copy, in place of a copy, a difference and two norms (7 passes).
    for (auto& s : steps_) s->apply(1.f, x_, x_);
    be_.change_norms(x_, previous_, scalars_);
    ++iteration_;
    std::unique_ptr<Backend::PendingRead> last = std::move(pending_);
    pending_ = be_.read_async(scalars_);
    if (last) absorb(last->wait());
}

void Pocs::absorb(const std::vector<cfloat>& v) const {
    changes_.push_back(Change{std::real(v[0]), std::real(v[1])});
    residuals_.push_back(std::real(v[1]) > 0 ? std::sqrt(std::real(v[0]) / std::real(v[1])) : 0.0);
    if (tolerance_ > 0 && residuals_.back() <= tolerance_) converged_ = true;
}

const std::vector<double>& Pocs::residuals() const {
    if (pending_) {
        absorb(pending_->wait());
        pending_.reset();
    }
    return residuals_;
}

}  // namespace larmor
