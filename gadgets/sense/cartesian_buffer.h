#pragma once
// What every Cartesian parallel-imaging gadget (cg_sense, pics_l1, spirit) does to a recon buffer before
// its solver: the calibration lines joined to the data, the sampled lines as a mask along the readout,
// the calibration region, and ESPIRiT maps from it (2D, or per readout position in 3D).
#include <cstdint>
#include <string>
#include <vector>

#include "core/coils/calibration.h"
#include "core/coils/espirit.h"
#include "gadgets/message.h"

namespace larmor {

// Fewer fully sampled lines than this cannot support a coil-map or kernel estimate.
constexpr size_t kMinCalibrationLines = 8;

// The buffer's k-space with the calibration lines the imaging lines lack (measurements like any other),
// and the union of their sampled lines. `gadget` names the caller in the refusal of a calibration
// k-space whose shape differs from the data's.
struct MergedKSpace {
    CArray data;                   // [RO, E1, E2, C] on the backend
    std::vector<uint8_t> sampled;  // (e1, e2), E1 fastest
};
MergedKSpace merged_kspace(Backend& be, const ReconBuffer& rb, const std::string& gadget);

// The sampled lines repeated along the readout: a host 0/1 mask [RO, E1, E2].
RArray readout_mask(const std::vector<uint8_t>& sampled, size_t ro, size_t e1, size_t e2);

// The calibration k-space (ref when the accumulator kept it, else the data) and its fully sampled centre.
const KSpace& calibration_kspace(const ReconBuffer& rb);
coils::CalibrationRegion calibration_region(const ReconBuffer& rb);

// ESPIRiT maps of the buffer's calibration region: 2D, or per readout position for 3D buffers. An
// EspiritError becomes a std::runtime_error naming `gadget` and the region.
coils::EspiritMaps buffer_espirit_maps(Backend& be, const ReconBuffer& rb, const coils::CalibrationRegion& region,
                                       const coils::EspiritSettings& s, const std::string& gadget);

}  // namespace larmor
