#include "gadgets/noise_covariance.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/dense/dense.h"
#include "core/dense/host_cholesky.h"

namespace larmor {
namespace {

using cdouble = std::complex<double>;

// Lower Cholesky factor of the Hermitian positive definite matrix a (row-major n x n, lower
// triangle used), in place, by LAPACK's zpotrf (core/dense/host_cholesky.h). A pivot below 1e-12 of
// the largest diagonal entry fails as well as a non-positive one. Throws naming the channel where
// positive definiteness fails (a channel without noise, or fewer noise samples than channels).
void cholesky_lower(std::vector<cdouble>& a, size_t n) {
    try {
        dense::host_cholesky_lower(a.data(), n, 1e-12);
    } catch (const dense::NotPositiveDefinite& e) {
        throw std::runtime_error("NoiseAdjust: the noise covariance is not positive definite at channel " +
                                 std::to_string(e.minor() - 1) + " of " + std::to_string(n) +
                                 " (a channel without noise, or too few noise samples)");
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

}  // namespace

std::vector<std::complex<double>> inverse_cholesky_factor(const NoiseCovariance& cov) {
    const size_t c = cov.channels;
    if (cov.matrix.size() != c * c)
        throw std::runtime_error("NoiseAdjust: a noise covariance of " + std::to_string(c) + " channels holds " +
                                 std::to_string(cov.matrix.size()) + " entries");
    std::vector<cdouble> l(c * c);
    for (size_t i = 0; i < c; ++i)
        for (size_t j = 0; j <= i; ++j) l[i * c + j] = cov.matrix[i * c + j];
    cholesky_lower(l, c);
    return invert_lower(l, c);
}

NoiseSigmas noise_sigmas(const NoiseCovariance& cov) {
    NoiseSigmas s;
    if (cov.channels == 0) return s;
    const size_t c = cov.channels;
    double sum = 0;
    s.min = std::numeric_limits<float>::max();
    for (size_t i = 0; i < c; ++i) {
        const float sigma = static_cast<float>(std::sqrt(std::max(0.0, cov.matrix[i * c + i].real())));
        s.min = std::min(s.min, sigma);
        s.max = std::max(s.max, sigma);
        sum += sigma;
    }
    // The mean over channels. (Gadgetron's NoiseSummaryGadget reports the sum under this name; the
    // client only prints it, and uses min_sigma for its -T tolerance.)
    s.mean = static_cast<float>(sum / double(c));
    return s;
}

bool match_coil_order(NoiseCovariance& cov, const std::vector<std::string>& labels, std::string& note) {
    const size_t c = cov.channels;
    if (cov.coil_labels.empty() || labels.empty()) {
        note = "coil labels missing in the " + std::string(labels.empty() ? "imaging" : "noise") + " header";
        return false;
    }
    if (cov.coil_labels.size() != c || labels.size() != c) {
        note = "the noise has " + std::to_string(c) + " channels and " + std::to_string(cov.coil_labels.size()) +
               " coil labels, the imaging header " + std::to_string(labels.size()) + " coil labels";
        return false;
    }
    if (cov.coil_labels == labels) return true;
    // order[d]: the noise channel that is the imaging session's channel d.
    std::vector<size_t> order(c);
    std::vector<bool> used(c, false);
    for (size_t d = 0; d < c; ++d) {
        size_t s = 0;
        while (s < c && (used[s] || cov.coil_labels[s] != labels[d])) ++s;
        if (s == c) {
            note = "coil '" + labels[d] + "' of the imaging header is not among the noise measurement's coils";
            return false;
        }
        used[s] = true;
        order[d] = s;
    }
    std::vector<std::complex<double>> m(c * c);
    for (size_t i = 0; i < c; ++i)
        for (size_t j = 0; j < c; ++j) m[i * c + j] = cov.matrix[order[i] * c + order[j]];
    cov.matrix = std::move(m);
    cov.coil_labels = labels;
    note = "noise channels reordered to the imaging session's coil order";
    return true;
}

}  // namespace larmor
