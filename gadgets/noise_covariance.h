#pragma once
// A measured noise covariance as it outlives its session: what a noise-scan session leaves in the
// dependency store (gadgets/noise_dependency_store.h) for the imaging sessions that name it as their
// Noise measurementDependency, after Gadgetron's NoiseCovariance. NoiseAdjust computes the prewhitener
// from it exactly as from noise scans of its own stream, so both paths give the same image.
#include <complex>
#include <cstdint>
#include <string>
#include <vector>

namespace larmor {

struct NoiseCovariance {
    uint32_t channels = 0;
    // [channels][channels] row-major, Sigma_cd = E[x_c conj(x_d)], the (N - 1)-normalised sample
    // covariance, kept in double precision as accumulated.
    std::vector<std::complex<double>> matrix;
    uint64_t samples = 0;                 // noise samples per channel it was estimated from
    float noise_dwell_time_us = 0;        // of the noise readouts (0 = unknown)
    double receiver_noise_bandwidth = 0;  // of the noise session's header (for the record)
    std::vector<std::string> coil_labels; // coilName per channel from that header; empty if it had none
};

// L^-1 for the lower Cholesky factor L of the matrix (Sigma = L L^H, lower triangle used), row-major:
// the prewhitener up to its bandwidth scale (gadgets/noise_adjust.cpp). Throws std::runtime_error
// naming the channel where the matrix is not positive definite (a channel without noise, or fewer
// noise samples than channels).
std::vector<std::complex<double>> inverse_cholesky_factor(const NoiseCovariance& cov);

// Per-channel noise levels sigma_c = sqrt(Sigma_cc): what Gadgetron's NoiseSummaryGadget reports.
struct NoiseSigmas {
    float min = 0, max = 0, mean = 0;
};
NoiseSigmas noise_sigmas(const NoiseCovariance& cov);

// Puts `cov` in the channel order of `labels` (the imaging session's coil names), as Gadgetron's
// NoiseAdjustGadget does when the two sessions list the same coils in another order. Returns false,
// leaving cov as it is, when the coils cannot be matched (other names, other count, either side
// without labels); `note` then says why. Equal orders need no change and return true.
bool match_coil_order(NoiseCovariance& cov, const std::vector<std::string>& labels, std::string& note);

}  // namespace larmor
