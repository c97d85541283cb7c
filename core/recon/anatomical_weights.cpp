#include "core/recon/anatomical_weights.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace larmor {

RArray anatomical_edge_weights(const RArray& reference, float threshold) {
    const Shape& s = reference.shape();
    if (reference.empty() || s.rank() < 2 || s.rank() > 3)
        throw std::invalid_argument("anatomical_edge_weights: reference " + s.str() + " is not a 2D or 3D image");
    if (!(threshold > 0.f && threshold < 1.f))
        throw std::invalid_argument("anatomical_edge_weights: edge threshold " + std::to_string(threshold) +
                                    " is outside (0, 1) (a fraction of the reference's maximum)");
    const float* r = reference.data();
    const size_t n = reference.size();
    float peak = 0.f;
    for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(r[i]))
            throw std::invalid_argument("anatomical_edge_weights: reference value " + std::to_string(r[i]) +
                                        " at element " + std::to_string(i));
        peak = std::max(peak, std::abs(r[i]));
    }
    if (peak == 0.f) throw std::invalid_argument("anatomical_edge_weights: the reference " + s.str() + " is all zero");
    const double edge = double(threshold) * peak;

    const int dims = s.rank();
    const size_t nx = s[0], ny = s[1], nz = dims == 3 ? s[2] : 1;
    Shape ws = s;
    ws.push_back(size_t(dims));
    RArray w = RArray::host(ws);
    float* out = w.data();
    const size_t stride[3] = {1, nx, nx * ny};
    const size_t extent[3] = {nx, ny, nz};
    for (int a = 0; a < dims; ++a) {
        float* wa = out + size_t(a) * n;
        for (size_t z = 0; z < nz; ++z)
            for (size_t y = 0; y < ny; ++y)
                for (size_t x = 0; x < nx; ++x) {
                    const size_t c[3] = {x, y, z};
                    const size_t i = x + nx * (y + ny * z);
                    // The neighbour i + e_a with the periodic wrap of the finite-difference operator.
                    const size_t j = c[a] + 1 == extent[a] ? i - c[a] * stride[a] : i + stride[a];
                    wa[i] = std::abs(double(r[j]) - double(r[i])) > edge ? 0.f : 1.f;
                }
    }
    return w;
}

double edge_fraction(const RArray& weights) {
    if (weights.empty()) return 0.0;
    size_t zeros = 0;
    for (size_t i = 0; i < weights.size(); ++i) zeros += weights.data()[i] == 0.f;
    return double(zeros) / double(weights.size());
}

}  // namespace larmor
