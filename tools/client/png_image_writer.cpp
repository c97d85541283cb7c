#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include <png.h>

#include "image_output.h"

namespace larmor::client {

namespace {

template <typename T>
T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);  // pixel buffers carry no alignment promise
    return v;
}

// Value of pixel i as displayed: the number itself for real types, the magnitude for complex ones.
float pixel_value(const uint8_t* data, uint16_t type, size_t i) {
    switch (type) {
        case 1: return static_cast<float>(load<uint16_t>(data + 2 * i));
        case 2: return static_cast<float>(load<int16_t>(data + 2 * i));
        case 3: return static_cast<float>(load<uint32_t>(data + 4 * i));
        case 4: return static_cast<float>(load<int32_t>(data + 4 * i));
        case 5: return load<float>(data + 4 * i);
        case 6: return static_cast<float>(load<double>(data + 8 * i));
        case 7: return std::abs(load<std::complex<float>>(data + 8 * i));
        case 8: return static_cast<float>(std::abs(load<std::complex<double>>(data + 16 * i)));
        default: throw std::invalid_argument("PNG: unknown image data_type " + std::to_string(type));
    }
}

// Maps the 0.5th..99.5th percentile window to 0..255, so a few hot pixels do not darken the image.
std::vector<uint8_t> window_to_8bit(const std::vector<float>& v) {
    std::vector<float> sorted(v);
    const size_t n = sorted.size();
    auto at = [&](double q) {
        size_t k = static_cast<size_t>(std::lround(q * static_cast<double>(n - 1)));
        std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k), sorted.end());
        return sorted[k];
    };
    const float lo = at(0.005), hi = at(0.995);
    std::vector<uint8_t> out(n, 0);
    if (!(hi > lo)) return out;  // flat image: black
    const float scale = 255.f / (hi - lo);
    for (size_t i = 0; i < n; ++i)
        out[i] = static_cast<uint8_t>(std::lround(std::clamp((v[i] - lo) * scale, 0.f, 255.f)));
    return out;
}

void write_png(const std::string& path, uint32_t width, uint32_t height, const std::vector<uint8_t>& grey) {
    // libpng's simplified API reports errors through the struct instead of longjmp, which is safe in C++.
    png_image img{};
    img.version = PNG_IMAGE_VERSION;
    img.width = width;
    img.height = height;
    img.format = PNG_FORMAT_GRAY;
    if (!png_image_write_to_file(&img, path.c_str(), 0, grey.data(), static_cast<png_int_32>(width), nullptr))
        throw std::runtime_error("cannot write PNG '" + path + "': " + img.message);
    png_image_free(&img);
}

}  // namespace

PngImageWriter::PngImageWriter(std::string dir) : dir_(std::move(dir)) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) throw std::runtime_error("cannot create the PNG directory '" + dir_ + "': " + ec.message());
}

void PngImageWriter::write(const wire::Image& im) {
    const auto& h = im.head;
    const size_t nx = h.matrix_size[0], ny = h.matrix_size[1], nz = h.matrix_size[2];
    const size_t plane = nx * ny;
    if (plane == 0) return;
    for (size_t c = 0; c < h.channels; ++c) {
        for (size_t z = 0; z < nz; ++z) {
            std::vector<float> v(plane);
            const size_t first = (c * nz + z) * plane;
            for (size_t i = 0; i < plane; ++i) {
                float x = pixel_value(im.pixels.data(), h.data_type, first + i);
                v[i] = std::isfinite(x) ? x : 0.f;
            }
            std::string name = std::to_string(h.image_series_index) + "_" + std::to_string(h.image_index);
            if (nz > 1) name += "_" + std::to_string(z);
            if (h.channels > 1) name += "_c" + std::to_string(c);
            std::string unique = name;
            for (int n = 1; used_.count(unique); ++n) unique = name + "_" + std::to_string(n);
            used_.insert(unique);
            write_png((std::filesystem::path(dir_) / (unique + ".png")).string(), static_cast<uint32_t>(nx),
                      static_cast<uint32_t>(ny), window_to_8bit(v));
        }
    }
}

}  // namespace larmor::client
