#include "core/coils/calibration_matrix.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace larmor::coils {

CArray calibration_block(const CArray& kspace, size_t e1_lo, size_t e1_hi, size_t cx, size_t cy) {
    const Shape& s = kspace.shape();
    if (kspace.device() != Device::Cpu || s.rank() != 4 || s[2] != 1)
        throw std::invalid_argument("calibration_block: k-space " + s.str() + " should be host [RO, E1, 1, C]");
    const size_t ro = s[0], e1 = s[1], coils = s[3];
    if (e1_lo >= e1_hi || e1_hi > e1)
        throw std::invalid_argument("calibration_block: lines [" + std::to_string(e1_lo) + ", " + std::to_string(e1_hi) +
                                    ") are outside k-space " + s.str());
    cx = std::min(cx, ro);
    cy = std::min(cy, e1_hi - e1_lo);
    const size_t x0 = ro / 2 - cx / 2;
    const size_t y0 = e1_lo + (e1_hi - e1_lo - cy) / 2;
    CArray block = CArray::host({cx, cy, coils});
    const cfloat* src = kspace.data();
    cfloat* dst = block.data();
    for (size_t c = 0; c < coils; ++c)
        for (size_t y = 0; y < cy; ++y)
            std::copy_n(src + x0 + ro * (y0 + y + e1 * c), cx, dst + cx * (y + cy * c));
    return block;
}

CArray calibration_matrix(const CArray& block, int kernel) {
    const Shape& s = block.shape();
    if (block.device() != Device::Cpu || s.rank() != 3)
        throw std::invalid_argument("calibration_matrix: block " + s.str() + " should be host [cx, cy, C]");
    const size_t cx = s[0], cy = s[1], coils = s[2], k = size_t(kernel);
    if (kernel < 1 || k > cx || k > cy)
        throw std::invalid_argument("calibration_matrix: a " + std::to_string(kernel) + " x " + std::to_string(kernel) +
                                    " kernel does not fit in the calibration block " + s.str());
    const size_t wx = cx - k + 1, wy = cy - k + 1, rows = wx * wy;
    CArray a = CArray::host({rows, k * k * coils});
    const cfloat* b = block.data();
    cfloat* out = a.data();
    for (size_t c = 0; c < coils; ++c)
        for (size_t py = 0; py < k; ++py)
            for (size_t px = 0; px < k; ++px) {
                cfloat* col = out + rows * (px + k * py + k * k * c);
                for (size_t y = 0; y < wy; ++y)
                    for (size_t x = 0; x < wx; ++x) col[x + wx * y] = b[(x + px) + cx * ((y + py) + cy * c)];
            }
    return a;
}

}  // namespace larmor::coils
