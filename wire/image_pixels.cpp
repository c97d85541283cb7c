#include "wire/image_pixels.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <stdexcept>
#include <string>

namespace larmor::wire {
namespace {

template <typename T>
T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);  // pixel buffers carry no alignment promise
    return v;
}

}  // namespace

size_t pixel_bytes(uint16_t type) {
    switch (type) {
        case 1: case 2: return 2;
        case 3: case 4: case 5: return 4;
        case 6: case 7: return 8;
        case 8: return 16;
        default: return 0;
    }
}

double pixel_value(const uint8_t* data, uint16_t type, size_t i) {
    switch (type) {
        case 1: return load<uint16_t>(data + 2 * i);
        case 2: return load<int16_t>(data + 2 * i);
        case 3: return load<uint32_t>(data + 4 * i);
        case 4: return load<int32_t>(data + 4 * i);
        case 5: return load<float>(data + 4 * i);
        case 6: return load<double>(data + 8 * i);
        case 7: return std::abs(load<std::complex<float>>(data + 8 * i));
        case 8: return std::abs(load<std::complex<double>>(data + 16 * i));
        default: throw std::invalid_argument("unknown image data_type " + std::to_string(type));
    }
}

std::vector<uint8_t> window_to_8bit(const std::vector<float>& v) {
    std::vector<float> sorted(v);
    const size_t n = sorted.size();
    std::vector<uint8_t> out(n, 0);
    if (n == 0) return out;
    auto at = [&](double q) {
        size_t k = static_cast<size_t>(std::lround(q * static_cast<double>(n - 1)));
        std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k), sorted.end());
        return sorted[k];
    };
    const float lo = at(0.005), hi = at(0.995);
    if (!(hi > lo)) return out;
    const float scale = 255.f / (hi - lo);
    for (size_t i = 0; i < n; ++i)
        out[i] = static_cast<uint8_t>(std::lround(std::clamp((v[i] - lo) * scale, 0.f, 255.f)));
    return out;
}

}  // namespace larmor::wire
