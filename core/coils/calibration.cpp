#include "core/coils/calibration.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/coils/coil_combination.h"

namespace larmor::coils {
namespace {

bool block_sampled(const std::vector<uint8_t>& s, size_t e1, size_t a0, size_t a1, size_t b0, size_t b1) {
    for (size_t b = b0; b < b1; ++b)
        for (size_t a = a0; a < a1; ++a)
            if (!s[b * e1 + a]) return false;
    return true;
}

// Hann taper over [lo, hi) of an axis of n samples: 0.5 - 0.5 cos(2 pi (i - lo + 1) / (w + 1)),
// positive across the whole band, zero outside.
std::vector<float> hann(size_t n, size_t lo, size_t hi) {
    std::vector<float> w(n, 0.f);
    const double width = double(hi - lo);
    for (size_t i = lo; i < hi; ++i) w[i] = float(0.5 - 0.5 * std::cos(2.0 * M_PI * double(i - lo + 1) / (width + 1.0)));
    return w;
}

}  // namespace

std::string CalibrationRegion::str() const {
    return "e1 [" + std::to_string(e1_lo) + ", " + std::to_string(e1_hi) + ") x e2 [" + std::to_string(e2_lo) + ", " +
           std::to_string(e2_hi) + ")";
}

CalibrationRegion fully_sampled_centre(const std::vector<uint8_t>& sampled, size_t e1, size_t e2, size_t min_lines) {
    if (sampled.size() != e1 * e2 || e1 == 0 || e2 == 0)
        throw std::runtime_error("calibration: sampling mask of " + std::to_string(sampled.size()) + " lines for " +
                                 std::to_string(e1) + " x " + std::to_string(e2) + " phase encodes");
    CalibrationRegion r{e1 / 2, e1 / 2 + 1, e2 / 2, e2 / 2 + 1};
    if (!sampled[r.e2_lo * e1 + r.e1_lo])
        throw std::runtime_error("calibration: the k-space centre line (e1 " + std::to_string(e1 / 2) + ", e2 " +
                                 std::to_string(e2 / 2) + ") was not acquired, so there is no calibration region");
    for (bool grown = true; grown;) {
        grown = false;
        if (r.e1_lo > 0 && block_sampled(sampled, e1, r.e1_lo - 1, r.e1_lo, r.e2_lo, r.e2_hi)) --r.e1_lo, grown = true;
        if (r.e1_hi < e1 && block_sampled(sampled, e1, r.e1_hi, r.e1_hi + 1, r.e2_lo, r.e2_hi)) ++r.e1_hi, grown = true;
        if (r.e2_lo > 0 && block_sampled(sampled, e1, r.e1_lo, r.e1_hi, r.e2_lo - 1, r.e2_lo)) --r.e2_lo, grown = true;
        if (r.e2_hi < e2 && block_sampled(sampled, e1, r.e1_lo, r.e1_hi, r.e2_hi, r.e2_hi + 1)) ++r.e2_hi, grown = true;
    }
    if (r.e1_lines() < min_lines)
        throw std::runtime_error("calibration: the fully sampled centre spans " + std::to_string(r.e1_lines()) +
                                 " lines along e1 (" + r.str() + "), fewer than the " + std::to_string(min_lines) +
                                 " needed to estimate coil maps");
    return r;
}

CArray calibration_images(Backend& be, const CArray& kspace, const CalibrationRegion& region) {
    const Shape& s = kspace.shape();
    if (s.rank() != 4)
        throw std::invalid_argument("calibration_images: k-space " + s.str() + " should be [RO, E1, E2, C]");
    const size_t ro = s[0], e1 = s[1], e2 = s[2];
    if (region.e1_hi > e1 || region.e2_hi > e2 || region.e1_lines() == 0 || region.e2_lines() == 0)
        throw std::invalid_argument("calibration_images: region " + region.str() + " is outside k-space " + s.str());
    // As many RO samples as E1 lines, in proportion to the matrix, centred on RO / 2.
    const size_t band = std::min(ro, std::max<size_t>(2, size_t(std::lround(double(region.e1_lines()) * double(ro) / double(e1)))));
    const size_t x_lo = ro / 2 - band / 2;
    const std::vector<float> wx = hann(ro, x_lo, x_lo + band), wy = hann(e1, region.e1_lo, region.e1_hi);
    const std::vector<float> wz = e2 > 1 ? hann(e2, region.e2_lo, region.e2_hi) : std::vector<float>{1.f};
    RArray w = RArray::host({ro, e1, e2});
    for (size_t z = 0; z < e2; ++z)
        for (size_t y = 0; y < e1; ++y)
            for (size_t x = 0; x < ro; ++x) w.data()[(z * e1 + y) * ro + x] = wx[x] * wy[y] * wz[z];
    CArray tapered = be.empty(s);
    be.mul(kspace, be.to_device(w), tapered);
    CArray images = be.empty(s);
    be.fft(tapered, images, e2 > 1 ? 0b111u : 0b011u, FFTDirection::Inverse);
    return images;
}

CArray sense_maps(Backend& be, const CArray& calibration_images, int kernel, int stride) {
    CArray maps = be.empty(calibration_images.shape());
    walsh_sensitivities(be, calibration_images, kernel, stride, maps);
    return maps;
}

void check_coil_maps(Backend& be, const CArray& maps, const std::string& gadget, const std::string& from) {
    CArray n2 = be.empty({1});
    be.norm2(maps, n2);
    const double sum = be.to_host(n2).data()[0].real();
    if (!(sum >= 1.0) || !std::isfinite(sum))
        throw std::runtime_error(gadget + ": the coil maps estimated from " + from + " collapsed: the sum of |s|^2 over " +
                                 maps.shape().str() + " is " + std::to_string(sum) +
                                 " where each pixel with signal contributes 1 (no signal in the calibration data, "
                                 "non-finite samples, or calibration images that overflowed float)");
}

}  // namespace larmor::coils
