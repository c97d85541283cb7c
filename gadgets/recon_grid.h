#pragma once
// From the encoded grid of a k-space buffer to the reconstruction grid of the ISMRMRD header, as
// Gadgetron's generic Cartesian chain does it: a centred crop in the image domain, x to the
// reconstruction matrix (this also removes readout oversampling when no RemoveROOversampling ran),
// y and z by reconstruction FOV / encoded FOV (phase / slice oversampling); a reconstruction matrix
// that differs from the cropped extent (interpolated reconstructions) is reached by zero-padding or
// cropping k-space. Shared by every gadget that turns a buffer into images (FFT, CG-SENSE).
#include "core/backend.h"
#include "gadgets/message.h"

namespace larmor {

// Shape [X, Y, Z, CH] of the image `encoded` ([RO, E1, E2, CH] image-domain array) becomes.
Shape recon_shape(const EncodingGeometry& g, const Shape& encoded);

// The image of `encoded` on the reconstruction grid (a new array, or `encoded` itself when the grids
// coincide).
CArray to_recon_grid(Backend& be, const CArray& encoded, const EncodingGeometry& g);

}  // namespace larmor
