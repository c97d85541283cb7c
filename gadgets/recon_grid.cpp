#include "gadgets/recon_grid.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace larmor {
namespace {

// Extent of the reconstructed image along y or z: the encoded extent scaled by the FOV ratio.
size_t cropped_extent(size_t encoded, float encoded_fov, float recon_fov, size_t recon_matrix) {
    if (encoded <= 1) return encoded;
    if (encoded_fov > 0 && recon_fov > 0) {
        const size_t n = size_t(std::lround(double(encoded) * double(recon_fov) / double(encoded_fov)));
        return std::max<size_t>(1, n);
    }
    return std::min(encoded, recon_matrix);  // header without FOVs: trust the matrix
}

Shape fov_shape(const EncodingGeometry& g, const Shape& s) {
    return {g.recon_matrix[0], cropped_extent(s[1], g.encoded_fov[1], g.recon_fov[1], g.recon_matrix[1]),
            cropped_extent(s[2], g.encoded_fov[2], g.recon_fov[2], g.recon_matrix[2]), s[3]};
}

CArray crop(Backend& be, const CArray& x, const Shape& shape) {
    if (x.shape() == shape) return x;
    CArray y = be.empty(shape);
    be.crop_pad_centred(x, y);
    return y;
}

}  // namespace

Shape recon_shape(const EncodingGeometry& g, const Shape& s) {
    if (s.rank() != 4) throw std::invalid_argument("recon grid: image " + s.str() + " should be [RO, E1, E2, CH]");
    return {g.recon_matrix[0], g.recon_matrix[1], s[2] > 1 ? g.recon_matrix[2] : s[2], s[3]};
}

CArray to_recon_grid(Backend& be, const CArray& encoded, const EncodingGeometry& g) {
    const Shape& s = encoded.shape();
    const Shape image = recon_shape(g, s), fov = fov_shape(g, s);
    // Field of view first (image-domain crop), then the matrix: when the reconstruction matrix
    // differs from the cropped extent (interpolation), resample by zero-padding / cropping k-space.
    CArray x = crop(be, encoded, fov);
    if (image == fov) return x;
    const AxisMask axes = s[2] > 1 ? 0b110u : 0b010u;
    CArray k = be.empty(fov);
    be.fft(x, k, axes, FFTDirection::Forward);
    CArray kr = crop(be, k, image);
    CArray y = be.empty(image);
    be.fft(kr, y, axes, FFTDirection::Inverse);
    return y;
}

}  // namespace larmor
