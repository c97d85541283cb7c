#include "gadgets/image_magnitude.h"

#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace larmor {
namespace {

template <class T>
auto double_of(T v) {
    if constexpr (std::is_arithmetic_v<T>)
        return double(v);
    else
        return std::complex<double>(v);
}

// |value| of element i of a pixel buffer of type T (memcpy: the buffer has no alignment guarantee).
template <class T>
double magnitude_at(const uint8_t* p, size_t i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    if constexpr (std::is_unsigned_v<T>)
        return double(v);
    else
        return std::abs(double_of(v));
}

double (*reader(uint16_t type, size_t& bytes))(const uint8_t*, size_t) {
    switch (type) {
        case ISMRMRD::ISMRMRD_USHORT: bytes = 2; return magnitude_at<uint16_t>;
        case ISMRMRD::ISMRMRD_SHORT: bytes = 2; return magnitude_at<int16_t>;
        case ISMRMRD::ISMRMRD_UINT: bytes = 4; return magnitude_at<uint32_t>;
        case ISMRMRD::ISMRMRD_INT: bytes = 4; return magnitude_at<int32_t>;
        case ISMRMRD::ISMRMRD_FLOAT: bytes = 4; return magnitude_at<float>;
        case ISMRMRD::ISMRMRD_DOUBLE: bytes = 8; return magnitude_at<double>;
        case ISMRMRD::ISMRMRD_CXFLOAT: bytes = 8; return magnitude_at<std::complex<float>>;
        case ISMRMRD::ISMRMRD_CXDOUBLE: bytes = 16; return magnitude_at<std::complex<double>>;
        default: break;
    }
    throw std::runtime_error("image data type " + std::to_string(type) + " is not an ISMRMRD pixel type");
}

}  // namespace

std::vector<float> image_magnitude(const Image& image) {
    const auto& h = image.head;
    size_t bytes = 0;
    const auto read = reader(h.data_type, bytes);
    const size_t n = size_t(h.matrix_size[0]) * h.matrix_size[1] * h.matrix_size[2];
    const size_t channels = h.channels;
    if (n == 0 || channels == 0)
        throw std::runtime_error("image matrix " + std::to_string(h.matrix_size[0]) + "x" +
                                 std::to_string(h.matrix_size[1]) + "x" + std::to_string(h.matrix_size[2]) + " with " +
                                 std::to_string(channels) + " channels has no pixels");
    if (image.pixels.size() != n * channels * bytes)
        throw std::runtime_error("image of " + std::to_string(n) + " pixels x " + std::to_string(channels) +
                                 " channels carries " + std::to_string(image.pixels.size()) + " bytes, not " +
                                 std::to_string(n * channels * bytes));
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i) {
        double ss = 0;
        for (size_t c = 0; c < channels; ++c) {
            const double v = read(image.pixels.data(), c * n + i);
            ss += v * v;
        }
        out[i] = float(std::sqrt(ss));
    }
    return out;
}

}  // namespace larmor
