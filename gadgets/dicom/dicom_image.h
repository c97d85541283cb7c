#pragma once
// ISMRMRD images as DICOM MR Image Storage files (PS3.3 A.4: Patient, General Study, General Series,
// Frame of Reference, General Equipment, General Image, Image Plane, Image Pixel, MR Image, SOP Common),
// for PACS. Patient, study and series come from the ISMRMRD header; geometry from each image header:
//   Image Orientation (Patient) = read_dir, phase_dir (ISMRMRD's patient coordinates are DICOM's LPS);
//   Pixel Spacing = field_of_view[1] / matrix_size[1] (rows), field_of_view[0] / matrix_size[0] (columns);
//   Image Position (Patient) = the centre of the first pixel: ISMRMRD's position is the centre of the
//     field of view, which a centred FFT puts at pixel (N/2, N/2), so
//     IPP = position - (N_x / 2) dx read_dir - (N_y / 2) dy phase_dir (+ (k - N_z / 2) dz slice_dir for
//     slice k of a 3D image);
//   Slice Thickness = field_of_view[2] / matrix_size[2].
// Built on DCMTK (Debian libdcmtk-dev); without it (dicom_available() false) writing throws.
#include <cstdint>
#include <string>
#include <vector>

#include <ismrmrd/xml.h>

#include "wire/messages.h"

namespace larmor::dicom {

// What a series shares: its UIDs and numbers, made once per session (and image series index).
struct SeriesIdentity {
    std::string study_uid, series_uid, frame_of_reference_uid;
    long series_number = 1;
    std::string series_description;
};

struct DicomFile {
    std::vector<uint8_t> bytes;  // a DICOM Part 10 file (preamble, meta header, dataset)
    std::string filename;        // what a client stores it as (no directories)
};

bool dicom_available();
// Empty when DICOM can be written; else why not: a build without DCMTK, or DCMTK's data dictionary
// not found (it is a file DCMTK reads at run time: DCMDICTPATH, or the path compiled into the library).
std::string dicom_unavailable_reason();

// A new UID under `root` (empty: DCMTK's site root).
std::string new_uid(const std::string& root);

// The study / frame of reference UIDs the header names, else new ones; the series' own UID.
SeriesIdentity series_identity(const ISMRMRD::IsmrmrdHeader& h, uint16_t image_series_index,
                               const std::string& uid_root, const std::string& description);

// One file per (slice, channel) of the image: matrix_size[2] x channels files, instance numbers from
// `first_instance` on. Pixels: unsigned or signed 16-bit as they are; float, double and complex are
// converted to unsigned 16-bit magnitude scaled so the image's peak is 4095 (ImageFinish's automatic
// scale). Throws std::invalid_argument naming what does not fit (no pixels, an unknown data type, a
// zero field of view).
std::vector<DicomFile> dicom_files(const wire::Image& image, const ISMRMRD::IsmrmrdHeader& h,
                                   const SeriesIdentity& series, long first_instance, const std::string& uid_root);

// The IPP, IOP (6) and pixel spacing (row, column) the files of slice `slice` carry: the geometry
// above, exposed for tests.
struct PlaneGeometry {
    double position[3], orientation[6], spacing[2], thickness;
};
PlaneGeometry plane_geometry(const ISMRMRD::ISMRMRD_ImageHeader& head, uint32_t slice);

}  // namespace larmor::dicom
