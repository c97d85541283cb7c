#pragma once
// Where the coil maps of a Cartesian SENSE reconstruction come from: the parallel-calibration (ACS)
// lines when the scan has them, else the fully sampled centre of the imaging data; and the
// low-resolution coil images of that region, from which the maps are estimated (Walsh, Gmitro &
// Marcellin, MRM 43:682, 2000: Larmor estimates the maps by Walsh's adaptive method on the
// low-resolution calibration image, the same estimator as its Walsh coil combination).
#include <cstdint>
#include <string>
#include <vector>

#include "core/backend.h"

namespace larmor::coils {

// A block of fully sampled phase-encoding lines [e1_lo, e1_hi) x [e2_lo, e2_hi) around the k-space
// centre.
struct CalibrationRegion {
    size_t e1_lo = 0, e1_hi = 0, e2_lo = 0, e2_hi = 0;
    size_t e1_lines() const { return e1_hi - e1_lo; }
    size_t e2_lines() const { return e2_hi - e2_lo; }
    std::string str() const;
};

// The largest block of sampled lines containing the centre line (E1 / 2, E2 / 2) of a mask of
// sampled (e1, e2) lines (E1 fastest, 1 = sampled): it grows one line at a time along E1 and E2
// while every line of the grown block is sampled. Throws std::runtime_error naming the mask's size
// when the centre line itself is missing or the block is thinner than `min_lines` along E1 (too
// little to estimate maps from).
CalibrationRegion fully_sampled_centre(const std::vector<uint8_t>& sampled, size_t e1, size_t e2, size_t min_lines);

// Coil images of the calibration region: the k-space [RO, E1, E2, C] (on the backend) restricted to
// the region along E1/E2 and to a central band of as many k-space samples along RO as the region is
// wide along E1 (scaled by RO / E1, so the image resolution is about isotropic), tapered by a Hann
// window on each axis (no Gibbs ringing in the maps), inverse FFT over x, y (and z).
CArray calibration_images(Backend& be, const CArray& kspace, const CalibrationRegion& region);

// Unit-norm SENSE maps [RO, E1, E2, C] from calibration images: Walsh's eigenvector of the local
// coil correlation over kernel x kernel pixels, computed every `stride` pixels and interpolated.
CArray sense_maps(Backend& be, const CArray& calibration_images, int kernel, int stride);

// Walsh's maps have unit norm wherever the calibration image has signal, so sum |s|^2 counts those
// pixels: below 1 or non-finite means the estimate collapsed (a solver would return zeros with residual
// 0). Throws std::runtime_error "<gadget>: the coil maps estimated from <from> collapsed ...".
void check_coil_maps(Backend& be, const CArray& maps, const std::string& gadget, const std::string& from);

}  // namespace larmor::coils
