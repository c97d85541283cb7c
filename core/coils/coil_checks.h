#pragma once
// Argument validation of the coil kernels (core/coils/coil_combination.h), shared by their CPU and
// CUDA implementations so that both reject the same calls with the same words, and the Walsh
// estimate's window, grid and scaling, which both implementations follow. Every message names the
// offending value.
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/cpu/backend_checks.h"

namespace larmor::coils::checks {

using larmor::detail::without_last_axis;

// rss / combine: y has x's shape without its last axis.
inline void check_reduced(const CArray& x, const CArray& y, const char* op) {
    if (x.shape().rank() < 1) throw std::invalid_argument(std::string(op) + ": x has rank 0");
    if (y.shape() != without_last_axis(x.shape()))
        throw std::invalid_argument(std::string(op) + ": y " + y.shape().str() + " should be " +
                                    without_last_axis(x.shape()).str() + " for x " + x.shape().str());
}

inline void check_combine(const CArray& x, const CArray& maps, const CArray& y) {
    if (maps.shape() != x.shape())
        throw std::invalid_argument("combine_last_axis: maps " + maps.shape().str() + " differ from x " + x.shape().str());
    check_reduced(x, y, "combine_last_axis");
}

inline void check_walsh_parameters(const CArray& x, int kernel, int stride, const char* op) {
    if (x.shape().rank() < 3)
        throw std::invalid_argument(std::string(op) + ": x " + x.shape().str() + " should be [X, Y, Z..., C]");
    if (kernel < 1) throw std::invalid_argument(std::string(op) + ": kernel " + std::to_string(kernel) + " < 1");
    if (stride < 1)
        throw std::invalid_argument(std::string(op) + ": stride " + std::to_string(stride) +
                                    " < 1 (grid spacing of the coil-map estimate, 1 = every pixel)");
}

inline void check_walsh(const CArray& x, int kernel, int stride, const CArray& maps) {
    check_walsh_parameters(x, kernel, stride, "walsh_sensitivities");
    if (maps.shape() != x.shape())
        throw std::invalid_argument("walsh_sensitivities: maps " + maps.shape().str() + " differ from x " +
                                    x.shape().str());
    if (overlaps(x, maps))
        throw std::invalid_argument("walsh_sensitivities: maps alias x " + x.shape().str());
}

inline void check_walsh_combine(const CArray& x, int kernel, int stride, const CArray& y) {
    check_walsh_parameters(x, kernel, stride, "walsh_combine");
    check_reduced(x, y, "walsh_combine");
    if (overlaps(x, y)) throw std::invalid_argument("walsh_combine: y aliases x " + x.shape().str());
}

// Walsh window along x and y: offsets [-kernel/2, kernel - 1 - kernel/2], clamped to the image.
inline int walsh_lo(int kernel) { return kernel / 2; }
inline int walsh_hi(int kernel) { return kernel - 1 - kernel / 2; }
// Walsh grid along an axis of n pixels at spacing `stride`: points g_i = min(i * stride, n - 1),
// i = 0..walsh_grid_size(n, stride) - 1, so the first is 0 and the last n - 1 (the last interval may
// be shorter). Maps are exact at grid points and bilinearly interpolated in between.
inline size_t walsh_grid_size(size_t n, int stride) {
    return n == 0 ? 0 : (n - 1 + static_cast<size_t>(stride) - 1) / static_cast<size_t>(stride) + 1;
}
inline size_t walsh_grid_coord(size_t i, int stride, size_t n) {
    const size_t g = i * static_cast<size_t>(stride);
    return g < n - 1 ? g : n - 1;
}
// Power iterations for the dominant eigenvector (both backends use the same count and start vector,
// so they agree even where the eigengap is small).
constexpr int kWalshIterations = 20;

// The factor Walsh's estimate multiplies the coil images by before it forms R = sum v v^H: the power of
// two nearest 1 / rms(x), from the coils' energies summed in double (1 when x is zero). The maps do not
// depend on x's scale, but in float R holds |x|^2 and the power iteration |R v|^2 ~ |x|^4, which
// overflow above |x| ~ 1e9 and lose everything below |x| ~ 1e-9: k-space scaled by 1e12 or 1e-12, or
// integer-scaled exports peaking at 5e13, gave all-zero maps and silently wrong images (issue 18). A
// power of two scales exactly, so the maps of data at any scale inside float's range agree to rounding.
inline float walsh_input_scale(double total_energy, double values) {
    if (!(total_energy > 0.0) || !(values > 0.0) || !std::isfinite(total_energy)) return 1.f;
    const int e = static_cast<int>(std::lround(0.5 * std::log2(total_energy / values)));
    return static_cast<float>(std::ldexp(1.0, -e));
}

}  // namespace larmor::coils::checks
