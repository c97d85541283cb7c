// UltrasoundPlaneWave: plane-wave ultrasound imaging by Stolt's f-k migration (core/recon/
// stolt_migration.h). The stream carries one shot as one acquisition per element (the mapping of
// tools/phantom/ultrasound.h: acquisition idx.kspace_encode_step_1 = element, samples = time samples
// at 1 / fs, one channel); the gadget collects them in an [Nt, Nx] array, migrates it on the session's
// backend and emits the analytic image [Nz = Nt, Nx] (depth along the first axis: read_dir = +z),
// whose modulus ImageFinish turns into the envelope image.
#include <chrono>
#include <memory>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <ismrmrd/version.h>
#include <spdlog/spdlog.h>

#include "core/recon/stolt_migration.h"
#include "core/constants.h"
#include "gadgets/chain_config.h"
#include "gadgets/factories.h"
#include "gadgets/image_header.h"
#include "gadgets/typed_gadget.h"

#ifndef LARMOR_VERSION
#define LARMOR_VERSION "unknown"
#endif

namespace larmor {
namespace {

constexpr float kDefaultTolerance = 1e-4f;

double user_double(const ISMRMRD::IsmrmrdHeader& h, const std::string& name) {
    if (h.userParameters)
        for (const auto& p : h.userParameters->userParameterDouble)
            if (p.name == name) return p.value;
    throw std::runtime_error("UltrasoundPlaneWave: the header has no userParameterDouble '" + name +
                             "' (one plane-wave shot needs larmor.us.pitch_mm, larmor.us.sampling_hz, "
                             "larmor.us.sound_speed_m_s and larmor.us.angle_deg)");
}

class UltrasoundPlaneWaveGadget final : public TypedGadget<Acquisition> {
public:
    explicit UltrasoundPlaneWaveGadget(const config::UltrasoundPlaneWave& cfg) : cfg_(cfg) {
        if (!(cfg.sound_speed_m_s() >= 0.f) || !std::isfinite(cfg.sound_speed_m_s()))
            throw ConfigError("UltrasoundPlaneWave: sound_speed_m_s " + std::to_string(cfg.sound_speed_m_s()) +
                              " must be finite and >= 0");
        tolerance_ = cfg.tolerance() == 0.f ? kDefaultTolerance : cfg.tolerance();
        if (!(tolerance_ >= 1e-6f && tolerance_ <= 1e-1f))
            throw ConfigError("UltrasoundPlaneWave: tolerance " + std::to_string(cfg.tolerance()) +
                              " is outside 1e-6 .. 1e-1");
    }

    // The RF array, its padded copy and the NUFFT's oversampled grid (4x the padded array), the
    // spectrum (1.5x) and the image: about 16 copies of the [samples, elements] data.
    uint64_t working_set(const ISMRMRD::IsmrmrdHeader& h) const override {
        if (h.encoding.empty()) return 0;
        const auto& m = h.encoding[0].encodedSpace.matrixSize;
        return uint64_t(m.x) * m.y * sizeof(cfloat) * 16;
    }

    void start(const SessionContext& ctx) override {
        backend_ = ctx.backend;
        session_ = ctx.session_id;
        chain_ = ctx.chain_name;
        ledger_ = ctx.ledger;
        if (!backend_) throw std::runtime_error("UltrasoundPlaneWave: the session has no backend");
        const ISMRMRD::IsmrmrdHeader& h = ctx.header;
        if (h.encoding.empty()) throw std::runtime_error("UltrasoundPlaneWave: the header has no encoding");
        samples_ = h.encoding[0].encodedSpace.matrixSize.x;
        elements_ = h.encoding[0].encodedSpace.matrixSize.y;
        if (samples_ < 2 || elements_ < 2)
            throw std::runtime_error("UltrasoundPlaneWave: encoded matrix " + std::to_string(samples_) + " x " +
                                     std::to_string(elements_) + "; expected samples >= 2 x elements >= 2");
        geometry_.pitch_m = user_double(h, "larmor.us.pitch_mm") * 1e-3;
        geometry_.sampling_hz = user_double(h, "larmor.us.sampling_hz");
        geometry_.sound_speed_m_s =
            cfg_.sound_speed_m_s() > 0.f ? cfg_.sound_speed_m_s() : user_double(h, "larmor.us.sound_speed_m_s");
        geometry_.angle_rad = user_double(h, "larmor.us.angle_deg") * kPi / 180.0;
        reset();
    }

    void process(Acquisition& acq, Emitter& out) override {
        if (acq.flag(ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT)) {
            ledger_->discarded("noise scans (the ultrasound chain does not use them)", acq);
            return;
        }
        const auto& head = acq.head;
        const size_t e = head.idx.kspace_encode_step_1;
        if (head.active_channels != 1)
            throw std::runtime_error("UltrasoundPlaneWave: element acquisition with " +
                                     std::to_string(head.active_channels) + " channels; expected 1 (one per element)");
        if (head.number_of_samples != samples_ || acq.data.size() != samples_)
            throw std::runtime_error("UltrasoundPlaneWave: element " + std::to_string(e) + " has " +
                                     std::to_string(head.number_of_samples) + " samples; the header declares " +
                                     std::to_string(samples_));
        if (e >= elements_)
            throw std::runtime_error("UltrasoundPlaneWave: element index " + std::to_string(e) +
                                     " (kspace_encode_step_1) is outside 0.." + std::to_string(elements_ - 1));
        if (received_.empty()) reset();
        if (!received_[e]) ++count_;
        received_[e] = 1;
        if (count_ == 1) reference_ = head;
        std::copy(acq.data.begin(), acq.data.end(), rf_.data() + e * samples_);
        ledger_->used("ultrasound element signals");
        ++shot_acquisitions_;
        if (acq.flag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_SLICE) || count_ == elements_) reconstruct(out);
    }

