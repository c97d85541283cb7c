// NoiseAdjust (Gadgetron's NoiseAdjustGadget): noise covariance from the noise scans, prewhitening
// matrix for all later data.
//
// The prewhitener W = s * L^-1, L the lower Cholesky factor of the noise covariance Sigma
// (Sigma = L L^H, so W Sigma W^H = s^2 I): data mixed with W have uncorrelated channels of equal
// noise, the "SNR units" of Kellman & McVeigh, MRM 54:1439 (2005) and Hansen & Kellman, JMRI 41:573
// (2015). s = sqrt(2 * acquisition dwell / noise dwell * relative receiver noise bandwidth) corrects
// for a noise scan sampled at another bandwidth and for the receiver filter's roll-off, exactly as
// Gadgetron computes noise_bw_scale_factor. Covariances are accumulated in double precision.
//
// W is not applied here: every later acquisition goes on as a PendingAcquisition carrying it in
// ops.coil_mix, and the accumulator applies it to the whole k-space buffer (one GEMM on the session
// backend).
//
// Noise dependencies, as Gadgetron's NoiseAdjustGadget: a session that measured noise stores its
// covariance under its header's measurementID in the session's dependency store (at its first imaging
// readout, or at the end of a noise-only session). A session whose header names a Noise
// measurementDependency loads that covariance at start and prewhitens with it, ignoring noise scans of
// its own stream; when the store has none, the stream's noise scans are used, and with none of those
// either the images are not prewhitened and the client is warned. A stored covariance belongs to the
// scan that stored it (noise_dependency_store.h): when the store refuses this session's, the client is
// warned and the session goes on with its own noise.
//
// The covariances held here (the one accumulated and the one loaded: channels^2 complex doubles, 16
// MiB at 1024 channels) are charged to the session's host memory budget until the whitener is made
// from them.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <complex>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/backend.h"
#include "core/memory_budget.h"
#include "gadgets/factories.h"
#include "gadgets/line_ops.h"
#include "gadgets/noise_covariance.h"
#include "gadgets/noise_dependency_store.h"
#include "gadgets/typed_gadget.h"

namespace larmor {
namespace {

using cdouble = std::complex<double>;

constexpr size_t kMaxChannels = 1024;  // ISMRMRD channel masks
constexpr double kDefaultReceiverNoiseBandwidth = 0.793;

// The measurementID of the header's first Noise measurementDependency (type compared without case,
// as Gadgetron), empty when there is none.
std::string noise_dependency_of(const ISMRMRD::IsmrmrdHeader& h) {
    if (!h.measurementInformation) return {};
    for (const auto& d : h.measurementInformation->measurementDependency) {
        std::string type = d.dependencyType;
        std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::tolower(c); });
        if (type == "noise") return d.measurementID;
    }
    return {};
}

class NoiseAdjustGadget final : public TypedGadget<Acquisition, PendingAcquisition> {
public:
    explicit NoiseAdjustGadget(const config::NoiseAdjust& cfg) : cfg_(cfg) {}

    void start(const SessionContext& ctx) override {
        session_ = ctx.session_id;
        ledger_ = ctx.ledger;
        store_ = ctx.dependencies;
        if (ctx.backend) host_budget_ = ctx.backend->budgets().host;
        identity_ = scan_identity(ctx.header);
        receiver_bw_ = kDefaultReceiverNoiseBandwidth;
        const auto& sys = ctx.header.acquisitionSystemInformation;
        if (cfg_.receiver_noise_bandwidth() > 0)
            receiver_bw_ = cfg_.receiver_noise_bandwidth();
        else if (sys && sys->relativeReceiverNoiseBandwidth)
            receiver_bw_ = *sys->relativeReceiverNoiseBandwidth;
        if (sys)
            for (const auto& l : sys->coilLabel) coil_labels_.push_back(l.coilName);
        if (ctx.header.measurementInformation && ctx.header.measurementInformation->measurementID)
            measurement_id_ = *ctx.header.measurementInformation->measurementID;
        dependency_id_ = noise_dependency_of(ctx.header);
        if (!dependency_id_.empty()) load_dependency();
    }

