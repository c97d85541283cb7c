// Computed trajectories (see computed_trajectory.h and proto ComputedTrajectory).
#include "gadgets/noncart/computed_trajectory.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "gadgets/chain_config.h"

namespace larmor {
namespace {

using config::TrajectoryKind;

// Spokes and spiral arms are addressed by kspace_encode_step_1, a uint16.
constexpr int kMaxSet = 65535;

std::string name_of(TrajectoryKind k) { return config::TrajectoryKind_Name(k); }

std::string scan(const ISMRMRD::ISMRMRD_AcquisitionHeader& h) {
    return " (acquisition scan_counter " + std::to_string(h.scan_counter) + ")";
}

bool is_golden(TrajectoryKind k) {
    return k == config::TRAJECTORY_GOLDEN_ANGLE || k == config::TRAJECTORY_TINY_GOLDEN_ANGLE ||
           k == config::TRAJECTORY_KOOSHBALL;
}

// Spokes in a kx-ky plane, whose angles span 180 or 360 deg (full_circle).
bool spokes_in_plane(TrajectoryKind k) {
    return k == config::TRAJECTORY_RADIAL || k == config::TRAJECTORY_GOLDEN_ANGLE ||
           k == config::TRAJECTORY_TINY_GOLDEN_ANGLE || k == config::TRAJECTORY_INTERLEAVED_RADIAL ||
           k == config::TRAJECTORY_STACK_OF_STARS;
}

// A field's value as the chain's text would spell it.
std::string text_of(bool v) { return v ? "true" : "false"; }
std::string text_of(int v) { return std::to_string(v); }
std::string text_of(double v) {
    char s[32];
    std::snprintf(s, sizeof s, "%g", v);
    return s;
}

// Refuses a value set in a field the kind does not use: most likely the wrong kind or a misplaced field.
template <class T>
void unused(const std::string& field, T value, TrajectoryKind kind, const std::string& used_by) {
    if (value == T{}) return;
    const std::string v = text_of(value);
    throw ConfigError("AccumulateReadouts: computed." + field + " " + v + " does not apply to " + name_of(kind) +
                      " (only to " + used_by + "); leave it unset");
}

void require_range(const std::string& field, long value, long lo, long hi, TrajectoryKind kind,
                   const std::string& meaning) {
    if (value < lo || value > hi)
        throw ConfigError("AccumulateReadouts: computed." + field + " " + std::to_string(value) + " for " +
                          name_of(kind) + " is outside " + std::to_string(lo) + ".." + std::to_string(hi) + " (" +
                          meaning + ")");
}

void validate(const config::ComputedTrajectory& c) {
    const TrajectoryKind k = c.kind();
    if (k == config::TRAJECTORY_KIND_UNSET || !config::TrajectoryKind_IsValid(k)) {
        std::string kinds;
        for (int i = config::TrajectoryKind_MIN + 1; i <= config::TrajectoryKind_MAX; ++i)
            if (config::TrajectoryKind_IsValid(i)) kinds += (kinds.empty() ? "" : ", ") + name_of(TrajectoryKind(i));
        throw ConfigError("AccumulateReadouts: computed.kind " + std::to_string(int(k)) + " (" +
                          (k == config::TRAJECTORY_KIND_UNSET ? std::string("unset") : "unknown") +
                          "): set one of " + kinds);
    }
    const bool spokes_used = k == config::TRAJECTORY_RADIAL || k == config::TRAJECTORY_INTERLEAVED_RADIAL ||
                             k == config::TRAJECTORY_STACK_OF_STARS;
    if (spokes_used)
        require_range("spokes", c.spokes(), 1, kMaxSet, k, "the spokes of one full set");
    else
        unused("spokes", c.spokes(), k, "TRAJECTORY_RADIAL, TRAJECTORY_INTERLEAVED_RADIAL, TRAJECTORY_STACK_OF_STARS");

    if (k == config::TRAJECTORY_INTERLEAVED_RADIAL) {
        require_range("interleaves", c.interleaves(), 1, kMaxSet, k, "groups of spokes");
        if (c.spokes() % c.interleaves() != 0)
            throw ConfigError("AccumulateReadouts: computed.interleaves " + std::to_string(c.interleaves()) +
                              " does not divide computed.spokes " + std::to_string(c.spokes()) +
                              " (each group must hold spokes / interleaves spokes)");
    } else if (k == config::TRAJECTORY_SPIRAL) {
        require_range("interleaves", c.interleaves(), 1, kMaxSet, k, "the spiral's arms");
    } else {
        unused("interleaves", c.interleaves(), k, "TRAJECTORY_INTERLEAVED_RADIAL, TRAJECTORY_SPIRAL");
    }

    if (k == config::TRAJECTORY_TINY_GOLDEN_ANGLE)
        require_range("tiny_golden_n", c.tiny_golden_n(), 1, 1000000, k, "N of the angle 180 / (phi + N - 1) deg");
    else
        unused("tiny_golden_n", c.tiny_golden_n(), k, "TRAJECTORY_TINY_GOLDEN_ANGLE");

    if (k == config::TRAJECTORY_SPIRAL) {
        const double d = c.spiral_density();
        if (!std::isfinite(d) || d < 1.0)
            throw ConfigError("AccumulateReadouts: computed.spiral_density " + text_of(d) +
                              " for TRAJECTORY_SPIRAL must be >= 1 (the sampling density at the centre relative "
                              "to the edge; 1 = uniform, and it must match the sequence's design)");
    } else {
        unused("spiral_density", c.spiral_density(), k, "TRAJECTORY_SPIRAL");
    }

    if (!spokes_in_plane(k))
        unused("full_circle", c.full_circle(), k, "the 2D radial kinds and TRAJECTORY_STACK_OF_STARS");
    if (k != config::TRAJECTORY_STACK_OF_STARS)
        unused("rotate_partitions", c.rotate_partitions(), k, "TRAJECTORY_STACK_OF_STARS");
    if (!is_golden(k))
        unused("restart_each_repetition", c.restart_each_repetition(), k,
               "TRAJECTORY_GOLDEN_ANGLE, TRAJECTORY_TINY_GOLDEN_ANGLE, TRAJECTORY_KOOSHBALL");
}

}  // namespace

const char* trajectory_type_name(ISMRMRD::TrajectoryType t) {
    using T = ISMRMRD::TrajectoryType;
    switch (t) {
        case T::CARTESIAN: return "cartesian";
        case T::EPI: return "epi";
        case T::RADIAL: return "radial";
        case T::GOLDENANGLE: return "goldenangle";
        case T::SPIRAL: return "spiral";
        case T::OTHER: break;
    }
    return "other";
}

ComputedTrajectory::ComputedTrajectory(const config::ComputedTrajectory& cfg) : cfg_(cfg) { validate(cfg_); }

std::string ComputedTrajectory::kind_name() const { return name_of(cfg_.kind()); }

int ComputedTrajectory::dims() const { return cfg_.kind() == config::TRAJECTORY_KOOSHBALL ? 3 : 2; }

size_t ComputedTrajectory::centre_sample(size_t samples) const {
    // core/trajectory: a spoke crosses k = 0 at sample n/2 (n/2 samples before it, n - n/2 - 1 after); a
    // spiral starts there.
    return cfg_.kind() == config::TRAJECTORY_SPIRAL ? 0 : samples / 2;
}

std::string ComputedTrajectory::header_disagreement(ISMRMRD::TrajectoryType header) const {
    using T = ISMRMRD::TrajectoryType;
    const TrajectoryKind k = cfg_.kind();
    bool fits = false;
    switch (header) {
        case T::OTHER: fits = true; break;
        case T::RADIAL:
            fits = k == config::TRAJECTORY_RADIAL || k == config::TRAJECTORY_INTERLEAVED_RADIAL ||
                   k == config::TRAJECTORY_STACK_OF_STARS || k == config::TRAJECTORY_KOOSHBALL;
            break;
        case T::GOLDENANGLE: fits = is_golden(k); break;
        case T::SPIRAL: fits = k == config::TRAJECTORY_SPIRAL; break;
        case T::CARTESIAN:
        case T::EPI: fits = false; break;
    }
    if (fits) return "";
    return std::string("the header's encoding trajectory is '") + trajectory_type_name(header) +
           "' but the chain computes " + kind_name() + "; the computed trajectory is used as configured";
}

void ComputedTrajectory::bind(const EncodingGeometry& g, size_t samples) {
    const TrajectoryKind k = cfg_.kind();
    const size_t nx = g.recon_matrix[0], ny = g.recon_matrix[1], nz = g.recon_matrix[2];
    if (nx != ny || (k == config::TRAJECTORY_KOOSHBALL && nz != nx))
        throw std::runtime_error(
            "AccumulateReadouts: computed " + kind_name() + " has the same k range on every axis, but the reconSpace "
            "matrix is " + std::to_string(nx) + " x " + std::to_string(ny) +
            (k == config::TRAJECTORY_KOOSHBALL ? " x " + std::to_string(nz) + " (a kooshball needs a cube)"
                                               : " (2D kinds need a square in-plane matrix)"));
    if (samples < 2 || samples > 65535)
        throw std::runtime_error("AccumulateReadouts: readouts of " + std::to_string(samples) + " samples (computed " +
                                 kind_name() + " needs 2..65535)");
    partitions_ = g.encoded_matrix[2];
    if (k == config::TRAJECTORY_STACK_OF_STARS && partitions_ < 2)
        throw std::runtime_error("AccumulateReadouts: computed TRAJECTORY_STACK_OF_STARS needs several partitions, "
                                 "but the header's encodedSpace matrix has z = " + std::to_string(partitions_) +
                                 " (use TRAJECTORY_RADIAL for a single 2D slice)");
    // The generators take samples x oversampling over the same k range, |k| <= kmax = N/2, and only the
    // product enters the coordinates (a spoke's sample s sits at (s - n/2) kmax / (n/2), a spiral's
    // samples are equally spaced in arc length over n): the split is immaterial to the result. So a
    // readout twice the matrix (Gadgetron's usual 2x readout oversampling) is taken as oversampling 2 of N
    // samples, as larmor-phantom writes it, and any other count as oversampling 1 of number_of_samples:
    // in both cases the readout spans +-N/2, and its sample spacing follows from the count.
    const int os = samples >= nx && samples % nx == 0 ? static_cast<int>(samples / nx) : 1;
    spec_ = trajectory::RadialSpec{};
    spec_.samples = static_cast<int>(samples) / os;
    spec_.oversampling = os;
    spec_.kmax = static_cast<double>(nx) / 2.0;
    spec_.full_circle = cfg_.full_circle();
    switch (k) {
        case config::TRAJECTORY_RADIAL:
        case config::TRAJECTORY_STACK_OF_STARS: spec_.spokes = cfg_.spokes(); break;
        case config::TRAJECTORY_INTERLEAVED_RADIAL:
            spec_.spokes = cfg_.spokes();
            spec_.order = trajectory::RadialOrder::interleaved;
            spec_.interleaves = cfg_.interleaves();
            break;
        case config::TRAJECTORY_GOLDEN_ANGLE: spec_.order = trajectory::RadialOrder::golden; break;
        case config::TRAJECTORY_TINY_GOLDEN_ANGLE:
            spec_.order = trajectory::RadialOrder::tiny_golden;
            spec_.tiny_golden_n = cfg_.tiny_golden_n();
            break;
        default: break;
    }
    e1_max_ = g.e1_max;
    readouts_per_repetition_ = long(g.e1_max) + 1;
    samples_ = samples;
    scratch_.assign(samples * 3, 0.0f);
}

long ComputedTrajectory::sequence_index(const ISMRMRD::ISMRMRD_AcquisitionHeader& h) const {
    const long e1 = h.idx.kspace_encode_step_1;
    if (!is_golden(cfg_.kind()) || cfg_.restart_each_repetition() || h.idx.repetition == 0) return e1;
    // Continuing across repetitions needs e1 to restart every repetition inside the header's limit; an e1
    // beyond it means e1 counts on by itself (or the header is wrong), and adding the repetition's offset
    // would skip ahead in the sequence.
    if (e1 > long(e1_max_))
        throw std::runtime_error("AccumulateReadouts: kspace_encode_step_1 " + std::to_string(e1) + " of repetition " +
                                 std::to_string(h.idx.repetition) +
                                 " is beyond the header's kspace_encoding_step_1 maximum " + std::to_string(e1_max_) +
                                 ", so the " + kind_name() + " index repetition x " + std::to_string(e1_max_ + 1) +
                                 " + kspace_encode_step_1 is ambiguous; set computed { restart_each_repetition: true "
                                 "} if kspace_encode_step_1 already counts across repetitions" + scan(h));
    return long(h.idx.repetition) * readouts_per_repetition_ + e1;
}

const float* ComputedTrajectory::cached_readout(long index) {
    if (set_.empty()) {
        if (cfg_.kind() == config::TRAJECTORY_SPIRAL)
            set_ = trajectory::spiral_2d(cfg_.interleaves(), spec_.samples, spec_.oversampling, spec_.kmax,
                                         cfg_.spiral_density());
        else
            set_ = trajectory::radial_2d(spec_);  // stack_of_stars' spokes too when no partition is turned
        period_ = set_.shape()[2];
        ++sets_generated_;
    }
    return set_.data() + static_cast<size_t>(index % static_cast<long>(period_)) * samples_ * 2;
}

void ComputedTrajectory::fill(const ISMRMRD::ISMRMRD_AcquisitionHeader& h, int partition, float* out, int stride) {
    if (!bound()) throw std::logic_error("ComputedTrajectory::fill before bind");
    const size_t centre = centre_sample(samples_);
    if (h.center_sample != centre)
        throw std::runtime_error("AccumulateReadouts: center_sample " + std::to_string(h.center_sample) +
                                 ", but the computed " + kind_name() + " trajectory has k = 0 at sample " +
                                 std::to_string(centre) + " of " + std::to_string(samples_) + scan(h));
    const long index = sequence_index(h);
    const float* src = nullptr;
    int src_dims = 2;
    switch (cfg_.kind()) {
        case config::TRAJECTORY_RADIAL:
        case config::TRAJECTORY_INTERLEAVED_RADIAL:
        case config::TRAJECTORY_SPIRAL: src = cached_readout(index); break;
        case config::TRAJECTORY_STACK_OF_STARS:
            if (!cfg_.rotate_partitions()) {
                src = cached_readout(index);
            } else {
                trajectory::stack_of_stars_spoke(spec_, partitions_, true, partition, index, scratch_.data());
                src = scratch_.data();
                src_dims = 3;  // kx, ky taken; kz = partition - partitions / 2 comes from the accumulator
            }
            break;
        case config::TRAJECTORY_GOLDEN_ANGLE:
        case config::TRAJECTORY_TINY_GOLDEN_ANGLE:
            trajectory::radial_spoke(spec_, index, scratch_.data());
            src = scratch_.data();
            break;
        case config::TRAJECTORY_KOOSHBALL:
            trajectory::kooshball_spoke(index, spec_.samples, spec_.oversampling, spec_.kmax, scratch_.data());
            src = scratch_.data();
            src_dims = 3;
            break;
        default: throw std::logic_error("ComputedTrajectory: kind not validated");
    }
    const int d = dims();
    for (size_t s = 0; s < samples_; ++s)
        std::copy_n(src + s * static_cast<size_t>(src_dims), d, out + s * static_cast<size_t>(stride));
}

}  // namespace larmor
