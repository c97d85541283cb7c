#include "gadgets/image_header.h"

#include <cstring>
#include <sstream>

#include <ismrmrd/version.h>

namespace larmor {

ISMRMRD::ISMRMRD_ImageHeader image_header_from(const ISMRMRD::ISMRMRD_AcquisitionHeader& ref,
                                               const EncodingGeometry& geometry, const Shape& shape,
                                               uint16_t image_index) {
    ISMRMRD::ISMRMRD_ImageHeader h{};
    h.version = ISMRMRD_VERSION_MAJOR;
    h.data_type = ISMRMRD::ISMRMRD_CXFLOAT;
    h.image_type = ISMRMRD::ISMRMRD_IMTYPE_COMPLEX;
    h.flags = 0;
    h.measurement_uid = ref.measurement_uid;
    for (int i = 0; i < 3; ++i) {
        h.matrix_size[i] = uint16_t(i < shape.rank() ? shape[i] : 1);
        h.field_of_view[i] = geometry.recon_fov[i];
    }
    h.channels = uint16_t(shape.rank() > 3 ? shape[3] : 1);
    // ISMRMRD packs both headers to 2 bytes, so their float and int arrays can sit at misaligned addresses:
    // they are copied as bytes, never through float* / int32_t* (std::copy) or references to them.
    static_assert(sizeof h.position == sizeof ref.position && sizeof h.read_dir == sizeof ref.read_dir &&
                  sizeof h.phase_dir == sizeof ref.phase_dir && sizeof h.slice_dir == sizeof ref.slice_dir &&
                  sizeof h.patient_table_position == sizeof ref.patient_table_position &&
                  sizeof h.physiology_time_stamp == sizeof ref.physiology_time_stamp &&
                  sizeof h.user_int == sizeof ref.user_int && sizeof h.user_float == sizeof ref.user_float);
    std::memcpy(h.position, ref.position, sizeof h.position);
    std::memcpy(h.read_dir, ref.read_dir, sizeof h.read_dir);
    std::memcpy(h.phase_dir, ref.phase_dir, sizeof h.phase_dir);
    std::memcpy(h.slice_dir, ref.slice_dir, sizeof h.slice_dir);
    std::memcpy(h.patient_table_position, ref.patient_table_position, sizeof h.patient_table_position);
    h.average = ref.idx.average;
    h.slice = ref.idx.slice;
    h.contrast = ref.idx.contrast;
    h.phase = ref.idx.phase;
    h.repetition = ref.idx.repetition;
    h.set = ref.idx.set;
    h.acquisition_time_stamp = ref.acquisition_time_stamp;
    std::memcpy(h.physiology_time_stamp, ref.physiology_time_stamp, sizeof h.physiology_time_stamp);
    std::memcpy(h.user_int, ref.user_int, sizeof h.user_int);
    std::memcpy(h.user_float, ref.user_float, sizeof h.user_float);
    h.image_index = image_index;
    h.image_series_index = 0;  // set by ImageFinish
    h.attribute_string_len = 0;
    return h;
}

ISMRMRD::MetaContainer parse_meta(const std::string& xml) {
    ISMRMRD::MetaContainer meta;
    if (!xml.empty()) ISMRMRD::deserialize(xml.c_str(), meta);
    return meta;
}

std::string write_meta(const ISMRMRD::MetaContainer& meta) {
    std::ostringstream out;
    ISMRMRD::serialize(meta, out);
    return out.str();
}

void append_processing_history(ISMRMRD::MetaContainer& meta, const char* step) {
    meta.append(kMetaHistory, step);
    meta.append(kMetaGadgetronHistory, step);
}

void set_provenance(ISMRMRD::MetaContainer& meta, const std::string& chain, const std::string& backend,
                    const std::string& device) {
    meta.set("LarmorChain", chain.c_str());
    meta.set("LarmorVersion", LARMOR_VERSION);
    meta.set("LarmorBackend", backend.c_str());
    meta.set("LarmorDevice", device.c_str());
    if (!is_marked_failed(meta)) meta.set(kMetaStatus, "ok");
}

void mark_failed(ISMRMRD::MetaContainer& meta, const std::string& why) {
    meta.set(kMetaStatus, "failed");
    meta.append(kMetaFailure, why.c_str());
}

bool is_marked_failed(const ISMRMRD::MetaContainer& meta) {
    return meta.length(kMetaStatus) > 0 && std::string(meta.as_str(kMetaStatus)) == "failed";
}

}  // namespace larmor
