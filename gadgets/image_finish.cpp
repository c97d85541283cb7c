// ImageFinish (Gadgetron's ExtractGadget + ImageFinishGadget): brings an image array back to the host,
// converts it to the pixel type the chain asks for (magnitude / real / imaginary / phase as float,
// complex float, or magnitude scaled to unsigned short) and emits it as an ISMRMRD wire image with its
// meta attributes as XML.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "gadgets/chain_config.h"
#include "gadgets/factories.h"
#include "gadgets/typed_gadget.h"
#include "gadgets/image_header.h"
#include "wire/float_checks.h"

namespace larmor {
namespace {

constexpr float kAutoScalePeak = 4095.0f;  // 12-bit display range, as Gadgetron's scaling gadgets

uint16_t image_type(config::ImageOutput o) {
    switch (o) {
        case config::OUTPUT_REAL: return ISMRMRD::ISMRMRD_IMTYPE_REAL;
        case config::OUTPUT_IMAG: return ISMRMRD::ISMRMRD_IMTYPE_IMAG;
        case config::OUTPUT_PHASE: return ISMRMRD::ISMRMRD_IMTYPE_PHASE;
        case config::OUTPUT_COMPLEX: return ISMRMRD::ISMRMRD_IMTYPE_COMPLEX;
        default: return ISMRMRD::ISMRMRD_IMTYPE_MAGNITUDE;
    }
}

const char* history_step(config::ImageOutput o) {
    switch (o) {
        case config::OUTPUT_REAL: return "EXTRACT_REAL";
        case config::OUTPUT_IMAG: return "EXTRACT_IMAG";
        case config::OUTPUT_PHASE: return "EXTRACT_PHASE";
        case config::OUTPUT_COMPLEX: return "EXTRACT_COMPLEX";
        default: return "EXTRACT_MAGNITUDE";
    }
}

ComplexPart part_of(config::ImageOutput o) {
    switch (o) {
        case config::OUTPUT_REAL: return ComplexPart::Real;
        case config::OUTPUT_IMAG: return ComplexPart::Imag;
        case config::OUTPUT_PHASE: return ComplexPart::Phase;
        default: return ComplexPart::Magnitude;
    }
}

template <class T>
void put(std::vector<uint8_t>& bytes, const std::vector<T>& values) {
    bytes.resize(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
}

class ImageFinishGadget final : public TypedGadget<ImageArray> {
public:
    explicit ImageFinishGadget(const config::ImageFinish& cfg) : cfg_(cfg) {
        if (cfg.pixel_type() == config::PIXEL_USHORT && cfg.output() == config::OUTPUT_COMPLEX)
            throw ConfigError("ImageFinish: pixel_type PIXEL_USHORT cannot hold output OUTPUT_COMPLEX");
        if (cfg.scale() < 0 || !std::isfinite(cfg.scale()))
            throw ConfigError("ImageFinish: scale " + std::to_string(cfg.scale()) + " must be finite and >= 0");
        if (cfg.series_index() < 0 || cfg.series_index() > 65534)
            throw ConfigError("ImageFinish: series_index " + std::to_string(cfg.series_index()) +
                              " is outside 0..65534");
        series_ = cfg.series_index() == 0 ? 1 : uint16_t(cfg.series_index());
    }

    void start(const SessionContext& ctx) override {
        backend_ = ctx.backend;
        if (!backend_) throw std::runtime_error("ImageFinish: the session has no backend");
        chain_ = ctx.chain_name;
        ledger_ = ctx.ledger;
        backend_name_ = backend_->device() == Device::Cuda ? "cuda" : "cpu";
        device_ = backend_->describe();
    }

    void process(ImageArray& arr, Emitter& out) override {
        const size_t n = arr.data.size();
        const auto output = cfg_.output();

        Image img;
        img.head = arr.head;
        ISMRMRD::MetaContainer& meta = arr.meta;
        const bool calibration = meta.length(kMetaCalibration) > 0 && meta.as_long(kMetaCalibration) != 0;
        img.head.image_type = image_type(output);
        // Calibration-only (ACS) images go to the next series, so clients keep them apart.
        img.head.image_series_index = uint16_t(series_ + (calibration ? 1 : 0));
        append_processing_history(meta, history_step(output));
        set_provenance(meta, chain_, backend_name_, device_);
        // Work that needs no pixels comes before the download: on a GPU the reconstruction is still
        // running when this gadget starts, and the download waits for it. Only the scale of ushort
        // images depends on the pixels.
        const bool scaled = output != config::OUTPUT_COMPLEX && cfg_.pixel_type() == config::PIXEL_USHORT;
        if (!scaled) img.meta = write_meta(meta);
        if (output == config::OUTPUT_COMPLEX) {
            const CArray host = backend_->to_host(arr.data);
            check(reinterpret_cast<const float*>(host.data()), 2 * n, arr, img);
            img.head.data_type = ISMRMRD::ISMRMRD_CXFLOAT;
            put(img.pixels, std::vector<cfloat>(host.data(), host.data() + n));
        } else if (scaled) {
            // The part is taken on the session backend (on a GPU only the floats come back).
            std::vector<float> values(n);
            backend_->download_part(arr.data, part_of(output), values.data());
            check(values.data(), n, arr, img);
            img.head.data_type = ISMRMRD::ISMRMRD_USHORT;
            const float scale = cfg_.scale() > 0 ? cfg_.scale() : auto_scale(values);
            std::vector<uint16_t> shorts(n);
            for (size_t i = 0; i < n; ++i) {
                const float v = std::round(values[i] * scale);
                shorts[i] = uint16_t(std::clamp(std::isfinite(v) ? v : 0.0f, 0.0f, 65535.0f));
            }
            put(img.pixels, shorts);
            meta.set("GADGETRON_ImageScaleRatio", double(scale));
            img.meta = write_meta(meta);
        } else {
            // Straight into the wire image's pixel bytes (operator new storage: aligned for float).
            img.head.data_type = ISMRMRD::ISMRMRD_FLOAT;
            img.pixels.resize(n * sizeof(float));
            backend_->download_part(arr.data, part_of(output), reinterpret_cast<float*>(img.pixels.data()));
            check(reinterpret_cast<const float*>(img.pixels.data()), n, arr, img);
        }
        img.head.attribute_string_len = uint32_t(img.meta.size());
        out.emit(std::move(img));
        // A failed reconstruction's image (marked) is no image of its acquisitions: the gadget that
        // marked it failed, and the chain counts them as failed.
        if (ledger_ && !is_marked_failed(arr.meta)) ledger_->imaged(arr.acquisitions);
    }

private:
    // A reconstruction that overflowed float, or produced nothing, must not reach the client looking
    // like an image (issue 18: k-space at 1e12 gave all-zero images with no word). Images a gadget
    // already marked as failed (it reported the error) go out as they are, marked. Phase images are
    // zero where the image is real and positive, so only their finiteness is checked.
    void check(const float* v, size_t count, const ImageArray& arr, const Image& img) const {
        if (is_marked_failed(arr.meta)) return;
        const bool phase = cfg_.output() == config::OUTPUT_PHASE;
        // The common case in one vectorised pass; the counting below only words the refusal.
        const wire::FloatSummary summary = wire::summarize_floats(v, count);
        if (summary.all_finite && (summary.any_nonzero || phase || count == 0)) return;
        size_t non_finite = 0, nonzero = 0;
        float largest = 0.f;
        for (size_t i = 0; i < count; ++i) {
            const float x = v[i];
            if (!std::isfinite(x)) {
                ++non_finite;
            } else if (x != 0.f) {
                ++nonzero;
                largest = std::max(largest, std::abs(x));
            }
        }
        if (non_finite == 0 && (nonzero > 0 || phase || count == 0)) return;
        std::string what = "image " + std::to_string(img.head.image_index) + " (slice " +
                           std::to_string(img.head.slice) + ", repetition " + std::to_string(img.head.repetition) +
                           ") of chain '" + chain_ + "' on " + backend_name_ + " after " + history(arr.meta) + ": ";
        if (non_finite > 0)
            what += std::to_string(non_finite) + " of " + std::to_string(count) +
                    " values are non-finite (largest finite magnitude " + std::to_string(largest) +
                    "): a value overflowed float or became NaN; if the k-space is very large (its magnitude squared "
                    "summed over an image must stay below 3e38), scale the data down before sending it";
        else
            what += "all " + std::to_string(count) +
                    " values are zero: the reconstruction produced nothing (the input is all zero, or a step "
                    "overflowed float or collapsed: k-space far beyond float's range must be scaled down); no "
                    "image is sent";
        throw std::runtime_error(what);
    }

    static std::string history(const ISMRMRD::MetaContainer& meta) {
        std::string h;
        for (size_t i = 0; i < meta.length(kMetaHistory); ++i) h += (i ? " > " : "") + std::string(meta.as_str(kMetaHistory, i));
        return h.empty() ? "its reconstruction" : h;
    }

    // Peak to 4095; an all-zero image keeps scale 1.
    static float auto_scale(const std::vector<float>& v) {
        float peak = 0;
        for (float x : v)
            if (std::isfinite(x)) peak = std::max(peak, x);
        return peak > 0 ? kAutoScalePeak / peak : 1.0f;
    }

    config::ImageFinish cfg_;
    std::string chain_, backend_name_, device_;
    uint16_t series_ = 1;
    std::shared_ptr<Backend> backend_;
    std::shared_ptr<AcquisitionLedger> ledger_;
};

}  // namespace

std::unique_ptr<Gadget> make_image_finish(const config::ImageFinish& cfg) {
    return std::make_unique<ImageFinishGadget>(cfg);
}

}  // namespace larmor