    void finish(Emitter& out) override {
        // A noise-only session: what it measured is kept for the sessions that will name it.
        if (!whitener_ && !no_noise_ && !loaded_ && samples_ > 0) store_own(gathered(), out);
    }

    void process(Acquisition& acq, Emitter& out) override {
        if (acq.flag(ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT)) {
            const bool ignored = ignored_noise(acq);
            if (!ignored) accumulate(acq);
            if (cfg_.pass_noise_scans()) return out.emit(std::move(acq));
            account_noise(acq, ignored);
            return;
        }
        prepare_whitener(acq, out);
        if (!whitener_ || !conforms(acq, out)) return out.emit(std::move(acq));
        PendingAcquisition pending{std::move(acq), {}};
        attach(pending);
        out.emit(std::move(pending));
    }

    // Operations an earlier gadget requested: composed with the whitener on imaging data, applied
    // on the host to noise scans before they are measured.
    void process(PendingAcquisition& p, Emitter& out) override {
        if (p.acq.flag(ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT)) {
            if (ignored_noise(p.acq)) {
                if (cfg_.pass_noise_scans()) return out.emit(std::move(p));
                account_noise(p.acq, true);
                return;
            }
            Acquisition acq = materialize(std::move(p));
            accumulate(acq);
            if (cfg_.pass_noise_scans()) return out.emit(std::move(acq));
            account_noise(acq, false);
            return;
        }
        prepare_whitener(p.acq, out);
        if (whitener_ && conforms(p.acq, out)) attach(p);
        out.emit(std::move(p));
    }

private:
    void accumulate(const Acquisition& acq) {
        const size_t c = acq.head.active_channels;
        const size_t ns = acq.head.number_of_samples;
        if (c == 0 || c > kMaxChannels)
            throw std::runtime_error("NoiseAdjust: noise scan " + std::to_string(acq.head.scan_counter) + " has " +
                                     std::to_string(c) + " channels (1.." + std::to_string(kMaxChannels) +
                                     " supported)");
        if (acq.data.size() != c * ns)
            throw std::runtime_error("NoiseAdjust: noise scan " + std::to_string(acq.head.scan_counter) + " holds " +
                                     std::to_string(acq.data.size()) + " values for " + std::to_string(c) +
                                     " channels x " + std::to_string(ns) + " samples");
        if (channels_ == 0) {
            covariance_charge_ = charge_covariance(c, "accumulated from the stream's noise scans");
            channels_ = c;
            covariance_.assign(c * c, cdouble(0));
            noise_dwell_us_ = cfg_.noise_dwell_time_us() > 0 ? cfg_.noise_dwell_time_us() : acq.head.sample_time_us;
        } else if (c != channels_) {
            throw std::runtime_error("NoiseAdjust: noise scan " + std::to_string(acq.head.scan_counter) + " has " +
                                     std::to_string(c) + " channels, earlier noise scans " +
                                     std::to_string(channels_));
        }
        // Sigma_cd += x_c conj(x_d), lower triangle; one sample's channel vector at a time.
        std::vector<cdouble> v(c);
        for (size_t s = 0; s < ns; ++s) {
            for (size_t ch = 0; ch < c; ++ch) v[ch] = cdouble(acq.data[ch * ns + s]);
            for (size_t i = 0; i < c; ++i) {
                cdouble* row = &covariance_[i * c];
                const cdouble vi = v[i];
                for (size_t j = 0; j <= i; ++j) row[j] += vi * std::conj(v[j]);
            }
        }
        samples_ += ns;
    }

