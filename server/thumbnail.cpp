#include "server/thumbnail.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "wire/image_pixels.h"

namespace larmor::server {
namespace {

void put_le(std::string& s, uint32_t v, int bytes) {
    for (int b = 0; b < bytes; ++b) s.push_back(char((v >> (8 * b)) & 0xff));
}

// An 8-bit palette BMP (BITMAPINFOHEADER, grey ramp), rows top-down (negative height), each padded
// to 4 bytes.
std::string bmp(const std::vector<uint8_t>& grey, size_t w, size_t h) {
    const size_t stride = (w + 3) / 4 * 4, pixels = stride * h, offset = 14 + 40 + 256 * 4;
    std::string s;
    s.reserve(offset + pixels);
    s += "BM";
    put_le(s, uint32_t(offset + pixels), 4);
    put_le(s, 0, 4);
    put_le(s, uint32_t(offset), 4);
    put_le(s, 40, 4);
    put_le(s, uint32_t(w), 4);
    put_le(s, uint32_t(-int32_t(h)), 4);
    put_le(s, 1, 2);   // planes
    put_le(s, 8, 2);   // bits per pixel
    put_le(s, 0, 4);   // no compression
    put_le(s, uint32_t(pixels), 4);
    put_le(s, 2835, 4), put_le(s, 2835, 4);  // 72 dpi
    put_le(s, 256, 4), put_le(s, 0, 4);
    for (uint32_t i = 0; i < 256; ++i) put_le(s, i | i << 8 | i << 16, 4);
    for (size_t y = 0; y < h; ++y) {
        s.append(reinterpret_cast<const char*>(grey.data() + y * w), w);
        s.append(stride - w, '\0');
    }
    return s;
}

std::string base64(const std::string& in) {
    static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((in.size() + 2) / 3 * 4);
    for (size_t i = 0; i < in.size(); i += 3) {
        uint32_t v = uint32_t(uint8_t(in[i])) << 16;
        if (i + 1 < in.size()) v |= uint32_t(uint8_t(in[i + 1])) << 8;
        if (i + 2 < in.size()) v |= uint32_t(uint8_t(in[i + 2]));
        out += k[(v >> 18) & 63];
        out += k[(v >> 12) & 63];
        out += i + 1 < in.size() ? k[(v >> 6) & 63] : '=';
        out += i + 2 < in.size() ? k[v & 63] : '=';
    }
    return out;
}

}  // namespace

std::string thumbnail_data_uri(const wire::Image& im, size_t max_side) {
    const auto& h = im.head;
    const size_t nx = h.matrix_size[0], ny = h.matrix_size[1], nz = std::max<uint16_t>(h.matrix_size[2], 1);
    const size_t bytes = wire::pixel_bytes(h.data_type);
    if (bytes == 0 || nx == 0 || ny == 0 || max_side == 0 || im.pixels.size() < nx * ny * nz * bytes) return {};
    const size_t factor = std::max((std::max(nx, ny) + max_side - 1) / max_side, size_t(1));
    const size_t w = (nx + factor - 1) / factor, ht = (ny + factor - 1) / factor;
    const size_t first = (nz / 2) * nx * ny;  // the middle slice, channel 0
    std::vector<float> v(w * ht, 0.f);
    for (size_t y = 0; y < ht; ++y)
        for (size_t x = 0; x < w; ++x) {
            double sum = 0;
            size_t n = 0;
            for (size_t yy = y * factor; yy < std::min(ny, (y + 1) * factor); ++yy)
                for (size_t xx = x * factor; xx < std::min(nx, (x + 1) * factor); ++xx, ++n)
                    sum += wire::pixel_value(im.pixels.data(), h.data_type, first + xx + nx * yy);
            v[x + w * y] = n ? float(sum / double(n)) : 0.f;
        }
    return "data:image/bmp;base64," + base64(bmp(wire::window_to_8bit(v), w, ht));
}

}  // namespace larmor::server
