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
#include <cmath>
#include <complex>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "gadgets/factories.h"
#include "gadgets/line_ops.h"
#include "gadgets/typed_gadget.h"

namespace larmor {
namespace {

using cdouble = std::complex<double>;

constexpr size_t kMaxChannels = 1024;  // ISMRMRD channel masks
constexpr double kDefaultReceiverNoiseBandwidth = 0.793;

// Lower Cholesky factor of the Hermitian positive definite matrix a (row-major n x n, lower
// triangle used), in place. Throws naming the channel where positive definiteness fails (a channel
// without noise, or fewer noise samples than channels).
void cholesky_lower(std::vector<cdouble>& a, size_t n) {
    double max_diag = 0;
    for (size_t i = 0; i < n; ++i) max_diag = std::max(max_diag, a[i * n + i].real());
    for (size_t j = 0; j < n; ++j) {
        double d = a[j * n + j].real();
        for (size_t k = 0; k < j; ++k) d -= std::norm(a[j * n + k]);
        if (!(d > 1e-12 * max_diag))
            throw std::runtime_error("NoiseAdjust: the noise covariance is not positive definite at channel " +
                                     std::to_string(j) + " of " + std::to_string(n) +
                                     " (a channel without noise, or too few noise samples)");
        const double ljj = std::sqrt(d);
        a[j * n + j] = ljj;
        for (size_t i = j + 1; i < n; ++i) {
            cdouble s = a[i * n + j];
            for (size_t k = 0; k < j; ++k) s -= a[i * n + k] * std::conj(a[j * n + k]);
            a[i * n + j] = s / ljj;
        }
        for (size_t i = 0; i < j; ++i) a[i * n + j] = 0;  // clear the upper triangle
    }
}

// Inverse of a lower triangular matrix (row-major), by forward substitution column by column.
std::vector<cdouble> invert_lower(const std::vector<cdouble>& l, size_t n) {
    std::vector<cdouble> inv(n * n, cdouble(0));
    for (size_t j = 0; j < n; ++j) {
        inv[j * n + j] = 1.0 / l[j * n + j];
        for (size_t i = j + 1; i < n; ++i) {
            cdouble s = 0;
            for (size_t k = j; k < i; ++k) s += l[i * n + k] * inv[k * n + j];
            inv[i * n + j] = -s / l[i * n + i];
        }
    }
    return inv;
}

class NoiseAdjustGadget final : public TypedGadget<Acquisition, PendingAcquisition> {
public:
    explicit NoiseAdjustGadget(const config::NoiseAdjust& cfg) : cfg_(cfg) {}

    void start(const SessionContext& ctx) override {
        session_ = ctx.session_id;
        receiver_bw_ = kDefaultReceiverNoiseBandwidth;
        if (cfg_.receiver_noise_bandwidth() > 0)
            receiver_bw_ = cfg_.receiver_noise_bandwidth();
        else if (ctx.header.acquisitionSystemInformation &&
                 ctx.header.acquisitionSystemInformation->relativeReceiverNoiseBandwidth)
            receiver_bw_ = *ctx.header.acquisitionSystemInformation->relativeReceiverNoiseBandwidth;
    }

    void process(Acquisition& acq, Emitter& out) override {
        if (acq.flag(ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT)) {
            if (!late_noise(acq)) accumulate(acq);
            if (cfg_.pass_noise_scans()) out.emit(std::move(acq));
            return;
        }
        prepare_whitener(acq);
        if (!whitener_) return out.emit(std::move(acq));
        PendingAcquisition pending{std::move(acq), {}};
        attach(pending);
        out.emit(std::move(pending));
    }

    // Operations an earlier gadget requested: composed with the whitener on imaging data, applied
    // on the host to noise scans before they are measured.
    void process(PendingAcquisition& p, Emitter& out) override {
        if (p.acq.flag(ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT)) {
            if (late_noise(p.acq)) {
                if (cfg_.pass_noise_scans()) out.emit(std::move(p));
                return;
            }
            Acquisition acq = materialize(std::move(p));
            accumulate(acq);
            if (cfg_.pass_noise_scans()) out.emit(std::move(acq));
            return;
        }
        prepare_whitener(p.acq);
        if (whitener_) attach(p);
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

    void compute_whitener(float acquisition_dwell_us) {
        if (samples_ == 0) {
            spdlog::info("[{}] NoiseAdjust: no noise scans before the imaging data; passing data unchanged",
                         session_);
            no_noise_ = true;
            return;
        }
        const size_t c = channels_;
        // Unbiased estimate (N - 1), as Gadgetron; full Hermitian matrix from the lower triangle.
        const double norm = 1.0 / double(samples_ > 1 ? samples_ - 1 : 1);
        std::vector<cdouble> l(c * c);
        for (size_t i = 0; i < c; ++i)
            for (size_t j = 0; j <= i; ++j) l[i * c + j] = covariance_[i * c + j] * norm;
        cholesky_lower(l, c);
        const std::vector<cdouble> inv = invert_lower(l, c);

        double scale = 1.0;
        if (noise_dwell_us_ > 0 && acquisition_dwell_us > 0)
            scale = std::sqrt(2.0 * double(acquisition_dwell_us) / double(noise_dwell_us_) * receiver_bw_);
        auto w = std::make_shared<std::vector<cfloat>>(c * c);
        for (size_t i = 0; i < c * c; ++i) (*w)[i] = cfloat(inv[i] * scale);
        whitener_ = std::move(w);
        spdlog::info("[{}] NoiseAdjust: {} channels, {} noise samples, noise dwell {} us, acquisition dwell {} us, "
                     "receiver noise bandwidth {}, scale {}",
                     session_, c, samples_, noise_dwell_us_, acquisition_dwell_us, receiver_bw_, scale);
    }

    // A noise scan after the imaging data started: ignored (logged once). False while noise is measured.
    bool late_noise(const Acquisition& acq) {
        if (!whitener_ && !no_noise_) return false;
        if (!warned_late_noise_)
            spdlog::warn("[{}] NoiseAdjust: noise scan {} after imaging data ignored", session_,
                         uint32_t{acq.head.scan_counter});  // a copy: spdlog binds a reference
        warned_late_noise_ = true;
        return true;
    }

    // The first imaging readout ends the noise measurement.
    void prepare_whitener(const Acquisition& acq) {
        if (!whitener_ && !no_noise_) compute_whitener(acq.head.sample_time_us);
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
    std::string session_;
    double receiver_bw_ = kDefaultReceiverNoiseBandwidth;
    size_t channels_ = 0;
    size_t samples_ = 0;
    float noise_dwell_us_ = 0;
    std::vector<cdouble> covariance_;  // lower triangle of sum x x^H
    std::shared_ptr<const std::vector<cfloat>> whitener_;
    std::shared_ptr<const std::vector<cfloat>> composed_from_, composed_;
    bool no_noise_ = false;
    bool warned_late_noise_ = false;
};

}  // namespace

std::unique_ptr<Gadget> make_noise_adjust(const config::NoiseAdjust& cfg) {
    return std::make_unique<NoiseAdjustGadget>(cfg);
}

}  // namespace larmor
