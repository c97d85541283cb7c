#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include <png.h>

#include "image_output.h"
#include "wire/image_pixels.h"

namespace larmor::client {

namespace {

using wire::window_to_8bit;

// Pixel i as float; an unknown data_type is named as the PNG writer's.
float pixel_value(const uint8_t* data, uint16_t type, size_t i) {
    if (wire::pixel_bytes(type) == 0) throw std::invalid_argument("PNG: unknown image data_type " + std::to_string(type));
    return static_cast<float>(wire::pixel_value(data, type, i));
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
