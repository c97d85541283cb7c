#include "gadgets/sense/cartesian_buffer.h"

#include <algorithm>
#include <stdexcept>

namespace larmor {

MergedKSpace merged_kspace(Backend& be, const ReconBuffer& rb, const std::string& gadget) {
    MergedKSpace m{rb.data.data, rb.data.sampled};
    if (rb.ref.empty()) return m;
    const Shape& s = rb.data.data.shape();
    if (rb.ref.data.shape() != s)
        throw std::runtime_error(gadget + ": calibration k-space " + rb.ref.data.shape().str() +
                                 " does not match the data " + s.str());
    RArray only_ref = RArray::host({s[0], s[1], s[2]});
    bool any = false;
    for (size_t l = 0; l < m.sampled.size(); ++l)
        if (rb.ref.sampled[l] && !m.sampled[l]) {
            std::fill(only_ref.data() + l * s[0], only_ref.data() + (l + 1) * s[0], 1.f);
            m.sampled[l] = 1;
            any = true;
        }
    if (!any) return m;
    CArray merged = be.empty(s), extra = be.empty(s);
    be.mul(rb.ref.data, be.to_device(only_ref), extra);
    be.copy(rb.data.data, merged);
    be.axpy(1.f, extra, merged);
    m.data = merged;
    return m;
}

RArray readout_mask(const std::vector<uint8_t>& sampled, size_t ro, size_t e1, size_t e2) {
    if (sampled.size() != e1 * e2)
        throw std::invalid_argument("sampling mask of " + std::to_string(sampled.size()) + " lines for " +
                                    std::to_string(e1) + " x " + std::to_string(e2) + " phase encodes");
    RArray mask = RArray::host({ro, e1, e2});
    for (size_t l = 0; l < e1 * e2; ++l)
        if (sampled[l]) std::fill(mask.data() + l * ro, mask.data() + (l + 1) * ro, 1.f);
    return mask;
}

const KSpace& calibration_kspace(const ReconBuffer& rb) { return rb.ref.empty() ? rb.data : rb.ref; }

coils::CalibrationRegion calibration_region(const ReconBuffer& rb) {
    const Shape& s = rb.data.data.shape();
    return coils::fully_sampled_centre(calibration_kspace(rb).sampled, s[1], s[2], kMinCalibrationLines);
}

coils::EspiritMaps buffer_espirit_maps(Backend& be, const ReconBuffer& rb, const coils::CalibrationRegion& region,
                                       const coils::EspiritSettings& s, const std::string& gadget) {
    const KSpace& cal = calibration_kspace(rb);
    try {
        return cal.data.shape()[2] == 1
                   ? coils::espirit_maps(be, cal.data, region.e1_lo, region.e1_hi, s)
                   : coils::espirit_maps_3d(be, cal.data, region.e1_lo, region.e1_hi, region.e2_lo, region.e2_hi, s);
    } catch (const coils::EspiritError& e) {
        throw std::runtime_error(gadget + ": the coil maps cannot be estimated from the calibration region " +
                                 region.str() + ": " + e.what());
    }
}

}  // namespace larmor
