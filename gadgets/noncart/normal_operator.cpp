#include "gadgets/noncart/normal_operator.h"

#include <cstdio>
#include <map>
#include <mutex>
#include <optional>

#include <spdlog/spdlog.h>

#include "core/linops/algebra.h"
#include "core/linops/toeplitz.h"
#include "core/recon/normal_choice.h"
#include "gadgets/noncart/cached_toeplitz.h"
#include "gadgets/sense/noncartesian_sense.h"

namespace larmor {
namespace {

// AUTO's measurements, server-wide: one per device and problem size.
class NormalTimesTable {
public:
    std::optional<NormalTimes> find(const std::string& key) {
        std::lock_guard<std::mutex> lock(m_);
        const auto it = times_.find(key);
        if (it == times_.end()) return std::nullopt;
        return it->second;
    }
    void store(const std::string& key, const NormalTimes& t) {
        std::lock_guard<std::mutex> lock(m_);
        times_.emplace(key, t);
    }

private:
    std::mutex m_;
    std::map<std::string, NormalTimes> times_;
};

NormalTimesTable& table() {
    static NormalTimesTable t;
    return t;
}

std::string problem_key(Backend& be, const TrajectoryBuffer& tb, const NufftOptions& nufft) {
    char opts[64];
    std::snprintf(opts, sizeof opts, " tol %g sigma %g", nufft.tolerance, nufft.upsampling);
    return be.describe() + " " + tb.image.str() + " x " + tb.data.shape().str() + opts;
}

std::string milliseconds(double s) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3g ms", 1e3 * s);
    return b;
}

// Exact where the exact sums are fast (a GPU), by the NUFFT at its tightest on the CPU: either is
// F^H W F to about 1e-6, well inside the pair's own NUFFT tolerance.
ToeplitzOptions q_options(const Backend& be) {
    ToeplitzOptions o;
    o.method = be.device() == Device::Cuda ? ToeplitzOptions::Method::Exact : ToeplitzOptions::Method::Nufft;
    return o;
}

}  // namespace

NormalDecision NormalOperatorChoice::choose(PrecomputeCache& cache, const std::shared_ptr<Backend>& be,
                                            const TrajectoryBuffer& tb, const RArray& coords,
                                            const std::shared_ptr<Nufft>& plan, const RArray& weights,
                                            const NufftOptions& nufft, int iterations) {
    NormalDecision d;
    const ToeplitzOptions o = q_options(*be);
    if (mode_ == config::CgSense::NORMAL_NUFFT_PAIR) {
        d.description = "NUFFT pair";
        return d;
    }
    if (mode_ == config::CgSense::NORMAL_TOEPLITZ) {
        const CachedSpectrum q = cached_toeplitz_spectrum(cache, be, tb.image, coords, weights, o);
        d.spectrum = q.spectrum;
        d.description = std::string("Toeplitz, Q ") + PrecomputeCache::source_name(q.source);
        return d;
    }
    const std::string key = problem_key(*be, tb, nufft);
    std::optional<NormalTimes> t = table().find(key);
    CArray spectrum;
    if (!t) {
        const CachedSpectrum q = cached_toeplitz_spectrum(cache, be, tb.image, coords, weights, o);
        spectrum = q.spectrum;
        const size_t coils = tb.data.shape()[2];
        LinOp pair = normal(weighted_nufft(be, plan, be->to_device(weights)));
        LinOp toeplitz = toeplitz_normal(be, tb.image, coils, spectrum);
        // What computing Q costs (the cache keeps that with the kernel): a trajectory not seen before pays it.
        t = time_normals(*pair, *toeplitz, q.compute_seconds);
        table().store(key, *t);
        spdlog::info("CgSense: F^H W F for {}: NUFFT pair {} per application, Toeplitz {} (Q {} {})", key,
                     milliseconds(t->pair), milliseconds(t->toeplitz), PrecomputeCache::source_name(q.source),
                     milliseconds(t->q));
    }
    const bool have_q = !spectrum.empty() || cache.contains(toeplitz_key(tb.image, coords, weights, o), true);
    const std::string times = milliseconds(t->toeplitz) + " vs pair " + milliseconds(t->pair) + " per application, Q " +
                              milliseconds(t->q) + (have_q ? " (cached)" : "");
    if (toeplitz_is_faster(*t, iterations, have_q)) {
        if (spectrum.empty()) spectrum = cached_toeplitz_spectrum(cache, be, tb.image, coords, weights, o).spectrum;
        d.spectrum = spectrum;
        d.description = "Toeplitz (auto: " + times + ")";
    } else {
        d.description = "NUFFT pair (auto: Toeplitz " + times + ")";
    }
    return d;
}

}  // namespace larmor