    void finish(Emitter&) override {
        if (count_ > 0)
            spdlog::warn("[{}] UltrasoundPlaneWave: stream ended with {} of {} elements of a shot; not reconstructed",
                         session_, count_, elements_);
    }

private:
    void reset() {
        // Every element of a shot overwrites its column (a shot is only migrated complete), so the
        // buffer is reused from shot to shot.
        if (rf_.empty()) rf_ = backend_->host_complex({samples_, elements_});
        received_.assign(elements_, 0);
        count_ = 0;
    }

    void reconstruct(Emitter& out) {
        if (count_ != elements_) {
            size_t missing = 0;
            while (received_[missing]) ++missing;
            throw std::runtime_error("UltrasoundPlaneWave: shot ended with " + std::to_string(count_) + " of " +
                                     std::to_string(elements_) + " elements (element " + std::to_string(missing) +
                                     " missing)");
        }
        const auto t0 = std::chrono::steady_clock::now();
        if (!migration_) {
            // Built on the first shot, reused by every later one (same header, same geometry).
            StoltOptions opts;
            opts.tolerance = tolerance_;
            opts.mapping =
                cfg_.mapping() == config::STOLT_EXACT ? StoltMapping::Exact : StoltMapping::ExplodingReflector;
            migration_ = std::make_unique<StoltMigration>(backend_, samples_, elements_, geometry_, opts);
        }
        StoltImage img;
        img.analytic = backend_->empty({samples_, elements_});  // handed downstream: one per shot
        migration_->migrate(rf_, img.analytic);
        img.dz_m = migration_->dz_m();
        img.dx_m = migration_->dx_m();
        emit(img, out);
        shot_acquisitions_ = 0;
        spdlog::info("[{}] UltrasoundPlaneWave: {} samples x {} elements migrated in {:.1f} ms", session_, samples_,
                     elements_, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        received_.clear();
        count_ = 0;
    }

    void emit(const StoltImage& img, Emitter& out) {
        ImageArray arr;
        arr.acquisitions = shot_acquisitions_;
        arr.data = img.analytic.reshaped({samples_, elements_, 1, 1});
        ISMRMRD::ISMRMRD_ImageHeader& h = arr.head;
        h.version = ISMRMRD_VERSION_MAJOR;
        h.data_type = ISMRMRD::ISMRMRD_CXFLOAT;
        h.image_type = ISMRMRD::ISMRMRD_IMTYPE_COMPLEX;  // ImageFinish sets what it outputs
        h.measurement_uid = reference_.measurement_uid;
        h.matrix_size[0] = uint16_t(samples_);
        h.matrix_size[1] = uint16_t(elements_);
        h.matrix_size[2] = 1;
        const double depth_mm = img.dz_m * 1e3 * double(samples_), aperture_mm = img.dx_m * 1e3 * double(elements_);
        h.field_of_view[0] = float(depth_mm);
        h.field_of_view[1] = float(aperture_mm);
        h.field_of_view[2] = float(img.dx_m * 1e3);
        h.channels = 1;
        // Axis 0 runs in depth (+z), axis 1 along the array (+x); the image centre in the array's frame
        // (x = 0 at the array's centre, z = 0 at its face), in mm.
        h.read_dir[2] = 1.f;
        h.phase_dir[0] = 1.f;
        h.slice_dir[1] = 1.f;
        h.position[2] = float(img.dz_m * 1e3 * double(samples_ / 2));
        h.acquisition_time_stamp = reference_.acquisition_time_stamp;
        h.repetition = reference_.idx.repetition;
        h.image_index = ++image_index_;
        h.attribute_string_len = 0;
        arr.meta.set(kMetaDataRole, "Image");
        arr.meta.set(kMetaGadgetronDataRole, "Image");
        append_processing_history(arr.meta, "ULTRASOUND_STOLT");
        arr.meta.set("LarmorChain", chain_.c_str());
        arr.meta.set("LarmorVersion", LARMOR_VERSION);
        arr.meta.set("UltrasoundDepthSpacing_mm", img.dz_m * 1e3);
        arr.meta.set("UltrasoundLateralSpacing_mm", img.dx_m * 1e3);
        arr.meta.set("UltrasoundSoundSpeed_m_s", geometry_.sound_speed_m_s);
        arr.meta.set("UltrasoundStoltMapping", cfg_.mapping() == config::STOLT_EXACT ? "exact" : "exploding reflector");
        arr.meta.set("ImageComment", "Plane-wave Stolt f-k migration, analytic image (envelope = magnitude)");
        out.emit(std::move(arr));
    }

    config::UltrasoundPlaneWave cfg_;
    float tolerance_ = kDefaultTolerance;
    std::shared_ptr<Backend> backend_;
    std::shared_ptr<AcquisitionLedger> ledger_ = std::make_shared<AcquisitionLedger>();
    std::string session_, chain_;
    PlaneWaveGeometry geometry_;
    std::unique_ptr<StoltMigration> migration_;
    size_t samples_ = 0, elements_ = 0, count_ = 0;
    uint64_t shot_acquisitions_ = 0;  // used into the current shot (ImageArray::acquisitions)
    CArray rf_;                      // host [samples, elements]
    std::vector<uint8_t> received_;  // per element
    ISMRMRD::ISMRMRD_AcquisitionHeader reference_{};
    uint16_t image_index_ = 0;
};

}  // namespace

std::unique_ptr<Gadget> make_ultrasound_planewave(const config::UltrasoundPlaneWave& cfg) {
    return std::make_unique<UltrasoundPlaneWaveGadget>(cfg);
}

}  // namespace larmor
