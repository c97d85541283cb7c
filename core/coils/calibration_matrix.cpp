#include "core/coils/calibration_matrix.h"

#include <algorithm>
#include <complex>
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
    if (block.device() != Device::Cpu || (s.rank() != 3 && s.rank() != 4))
        throw std::invalid_argument("calibration_matrix: block " + s.str() + " should be host [cx, cy, C] or [cx, cy, cz, C]");
    const bool volume = s.rank() == 4;
    const size_t cx = s[0], cy = s[1], cz = volume ? s[2] : 1, coils = s[s.rank() - 1], k = size_t(kernel),
                 kz = volume ? k : 1;
    if (kernel < 1 || k > cx || k > cy || kz > cz)
        throw std::invalid_argument("calibration_matrix: a " + std::to_string(kernel) + (volume ? "^3" : "^2") +
                                    " kernel does not fit in the calibration block " + s.str());
    const size_t wx = cx - k + 1, wy = cy - k + 1, wz = cz - kz + 1, rows = wx * wy * wz;
    CArray a = CArray::host({rows, k * k * kz * coils});
    const cfloat* b = block.data();
    cfloat* out = a.data();
    for (size_t c = 0; c < coils; ++c)
        for (size_t pz = 0; pz < kz; ++pz)
            for (size_t py = 0; py < k; ++py)
                for (size_t px = 0; px < k; ++px) {
                    cfloat* col = out + rows * (px + k * (py + k * (pz + kz * c)));
                    for (size_t z = 0; z < wz; ++z)
                        for (size_t y = 0; y < wy; ++y)
                            for (size_t x = 0; x < wx; ++x)
                                col[x + wx * (y + wy * z)] = b[(x + px) + cx * ((y + py) + cy * ((z + pz) + cz * c))];
                }
    return a;
}

CArray calibration_block_3d(const CArray& kspace, size_t e1_lo, size_t e1_hi, size_t e2_lo, size_t e2_hi, size_t cx,
                            size_t cy, size_t cz) {
    const Shape& s = kspace.shape();
    if (kspace.device() != Device::Cpu || s.rank() != 4)
        throw std::invalid_argument("calibration_block_3d: k-space " + s.str() + " should be host [RO, E1, E2, C]");
    const size_t ro = s[0], e1 = s[1], e2 = s[2], coils = s[3];
    if (e1_lo >= e1_hi || e1_hi > e1 || e2_lo >= e2_hi || e2_hi > e2)
        throw std::invalid_argument("calibration_block_3d: lines e1 [" + std::to_string(e1_lo) + ", " +
                                    std::to_string(e1_hi) + ") x e2 [" + std::to_string(e2_lo) + ", " +
                                    std::to_string(e2_hi) + ") are outside k-space " + s.str());
    cx = std::min(cx, ro);
    cy = std::min(cy, e1_hi - e1_lo);
    cz = std::min(cz, e2_hi - e2_lo);
    const size_t x0 = ro / 2 - cx / 2, y0 = e1_lo + (e1_hi - e1_lo - cy) / 2, z0 = e2_lo + (e2_hi - e2_lo - cz) / 2;
    CArray block = CArray::host({cx, cy, cz, coils});
    for (size_t c = 0; c < coils; ++c)
        for (size_t z = 0; z < cz; ++z)
            for (size_t y = 0; y < cy; ++y)
                std::copy_n(kspace.data() + x0 + ro * ((y0 + y) + e1 * ((z0 + z) + e2 * c)), cx,
                            block.data() + cx * (y + cy * (z + cz * c)));
    return block;
}

HybridBlocks hybrid_calibration_blocks(Backend& be, const CArray& kspace, size_t e1_lo, size_t e1_hi, size_t e2_lo,
                                       size_t e2_hi, size_t most, const char* who) {
    const Shape& sh = kspace.shape();
    if (sh.rank() != 4 || sh[2] < 2)
        throw std::invalid_argument(std::string(who) + ": k-space " + sh.str() + " should be [RO, E1, E2 > 1, C]");
    const size_t ro = sh[0], e1 = sh[1], e2 = sh[2], c = sh[3];
    if (e1_lo >= e1_hi || e1_hi > e1 || e2_lo >= e2_hi || e2_hi > e2)
        throw std::invalid_argument(std::string(who) + ": calibration lines e1 [" + std::to_string(e1_lo) + ", " +
                                    std::to_string(e1_hi) + ") x e2 [" + std::to_string(e2_lo) + ", " +
                                    std::to_string(e2_hi) + ") are outside k-space " + sh.str());
    CArray hybrid = be.empty(sh);
    be.fft(kspace, hybrid, 0b001u, FFTDirection::Inverse);
    const CArray host = be.to_host(hybrid);
    HybridBlocks b;
    b.ro = ro;
    b.coils = c;
    b.cy = std::min(most, e1_hi - e1_lo);
    b.cz = std::min(most, e2_hi - e2_lo);
    const size_t y0 = e1_lo + (e1_hi - e1_lo - b.cy) / 2, z0 = e2_lo + (e2_hi - e2_lo - b.cz) / 2;
    b.all = CArray::host({b.cy, ro, b.cz, c});
    b.energy.assign(ro, 0.0);
    for (size_t q = 0; q < c; ++q)
        for (size_t z = 0; z < b.cz; ++z)
            for (size_t x = 0; x < ro; ++x)
                for (size_t y = 0; y < b.cy; ++y) {
                    const cfloat v = host.data()[x + ro * ((y0 + y) + e1 * ((z0 + z) + e2 * q))];
                    b.all.data()[y + b.cy * (x + ro * (z + b.cz * q))] = v;
                    b.energy[x] += std::norm(std::complex<double>(v));
                }
    return b;
}

CArray HybridBlocks::block(size_t x) const {
    CArray out = CArray::host({cy, cz, coils});
    for (size_t q = 0; q < coils; ++q)
        for (size_t z = 0; z < cz; ++z)
            std::copy_n(all.data() + cy * (x + ro * (z + cz * q)), cy, out.data() + cy * (z + cz * q));
    return out;
}

}  // namespace larmor::coils
