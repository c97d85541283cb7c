#include "core/iter/power_method.h"

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

namespace larmor {

PowerMethod::PowerMethod(LinOp n, int iterations, unsigned seed) : n_(std::move(n)), be_(n_->backend()), iterations_(iterations) {
    if (n_->ishape() != n_->oshape())
        throw std::invalid_argument("power method: " + n_->describe() + " is not square");
    if (iterations < 1) throw std::invalid_argument("power method: iterations " + std::to_string(iterations) + " < 1");
    CArray start = be_.host_complex(n_->ishape());
    std::mt19937 rng(seed);
    std::normal_distribution<float> gauss;
    double e = 0;
    for (size_t i = 0; i < start.size(); ++i) {
        start.data()[i] = cfloat(gauss(rng), gauss(rng));
        e += std::norm(start.data()[i]);
    }
    const float inv = float(1.0 / std::sqrt(e));
    for (size_t i = 0; i < start.size(); ++i) start.data()[i] *= inv;
    x_ = be_.empty(n_->ishape());
    be_.copy(start, x_);
    y_ = be_.empty(n_->ishape());
    norm_ = be_.zeros({1});
}

void PowerMethod::update() {
    n_->forward(x_, y_);
    be_.norm2(y_, norm_);
    const double nn = std::real(be_.to_host(norm_).data()[0]);
    eigenvalue_ = std::sqrt(nn);
    ++iteration_;
    if (!(eigenvalue_ > 0) || !std::isfinite(eigenvalue_)) {
        // N x = 0: x lies in the null space; the estimate 0 stands and further iterations cannot move it.
        iteration_ = iterations_;
        return;
    }
    be_.scale(float(1.0 / eigenvalue_), y_, x_);
}

double max_eigenvalue(LinOp n, int iterations) {
    PowerMethod p(std::move(n), iterations);
    run(p);
    return p.eigenvalue();
}

}  // namespace larmor