    // The (N - 1)-normalised covariance of the noise scans seen so far, full Hermitian matrix.
    NoiseCovariance gathered() const {
        NoiseCovariance cov;
        const size_t c = channels_;
        cov.channels = static_cast<uint32_t>(c);
        cov.samples = samples_;
        cov.noise_dwell_time_us = noise_dwell_us_;
        cov.receiver_noise_bandwidth = receiver_bw_;
        if (coil_labels_.size() == c) cov.coil_labels = coil_labels_;
        // Unbiased estimate (N - 1), as Gadgetron.
        const double norm = 1.0 / double(samples_ > 1 ? samples_ - 1 : 1);
        cov.matrix.assign(c * c, cdouble(0));
        for (size_t i = 0; i < c; ++i)
            for (size_t j = 0; j <= i; ++j) {
                cov.matrix[i * c + j] = covariance_[i * c + j] * norm;
                cov.matrix[j * c + i] = std::conj(cov.matrix[i * c + j]);
            }
        return cov;
    }

    void compute_whitener(float acquisition_dwell_us, Emitter& out) {
        std::string source;
        if (loaded_) {
            source = "noise dependency '" + dependency_id_ + "' from the dependency store";
            whiten_with(*loaded_, acquisition_dwell_us, source);
            release_covariances();
            return;
        }
        if (samples_ == 0) {
            no_noise_ = true;
            if (dependency_id_.empty()) {
                spdlog::info("[{}] NoiseAdjust: no noise scans before the imaging data; passing data unchanged",
                             session_);
                return;
            }
            // Gadgetron goes on unwhitened here too; the client is told why its images are.
            warn(out, "noise dependency '" + dependency_id_ + "' (the header's Noise measurementDependency) " +
                          missing_reason_ +
                          ", and the stream has no noise scans: the images are not prewhitened. Send the noise "
                          "measurement first, in a session of its own, or with the data");
            return;
        }
        const NoiseCovariance cov = gathered();
        if (!dependency_id_.empty())
            spdlog::info("[{}] NoiseAdjust: noise dependency '{}' {}; using the {} noise samples of this stream",
                         session_, dependency_id_, missing_reason_, samples_);
        store_own(cov, out);
        whiten_with(cov, acquisition_dwell_us, "this stream's noise scans");
        release_covariances();
    }

    // Later data need only the whitener: the covariances (16 MiB each at 1024 channels) and their
    // charges go. loaded_ stays, without its matrix, to say that the dependency is used.
    void release_covariances() {
        std::vector<cdouble>().swap(covariance_);
        if (loaded_) std::vector<cdouble>().swap(loaded_->matrix);
        covariance_charge_.reset();
        loaded_charge_.reset();
    }

    // Charges the budget for a covariance of c channels held by this session; over the budget, the
    // session fails with MemoryBudgetExceeded, which names the bytes and the budget.
    BudgetCharge charge_covariance(size_t c, const std::string& which) const {
        return BudgetCharge(host_budget_, saturating_mul(saturating_mul(c, c), sizeof(cdouble)),
                            "NoiseAdjust: the noise covariance of " + std::to_string(c) + " channels " + which);
    }

    void whiten_with(const NoiseCovariance& cov, float acquisition_dwell_us, const std::string& source) {
        const size_t c = cov.channels;
        channels_ = c;
        const std::vector<cdouble> inv = inverse_cholesky_factor(cov);

        const float noise_dwell_us = cfg_.noise_dwell_time_us() > 0 ? cfg_.noise_dwell_time_us() : cov.noise_dwell_time_us;
        double scale = 1.0;
        if (noise_dwell_us > 0 && acquisition_dwell_us > 0)
            scale = std::sqrt(2.0 * double(acquisition_dwell_us) / double(noise_dwell_us) * receiver_bw_);
        auto w = std::make_shared<std::vector<cfloat>>(c * c);
        for (size_t i = 0; i < c * c; ++i) (*w)[i] = cfloat(inv[i] * scale);
        whitener_ = std::move(w);
        spdlog::info("[{}] NoiseAdjust: {} channels, {} noise samples ({}), noise dwell {} us, acquisition dwell {} "
                     "us, receiver noise bandwidth {}, scale {}",
                     session_, c, cov.samples, source, noise_dwell_us, acquisition_dwell_us, receiver_bw_, scale);
    }

