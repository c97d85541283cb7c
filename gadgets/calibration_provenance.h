#pragma once
// The provenance block every autocalibrating reconstruction (CG-SENSE, GRAPPA) writes into its images'
// meta under the same keys, so a reader (or a Gadgetron user comparing with its own chain) finds the
// method, its kernel, its regularisation, where it calibrated and how the coils were combined in one
// place whichever chain made the image:
//   LarmorMethod, LarmorKernel, LarmorLambda, LarmorCalibrationRegion, LarmorCoilMaps, LarmorAcceleration.
#include <string>

#include <ismrmrd/meta.h>

namespace larmor {

struct CalibrationProvenance {
    std::string method;        // "GRAPPA", "CG-SENSE"
    std::string kernel;        // "5x4 (RO x E1)", "ESPIRiT 6x6"
    double lambda = 0;         // the Tikhonov weight as configured (relative, see each gadget's proto)
    std::string region;        // the calibration region, coils::CalibrationRegion::str()
    std::string maps;          // how the coil maps were made
    std::string acceleration;  // "R=3", "R=2x2"; empty when not known
};

void record_calibration_provenance(ISMRMRD::MetaContainer& meta, const CalibrationProvenance& p);

}  // namespace larmor
