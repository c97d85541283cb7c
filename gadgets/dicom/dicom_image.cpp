#include "gadgets/dicom/dicom_image.h"
#include "wire/image_pixels.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <stdexcept>

#ifdef LARMOR_WITH_DCMTK
#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dctk.h>
#include <dcmtk/dcmdata/dcostrmb.h>
#include <dcmtk/dcmdata/dcuid.h>
#endif

namespace larmor::dicom {
#ifdef LARMOR_WITH_DCMTK
namespace {

constexpr double kAutoScalePeak = 4095.0;  // as ImageFinish's automatic scale (12-bit display range)

// xs:date "2026-11-29" -> DA "20261129"; xs:time "14:03:07.5" -> TM "140307.5". Anything else empty
// (Type 2 attributes may be empty; a malformed value would fail the file).
std::string dicom_date(const std::string& d) {
    if (d.size() != 10 || d[4] != '-' || d[7] != '-') return {};
    std::string s = d.substr(0, 4) + d.substr(5, 2) + d.substr(8, 2);
    return std::all_of(s.begin(), s.end(), ::isdigit) ? s : std::string();
}
std::string dicom_time(const std::string& t) {
    if (t.size() < 8 || t[2] != ':' || t[5] != ':') return {};
    std::string s = t.substr(0, 2) + t.substr(3, 2) + t.substr(6, 2);
    if (!std::all_of(s.begin(), s.end(), ::isdigit)) return {};
    if (t.size() > 9 && t[8] == '.') {
        std::string frac = t.substr(9, 6);
        if (std::all_of(frac.begin(), frac.end(), ::isdigit)) s += "." + frac;
    }
    return s;
}

template <class T>
std::string opt(const ISMRMRD::Optional<T>& o) {
    if (!o) return {};
    if constexpr (std::is_same_v<T, std::string>) return *o;
    else return std::to_string(*o);
}

size_t bytes_of(uint16_t data_type) { return wire::pixel_bytes(data_type); }

double value_at(const wire::Image& im, size_t i) { return wire::pixel_value(im.pixels.data(), im.head.data_type, i); }

}  // namespace
#endif

PlaneGeometry plane_geometry(const ISMRMRD::ISMRMRD_ImageHeader& h, uint32_t slice) {
    PlaneGeometry g{};
    const double nx = std::max<uint16_t>(h.matrix_size[0], 1), ny = std::max<uint16_t>(h.matrix_size[1], 1),
                 nz = std::max<uint16_t>(h.matrix_size[2], 1);
    const double dx = h.field_of_view[0] / nx, dy = h.field_of_view[1] / ny, dz = h.field_of_view[2] / nz;
    // A 2D image's third extent is its slice thickness; a volume's slices are dz apart, centred alike.
    const double shift_z = h.matrix_size[2] > 1 ? (double(slice) - std::floor(nz / 2)) * dz : 0.0;
    for (int a = 0; a < 3; ++a) {
        g.position[a] = h.position[a] - std::floor(nx / 2) * dx * h.read_dir[a] -
                        std::floor(ny / 2) * dy * h.phase_dir[a] + shift_z * h.slice_dir[a];
        g.orientation[a] = h.read_dir[a];
        g.orientation[3 + a] = h.phase_dir[a];
    }
    g.spacing[0] = dy;  // between rows
    g.spacing[1] = dx;  // between columns
    g.thickness = dz;
    return g;
}

#ifdef LARMOR_WITH_DCMTK

bool dicom_available() { return true; }

std::string dicom_unavailable_reason() {
    if (dcmDataDict.isDictionaryLoaded()) return {};
    const char* path = std::getenv("DCMDICTPATH");
    return std::string("DCMTK's data dictionary is not loaded (DCMDICTPATH ") + (path ? path : "unset") +
           "; Debian keeps it in /usr/share/libdcmtk17/dicom.dic)";
}

std::string new_uid(const std::string& root) {
    char buf[100];
    dcmGenerateUniqueIdentifier(buf, root.empty() ? SITE_INSTANCE_UID_ROOT : root.c_str());
    return buf;
}

SeriesIdentity series_identity(const ISMRMRD::IsmrmrdHeader& h, uint16_t image_series_index,
                               const std::string& uid_root, const std::string& description) {
    SeriesIdentity s;
    if (h.studyInformation && h.studyInformation->studyInstanceUID)
        s.study_uid = *h.studyInformation->studyInstanceUID;
    if (s.study_uid.empty()) s.study_uid = new_uid(uid_root);
    if (h.measurementInformation && h.measurementInformation->frameOfReferenceUID)
        s.frame_of_reference_uid = *h.measurementInformation->frameOfReferenceUID;
    if (s.frame_of_reference_uid.empty()) s.frame_of_reference_uid = new_uid(uid_root);
    s.series_uid = new_uid(uid_root);
    long base = 0;
    if (h.measurementInformation && h.measurementInformation->initialSeriesNumber)
        base = *h.measurementInformation->initialSeriesNumber;
    s.series_number = base + std::max<long>(image_series_index, 1);
    s.series_description = description;
    if (s.series_description.empty() && h.measurementInformation && h.measurementInformation->seriesDescription)
        s.series_description = *h.measurementInformation->seriesDescription;
    return s;
}

namespace {

class Writer {
public:
    explicit Writer(DcmDataset* ds) : ds_(ds) {}
    void str(const DcmTagKey& tag, const std::string& value) {
        check(ds_->putAndInsertString(tag, value.c_str()), tag);
    }
    void u16(const DcmTagKey& tag, uint16_t v) { check(ds_->putAndInsertUint16(tag, v), tag); }
    void decimals(const DcmTagKey& tag, const double* v, int n) {
        std::string s;
        char buf[32];
        for (int i = 0; i < n; ++i) {
            // DS holds at most 16 characters per value.
            std::snprintf(buf, sizeof buf, "%.10g", std::abs(v[i]) < 1e-9 ? 0.0 : v[i]);
            std::string one = buf;
            if (one.size() > 16) {
                std::snprintf(buf, sizeof buf, "%.8g", v[i]);
                one = buf;
            }
            s += (i ? "\\" : "") + one;
        }
        str(tag, s);
    }

private:
    static void check(const OFCondition& c, const DcmTagKey& tag) {
        if (c.bad())
            throw std::runtime_error("DICOM: cannot set (" + std::to_string(tag.getGroup()) + "," +
                                     std::to_string(tag.getElement()) + "): " + c.text());
    }
    DcmDataset* ds_;
};

std::vector<uint8_t> encode(DcmFileFormat& ff) {
    const E_TransferSyntax xfer = EXS_LittleEndianExplicit;
    OFCondition c = ff.validateMetaInfo(xfer);
    if (c.bad()) throw std::runtime_error(std::string("DICOM: meta header: ") + c.text());
    std::vector<char> chunk(1 << 20);
    DcmOutputBufferStream os(chunk.data(), offile_off_t(chunk.size()));
    std::vector<uint8_t> out;
    auto drain = [&] {
        void* p = nullptr;
        offile_off_t n = 0;
        os.flushBuffer(p, n);
        if (n > 0) out.insert(out.end(), static_cast<uint8_t*>(p), static_cast<uint8_t*>(p) + n);
    };
    ff.transferInit();
    do {
        c = ff.write(os, xfer, EET_ExplicitLength, nullptr);
        drain();
    } while (c == EC_StreamNotifyClient);
    ff.transferEnd();
    if (c.bad()) throw std::runtime_error(std::string("DICOM: encoding: ") + c.text());
    os.flush();
    drain();
    return out;
}

}  // namespace

std::vector<DicomFile> dicom_files(const wire::Image& im, const ISMRMRD::IsmrmrdHeader& h, const SeriesIdentity& series,
                                   long first_instance, const std::string& uid_root) {
    const auto& hd = im.head;
    const size_t nx = hd.matrix_size[0], ny = hd.matrix_size[1], nz = std::max<uint16_t>(hd.matrix_size[2], 1),
                 nc = std::max<uint16_t>(hd.channels, 1);
    const size_t bytes = bytes_of(hd.data_type);
    if (bytes == 0) throw std::invalid_argument("DICOM: image data_type " + std::to_string(hd.data_type) + " is unknown");
    if (nx == 0 || ny == 0 || nx > 65535 || ny > 65535)
        throw std::invalid_argument("DICOM: image matrix " + std::to_string(nx) + " x " + std::to_string(ny) +
                                    " cannot be a DICOM image");
    if (im.pixels.size() != nx * ny * nz * nc * bytes)
        throw std::invalid_argument("DICOM: image of " + std::to_string(im.pixels.size()) + " bytes for " +
                                    std::to_string(nx) + " x " + std::to_string(ny) + " x " + std::to_string(nz) +
                                    " x " + std::to_string(nc) + " pixels");
    if (!(hd.field_of_view[0] > 0 && hd.field_of_view[1] > 0))
        throw std::invalid_argument("DICOM: image field of view " + std::to_string(hd.field_of_view[0]) + " x " +
                                    std::to_string(hd.field_of_view[1]) + " mm has no pixel spacing");
    const bool as_is = hd.data_type == ISMRMRD::ISMRMRD_USHORT || hd.data_type == ISMRMRD::ISMRMRD_SHORT;
    const bool is_signed = hd.data_type == ISMRMRD::ISMRMRD_SHORT;
    double scale = 1.0;
    if (!as_is) {
        double peak = 0;
        for (size_t i = 0; i < nx * ny * nz * nc; ++i) peak = std::max(peak, std::abs(value_at(im, i)));
        scale = peak > 0 ? kAutoScalePeak / peak : 1.0;
    }

    const auto& subject = h.subjectInformation;
    const auto& study = h.studyInformation;
    const auto& meas = h.measurementInformation;
    const auto& system = h.acquisitionSystemInformation;
    const auto& seq = h.sequenceParameters;
    std::string date = meas && meas->seriesDate ? dicom_date(*meas->seriesDate) : std::string();
    std::string time = meas && meas->seriesTime ? dicom_time(*meas->seriesTime) : std::string();
    // A header without dates (phantoms, anonymised raw data) gets the time of reconstruction: PACS
    // sort and index studies by these.
    if (date.empty() || time.empty()) {
        const std::time_t now = std::time(nullptr);
        std::tm local{};
        localtime_r(&now, &local);
        char buf[16];
        if (date.empty() && std::strftime(buf, sizeof buf, "%Y%m%d", &local)) date = buf;
        if (time.empty() && std::strftime(buf, sizeof buf, "%H%M%S", &local)) time = buf;
    }

    std::vector<DicomFile> files;
    for (size_t c = 0; c < nc; ++c)
        for (size_t z = 0; z < nz; ++z) {
            const long instance = first_instance + long(files.size());
            DcmFileFormat ff;
            Writer w(ff.getDataset());
            // SOP Common
            w.str(DCM_SpecificCharacterSet, "ISO_IR 192");
            w.str(DCM_SOPClassUID, UID_MRImageStorage);
            w.str(DCM_SOPInstanceUID, new_uid(uid_root));
            // Patient
            w.str(DCM_PatientName, subject ? opt(subject->patientName) : "");
            w.str(DCM_PatientID, subject ? opt(subject->patientID) : "");
            w.str(DCM_PatientBirthDate, subject && subject->patientBirthdate ? dicom_date(*subject->patientBirthdate) : "");
            std::string sex = subject ? opt(subject->patientGender) : "";
            w.str(DCM_PatientSex, sex == "M" || sex == "F" || sex == "O" ? sex : "");
            if (subject && subject->patientWeight_kg) {
                const double kg = *subject->patientWeight_kg;
                w.decimals(DCM_PatientWeight, &kg, 1);
            }
            // General Study
            w.str(DCM_StudyInstanceUID, series.study_uid);
            const std::string study_date = study && study->studyDate ? dicom_date(*study->studyDate) : "";
            const std::string study_time = study && study->studyTime ? dicom_time(*study->studyTime) : "";
            w.str(DCM_StudyDate, study_date.empty() ? date : study_date);
            w.str(DCM_StudyTime, study_time.empty() ? time : study_time);
            w.str(DCM_ReferringPhysicianName, study ? opt(study->referringPhysicianName) : "");
            w.str(DCM_StudyID, study ? opt(study->studyID).substr(0, 16) : "");
            w.str(DCM_AccessionNumber, study ? opt(study->accessionNumber).substr(0, 16) : "");
            if (study && study->studyDescription) w.str(DCM_StudyDescription, study->studyDescription->substr(0, 64));
            // General Series
            w.str(DCM_Modality, "MR");
            w.str(DCM_SeriesInstanceUID, series.series_uid);
            w.str(DCM_Laterality, "");  // Type 2C: not known from the raw data
            w.str(DCM_SeriesNumber, std::to_string(series.series_number));
            w.str(DCM_SeriesDate, date);
            w.str(DCM_SeriesTime, time);
            if (!series.series_description.empty())
                w.str(DCM_SeriesDescription, series.series_description.substr(0, 64));
            if (meas && meas->protocolName) w.str(DCM_ProtocolName, meas->protocolName->substr(0, 64));
            const std::string position = meas ? meas->patientPosition : "";
            w.str(DCM_PatientPosition, position.size() <= 16 ? position : "");
            // Frame of Reference
            w.str(DCM_FrameOfReferenceUID, series.frame_of_reference_uid);
            w.str(DCM_PositionReferenceIndicator, "");
            // General Equipment
            w.str(DCM_Manufacturer, system ? opt(system->systemVendor).substr(0, 64) : "");
            if (system && system->systemModel) w.str(DCM_ManufacturerModelName, system->systemModel->substr(0, 64));
            if (system && system->institutionName) w.str(DCM_InstitutionName, system->institutionName->substr(0, 64));
            if (system && system->stationName) w.str(DCM_StationName, system->stationName->substr(0, 16));
            w.str(DCM_SoftwareVersions, "Larmor " LARMOR_VERSION);
            // General Image
            w.str(DCM_InstanceNumber, std::to_string(instance));
            w.str(DCM_ContentDate, date);
            w.str(DCM_ContentTime, time);
            w.str(DCM_ImageType, "DERIVED\\PRIMARY\\OTHER");
            // Image Plane
            const PlaneGeometry g = plane_geometry(hd, uint32_t(z));
            w.decimals(DCM_PixelSpacing, g.spacing, 2);
            w.decimals(DCM_ImageOrientationPatient, g.orientation, 6);
            w.decimals(DCM_ImagePositionPatient, g.position, 3);
            if (g.thickness > 0) w.decimals(DCM_SliceThickness, &g.thickness, 1);
            else w.str(DCM_SliceThickness, "");
            // MR Image
            w.str(DCM_ScanningSequence, "RM");  // research mode: reconstructed outside the scanner
            w.str(DCM_SequenceVariant, "NONE");
            w.str(DCM_ScanOptions, "");
            w.str(DCM_MRAcquisitionType, nz > 1 ? "3D" : "2D");
            auto first = [](const ISMRMRD::Optional<std::vector<float>>& v, const DcmTagKey& tag, Writer& wr) {
                if (v && !v->empty()) {
                    const double x = v->front();
                    wr.decimals(tag, &x, 1);
                } else {
                    wr.str(tag, "");
                }
            };
            first(seq ? seq->TR : ISMRMRD::Optional<std::vector<float>>(), DCM_RepetitionTime, w);
            first(seq ? seq->TE : ISMRMRD::Optional<std::vector<float>>(), DCM_EchoTime, w);
            w.str(DCM_EchoTrainLength, "");
            if (seq && seq->flipAngle_deg && !seq->flipAngle_deg->empty()) {
                const double a = seq->flipAngle_deg->front();
                w.decimals(DCM_FlipAngle, &a, 1);
            }
            if (system && system->systemFieldStrength_T) {
                const double t = *system->systemFieldStrength_T;
                w.decimals(DCM_MagneticFieldStrength, &t, 1);
            }
            w.str(DCM_ImagedNucleus, "1H");
            // Image Pixel
            w.u16(DCM_SamplesPerPixel, 1);
            w.str(DCM_PhotometricInterpretation, "MONOCHROME2");
            w.u16(DCM_Rows, uint16_t(ny));
            w.u16(DCM_Columns, uint16_t(nx));
            w.u16(DCM_BitsAllocated, 16);
            w.u16(DCM_BitsStored, 16);
            w.u16(DCM_HighBit, 15);
            w.u16(DCM_PixelRepresentation, is_signed ? 1 : 0);
            std::vector<uint16_t> px(nx * ny);
            const size_t offset = (c * nz + z) * nx * ny;
            double lo = 1e300, hi = -1e300;
            for (size_t i = 0; i < nx * ny; ++i) {
                if (as_is) {
                    std::memcpy(&px[i], im.pixels.data() + 2 * (offset + i), 2);
                    const double v = is_signed ? double(int16_t(px[i])) : double(px[i]);
                    lo = std::min(lo, v), hi = std::max(hi, v);
                } else {
                    const double v = std::min(65535.0, std::round(std::abs(value_at(im, offset + i)) * scale));
                    px[i] = uint16_t(v);
                    lo = std::min(lo, v), hi = std::max(hi, v);
                }
            }
            // VOI LUT: the slice's range, so a viewer opens it visible.
            const double centre = 0.5 * (lo + hi), width = std::max(1.0, hi - lo);
            w.decimals(DCM_WindowCenter, &centre, 1);
            w.decimals(DCM_WindowWidth, &width, 1);
            const OFCondition pc =
                ff.getDataset()->putAndInsertUint16Array(DCM_PixelData, px.data(), static_cast<unsigned long>(px.size()));
            if (pc.bad()) throw std::runtime_error(std::string("DICOM: pixel data: ") + pc.text());

            DicomFile f;
            f.bytes = encode(ff);
            char name[64];
            std::snprintf(name, sizeof name, "larmor_s%ld_i%05ld.dcm", series.series_number, instance);
            f.filename = name;
            files.push_back(std::move(f));
        }
    return files;
}

#else  // no DCMTK: a build that cannot write DICOM says so wherever it would

bool dicom_available() { return false; }

std::string dicom_unavailable_reason() {
    return "this Larmor was built without DCMTK (Debian: libdcmtk-dev), so it cannot write DICOM";
}

namespace {
[[noreturn]] void no_dcmtk() {
    throw std::runtime_error("DICOM: this Larmor was built without DCMTK (Debian: libdcmtk-dev), so it cannot write DICOM");
}
}  // namespace

std::string new_uid(const std::string&) { no_dcmtk(); }
SeriesIdentity series_identity(const ISMRMRD::IsmrmrdHeader&, uint16_t, const std::string&, const std::string&) {
    no_dcmtk();
}
std::vector<DicomFile> dicom_files(const wire::Image&, const ISMRMRD::IsmrmrdHeader&, const SeriesIdentity&, long,
                                   const std::string&) {
    no_dcmtk();
}

#endif

}  // namespace larmor::dicom