    // Reads the header's noise dependency from the store; a miss is remembered for the warning.
    void load_dependency() {
        std::optional<NoiseCovariance> cov = read_dependency();
        if (!cov) return;
        // Charged once read (only the file says how many channels it has). A session over its budget
        // fails: that is not a missing dependency to go on without.
        loaded_charge_ = charge_covariance(cov->channels, "of noise dependency '" + dependency_id_ + "'");
        std::string note;
        if (!match_coil_order(*cov, coil_labels_, note) || !note.empty())
            spdlog::info("[{}] NoiseAdjust: noise dependency '{}': {}", session_, dependency_id_,
                         note.empty() ? "coil labels match" : note);
        loaded_ = std::move(cov);
        spdlog::info("[{}] NoiseAdjust: loaded noise dependency '{}' ({} channels, {} samples) from {}", session_,
                     dependency_id_, loaded_->channels, loaded_->samples, store_->path_for(dependency_id_));
    }

    // The dependency's covariance; nullopt, with missing_reason_ saying why, when there is none.
    std::optional<NoiseCovariance> read_dependency() {
        if (!store_) {
            missing_reason_ = "cannot be looked up (this server keeps no dependency store)";
            return std::nullopt;
        }
        try {
            std::optional<NoiseCovariance> cov = store_->load(dependency_id_);
            if (!cov) missing_reason_ = "is not in the dependency store " + store_->directory();
            return cov;
        } catch (const std::exception& e) {
            missing_reason_ = std::string("could not be loaded (") + e.what() + ")";
            spdlog::warn("[{}] NoiseAdjust: noise dependency '{}' {}", session_, dependency_id_, missing_reason_);
            return std::nullopt;
        }
    }

    // Keeps this session's noise covariance under its measurement id for later sessions. A failure,
    // or the store's refusal (another scan's covariance under the id, too many channels), costs later
    // sessions their dependency, not this one its images: a warning, not an error.
    void store_own(const NoiseCovariance& cov, Emitter& out) {
        if (!store_) return;
        if (measurement_id_.empty()) {
            spdlog::info("[{}] NoiseAdjust: the header has no measurementID; the noise covariance is not stored",
                         session_);
            return;
        }
        try {
            const size_t removed = store_->save(measurement_id_, cov, identity_);
            spdlog::info("[{}] NoiseAdjust: stored the noise covariance of measurement '{}' ({} channels, {} samples) "
                         "in {}{}",
                         session_, measurement_id_, cov.channels, cov.samples, store_->path_for(measurement_id_),
                         removed ? "; removed the " + std::to_string(removed) +
                                       " oldest to stay within the store's limits"
                                 : std::string());
        } catch (const std::exception& e) {
            warn(out, "cannot store the noise covariance of measurement '" + measurement_id_ + "': " + e.what());
        }
    }

    // Logged, and sent to the client as TEXT (the chain passes text on to the session).
    void warn(Emitter& out, const std::string& what) {
        spdlog::warn("[{}] NoiseAdjust: {}", session_, what);
        out.emit(Text{"[NoiseAdjust] WARNING: " + what});
    }

    // A noise scan that is not measured: after the imaging data started (logged once), or while a
    // stored dependency is used (Gadgetron ignores the stream's noise then).
    // A noise scan that stops here (not passed on): measured, or ignored and why.
    void account_noise(const Acquisition& acq, bool ignored) {
        if (!ignored) return ledger_->used("noise (prewhitening)");
        ledger_->discarded(loaded_ ? "noise scans (the stored noise dependency is used instead)"
                                   : "noise scans after the imaging data began (the whitener was fixed)",
                           acq);
    }

    bool ignored_noise(const Acquisition& acq) {
        if (!whitener_ && !no_noise_ && !loaded_) return false;
        if (!warned_ignored_noise_) {
            if (loaded_)
                spdlog::info("[{}] NoiseAdjust: noise scans of the stream ignored: noise dependency '{}' is used",
                             session_, dependency_id_);
            else
                spdlog::warn("[{}] NoiseAdjust: noise scan {} after imaging data ignored", session_,
                             uint32_t{acq.head.scan_counter});  // a copy: spdlog binds a reference
        }
        warned_ignored_noise_ = true;
        return true;
    }

