#include "gadgets/calibration_provenance.h"

namespace larmor {

void record_calibration_provenance(ISMRMRD::MetaContainer& meta, const CalibrationProvenance& p) {
    meta.set("LarmorMethod", p.method.c_str());
    meta.set("LarmorKernel", p.kernel.c_str());
    meta.set("LarmorLambda", p.lambda);
    meta.set("LarmorCalibrationRegion", p.region.c_str());
    meta.set("LarmorCoilMaps", p.maps.c_str());
    if (!p.acceleration.empty()) meta.set("LarmorAcceleration", p.acceleration.c_str());
}

}  // namespace larmor
