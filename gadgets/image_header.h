#pragma once
// ISMRMRD image headers and meta attributes of the images the Cartesian chain produces.
#include <cstdint>
#include <string>

#include <ismrmrd/ismrmrd.h>
#include <ismrmrd/meta.h>

#include "core/shape.h"
#include "gadgets/message.h"

namespace larmor {

// Header of a complex image of shape [X, Y, Z, CH] reconstructed from the k-space whose
// representative readout is `ref`: matrix_size from the shape, field_of_view = the reconstruction
// FOV, position/orientation/table position, time stamps, loop indices, user ints/floats and the
// measurement uid copied from the readout (as Gadgetron's FFTGadget does), data_type complex float,
// image_type complex.
ISMRMRD::ISMRMRD_ImageHeader image_header_from(const ISMRMRD::ISMRMRD_AcquisitionHeader& ref,
                                               const EncodingGeometry& geometry, const Shape& shape,
                                               uint16_t image_index);

// Meta attributes as XML (<ismrmrdMeta>) and back; an empty string is an empty container.
ISMRMRD::MetaContainer parse_meta(const std::string& xml);
std::string write_meta(const ISMRMRD::MetaContainer& meta);

// Appends one step to the "ImageProcessingHistory" attribute (and its GADGETRON_ twin).
void append_processing_history(ISMRMRD::MetaContainer& meta, const char* step);

// The provenance block every image of every chain carries (issue 18), set by ImageFinish from the
// session: LarmorChain, LarmorVersion, LarmorBackend ("cpu" / "cuda"), LarmorDevice (the backend's
// description) and LarmorStatus ("ok", or "failed" with LarmorFailure saying what failed). The gadget
// that made the image adds the parameters that shaped it (solver iterations and residual, density
// compensation, NUFFT tolerance, coil combination, ...).
void set_provenance(ISMRMRD::MetaContainer& meta, const std::string& chain, const std::string& backend,
                    const std::string& device);

// Marks an image as the result of a failed step: LarmorStatus "failed", LarmorFailure `why` (appended
// when several steps failed). A client that keeps the image can tell it from a good one.
void mark_failed(ISMRMRD::MetaContainer& meta, const std::string& why);
bool is_marked_failed(const ISMRMRD::MetaContainer& meta);

// Meta keys shared by the gadgets.
inline constexpr const char* kMetaStatus = "LarmorStatus";
inline constexpr const char* kMetaFailure = "LarmorFailure";
inline constexpr const char* kMetaDataRole = "DataRole";
inline constexpr const char* kMetaGadgetronDataRole = "GADGETRON_DataRole";
inline constexpr const char* kMetaHistory = "ImageProcessingHistory";
inline constexpr const char* kMetaGadgetronHistory = "GADGETRON_ImageProcessingHistory";
// Set to 1 on images reconstructed from the calibration (ACS) lines alone.
inline constexpr const char* kMetaCalibration = "LarmorCalibrationOnly";

}  // namespace larmor