    // The first imaging readout ends the noise measurement.
    void prepare_whitener(const Acquisition& acq, Emitter& out) {
        if (!whitener_ && !no_noise_) compute_whitener(acq.head.sample_time_us, out);
    }

    // Data whose channels the stored dependency does not cover go on unwhitened with a warning, as
    // Gadgetron's pass_nonconformant_data (default true); for noise of the session itself a mismatch
    // is an error (attach).
    bool conforms(const Acquisition& acq, Emitter& out) {
        if (!loaded_ || acq.head.active_channels == channels_) return true;
        if (!warned_nonconformant_)
            warn(out, "acquisition " + std::to_string(acq.head.scan_counter) + " has " +
                          std::to_string(acq.head.active_channels) + " channels, noise dependency '" + dependency_id_ +
                          "' " + std::to_string(channels_) + ": such data are not prewhitened");
        warned_nonconformant_ = true;
        return false;
    }

    void attach(PendingAcquisition& p) {
        const Acquisition& acq = p.acq;
        if (acq.head.active_channels != channels_)
            throw std::runtime_error("NoiseAdjust: acquisition " + std::to_string(acq.head.scan_counter) + " has " +
                                     std::to_string(acq.head.active_channels) + " channels, the noise scans " +
                                     std::to_string(channels_));
        const auto& upstream = p.ops.coil_mix;
        if (!upstream) {
            p.ops.coil_mix = whitener_;
            return;
        }
        // An earlier gadget already requested a mix M (C x C): the data become W M x.
        if (upstream != composed_from_) {
            const size_t c = channels_;
            if (upstream->size() != c * c)
                throw std::runtime_error("NoiseAdjust: an earlier coil mix of " + std::to_string(upstream->size()) +
                                         " entries does not map " + std::to_string(c) + " channels onto " +
                                         std::to_string(c));
            auto wm = std::make_shared<std::vector<cfloat>>(c * c, cfloat(0));
            for (size_t i = 0; i < c; ++i)
                for (size_t k = 0; k < c; ++k)
                    for (size_t j = 0; j < c; ++j) (*wm)[i * c + j] += (*whitener_)[i * c + k] * (*upstream)[k * c + j];
            composed_from_ = upstream;
            composed_ = std::move(wm);
        }
        p.ops.coil_mix = composed_;
    }

    config::NoiseAdjust cfg_;
    std::shared_ptr<AcquisitionLedger> ledger_ = std::make_shared<AcquisitionLedger>();
    std::string session_;
    double receiver_bw_ = kDefaultReceiverNoiseBandwidth;
    size_t channels_ = 0;
    size_t samples_ = 0;
    float noise_dwell_us_ = 0;
    std::vector<cdouble> covariance_;  // lower triangle of sum x x^H
    std::shared_ptr<const std::vector<cfloat>> whitener_;
    std::shared_ptr<const std::vector<cfloat>> composed_from_, composed_;
    bool no_noise_ = false;
    bool warned_ignored_noise_ = false;
    bool warned_nonconformant_ = false;

    std::shared_ptr<MemoryBudget> host_budget_;  // the session's; null: not bounded (tests)
    BudgetCharge covariance_charge_;             // of covariance_, while it is accumulated
    BudgetCharge loaded_charge_;                 // of loaded_'s matrix

    std::shared_ptr<const NoiseDependencyStore> store_;
    std::string identity_;                    // scan_identity of this session's header, owner of what it stores
    std::vector<std::string> coil_labels_;    // coilName per channel, from the header
    std::string measurement_id_;              // this session's, where its own noise is stored
    std::string dependency_id_;               // the Noise measurementDependency, empty if none
    std::optional<NoiseCovariance> loaded_;   // that dependency, when the store had it
    std::string missing_reason_;              // why it is not loaded, for messages
};

}  // namespace

std::unique_ptr<Gadget> make_noise_adjust(const config::NoiseAdjust& cfg) {
    return std::make_unique<NoiseAdjustGadget>(cfg);
}

}  // namespace larmor
