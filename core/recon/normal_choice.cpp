#include "core/recon/normal_choice.h"

#include <chrono>
#include <stdexcept>

namespace larmor {
namespace {

double seconds_of_one_application(LinearOperator& op) {
    Backend& be = op.backend();
    if (op.ishape() != op.oshape())
        throw std::invalid_argument("time_normals: " + op.name() + " maps " + op.ishape().str() + " to " +
                                    op.oshape().str() + ", not a normal operator");
    const CArray x = be.zeros(op.ishape());
    CArray y = be.empty(op.oshape());
    op.forward(x, y);  // warm-up: plans, work arrays
    be.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    op.forward(x, y);
    be.synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

NormalTimes time_normals(LinearOperator& pair, LinearOperator& toeplitz, double q_seconds) {
    NormalTimes t;
    t.pair = seconds_of_one_application(pair);
    t.toeplitz = seconds_of_one_application(toeplitz);
    t.q = q_seconds;
    return t;
}

bool toeplitz_is_faster(const NormalTimes& t, int iterations, bool q_at_hand) {
    const double n = iterations > 0 ? double(iterations) : 1.0;
    return (q_at_hand ? 0.0 : t.q) + n * t.toeplitz < n * t.pair;
}

}  // namespace larmor
