// AccumulateReadouts: the non-Cartesian counterpart of AccumulateTrigger. Radial, spiral and 3D radial
// readouts have no place on a Cartesian grid; they are kept in the order they come, each with its
// trajectory converted to core's units (cycles per FOV of the reconstruction matrix), and handed on as a
// TrajectoryBuffer per trigger (slice, repetition, ... as AccumulateTrigger) or, in real-time mode, as
// a frame of the last `window` readouts every `stride` readouts (a sliding window: each frame shares
// window - stride readouts with the one before, so the frame rate is set by the stride and the temporal
// footprint by the window).
//
// Trajectories are checked where they enter (design.md, "Conventions"): dimensions 2 or 3, finite,
// inside the k-space extent of the matrix; a readout that fails is refused with its scan counter and
// the offending value, never gridded somewhere else. A readout without one (trajectory_dimensions 0)
// gets the coordinates of the chain's `computed` trajectory when it has one
// (noncart/computed_trajectory.h), as every readout does with `computed.override_stream`.
//
// With `trajectory_weights` each sample's last traj component is its density weight (the ISMRMRD layout
// of Gadgetron and many exports: 3 = (kx, ky, w), 4 = (kx, ky, kz, w)). Only the chain can say so: a
// 3-component traj is otherwise a 3D trajectory, and on a 3D encoding (kx, ky, w) of a stack of stars
// and (kx, ky, kz) of a kooshball look alike. The weights are checked like the coordinates (finite,
// >= 0, not all zero over a frame) and travel with the buffer, as sent, for DENSITY_FROM_STREAM.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/constants.h"
#include "core/memory_budget.h"
#include "gadgets/chain_config.h"
#include "gadgets/encoding.h"
#include "gadgets/factories.h"
#include "gadgets/line_ops.h"
#include "gadgets/noncart/computed_trajectory.h"
#include "gadgets/trigger_counter.h"
#include "gadgets/typed_gadget.h"

namespace larmor {
namespace {

constexpr size_t kMaxChannels = 1024;
// A coordinate may exceed N/2 by this fraction of an axis (rounding in the scanner's or a client's
// trajectory computation) and is then clamped; beyond it the readout is refused.
constexpr double kRangeSlack = 1e-3;

// A weight as sent, to 9 significant digits (std::to_string would print a 1e-8 weight as 0.000000).
std::string number(float v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
    return buf;
}

// Where a third traj component meets a 2D encoding: Gadgetron's exports put the density weight there.
constexpr const char* kWeightHint =
    "; if the third traj component is a density weight (ISMRMRD (kx, ky, w)), set accumulate_readouts { "
    "trajectory_weights: true }";

struct Key {
    uint16_t encoding, slice, contrast, phase, repetition, set;
    bool operator==(const Key& o) const {
        return encoding == o.encoding && slice == o.slice && contrast == o.contrast && phase == o.phase &&
               repetition == o.repetition && set == o.set;
    }
};

// One readout as kept: samples [samples, coils] (the buffer's layout per readout) and its coordinates.
struct Readout {
    std::vector<cfloat> samples;  // s + c * S, as ISMRMRD stores them
    std::vector<float> coords;    // [dims, S], cycles per FOV
    std::vector<float> weights;   // [S], the traj's last component (trajectory_weights); else empty
    ISMRMRD::ISMRMRD_AcquisitionHeader head{};
    // Held until the buffer is assembled: what a header declares is only an estimate (admission), so
    // readouts beyond it must stop at the session's budget, not at the machine's memory.
    BudgetCharge charge;
};

// The image grid a trajectory of `traj_dims` refers to, and how a partition index adds kz.
struct Grid {
    Shape image;
    int dims = 2;          // coordinates per sample in the buffer (2, or 3 for 3D and stack of stars)
    bool stack = false;    // 2D trajectory, partitions along z (stack of stars)
};

class AccumulateReadoutsGadget final : public TypedGadget<Acquisition, PendingAcquisition> {
public:
    explicit AccumulateReadoutsGadget(const config::AccumulateReadouts& cfg) : cfg_(cfg) {
        if (cfg.window() < 0 || cfg.window() > 65536)
            throw ConfigError("AccumulateReadouts: window " + std::to_string(cfg.window()) + " is outside 0..65536");
        if (cfg.stride() < 0 || cfg.stride() > std::max(cfg.window(), 1))
            throw ConfigError("AccumulateReadouts: stride " + std::to_string(cfg.stride()) + " is outside 0..window (" +
                              std::to_string(cfg.window()) + ")");
        if (cfg.window() == 0 && cfg.stride() != 0)
            throw ConfigError("AccumulateReadouts: stride " + std::to_string(cfg.stride()) +
                              " without a window (set window for real-time frames)");
        window_ = static_cast<size_t>(cfg.window());
        stride_ = cfg.stride() == 0 ? window_ : static_cast<size_t>(cfg.stride());
        if (cfg.has_computed()) computed_.emplace(cfg.computed());
        weights_ = cfg.trajectory_weights();
    }

    bool uses_trajectories() const override { return true; }

    // The readouts of one buffer, as declared: the encoded matrix's worth of samples per channel, twice
    // (host copy while filling, backend copy when handed on).
    uint64_t working_set(const ISMRMRD::IsmrmrdHeader& h) const override { return declared_kspace_bytes(h, 2); }

    void start(const SessionContext& ctx) override {
        header_ = ctx.header;
        backend_ = ctx.backend;
        session_ = ctx.session_id;
        ledger_ = ctx.ledger;
        if (!backend_) throw std::runtime_error("AccumulateReadouts: the session has no backend");
        geometry_ = encoding_geometry(header_, 0);
        trajectory_ = trajectory_type_name(header_.encoding.at(0).trajectory);
    }

    void process(Acquisition& a, Emitter& out) override { accumulate(a, out); }

    void process(PendingAcquisition& p, Emitter& out) override {
        // Readout oversampling removal crops the image-domain FOV of each readout, which for a radial or
        // spiral readout would also have to resample its trajectory: refuse it rather than mismatch.
        if (p.ops.remove_ro_oversampling)
            throw std::runtime_error("AccumulateReadouts: remove_ro_oversampling before a non-Cartesian accumulator "
                                     "would change the readout's sampling but not its trajectory; remove it from "
                                     "the chain (the gridding grid handles oversampled readouts)" + p.acq.scan_text());
        Acquisition a = materialize(std::move(p));
        accumulate(a, out);
    }

    void finish(Emitter& out) override {
        if (window_ > 0) return;  // real-time frames were emitted as the readouts came
        emit_all(out);
    }

private:
    void accumulate(const Acquisition& a, Emitter& out) {
        if (a.flag(ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT)) {
            ledger_->discarded("noise scans (no noise_adjust before the accumulator)", a);
            return;
        }
        if (a.flag(ISMRMRD::ISMRMRD_ACQ_IS_NAVIGATION_DATA) || a.flag(ISMRMRD::ISMRMRD_ACQ_IS_PHASECORR_DATA) ||
            a.flag(ISMRMRD::ISMRMRD_ACQ_IS_DUMMYSCAN_DATA)) {
            ledger_->discarded("navigator, phase correction and dummy readouts (not reconstructed)", a);
            return;
        }
        if (window_ > 0) {
            add_realtime(a, out);
            return;
        }
        const auto dim = cfg_.trigger();
        if (auto v = trigger_counter(a.head.idx, dim)) {
            if (last_counter_ && *last_counter_ != *v) emit_all(out);
            last_counter_ = v;
        }
        slot_for(key_of(a)).push_back(readout_of(a));
        ledger_->used("imaging");
        if (dim == config::TRIGGER_AUTO) {
            if (a.flag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_REPETITION) || a.flag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_MEASUREMENT))
                emit_all(out);
            else if (a.flag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_SLICE))
                emit_key(key_of(a), out);
        }
    }

    void add_realtime(const Acquisition& a, Emitter& out) {
        ring_.push_back(readout_of(a));
        ledger_->used("imaging");
        if (ring_.size() > window_) ring_.pop_front();
        ++since_frame_;
        if (ring_.size() == window_ && (frames_ == 0 || since_frame_ >= stride_)) {
            TrajectoryBuffer tb = assemble(ring_.begin(), ring_.end());
            tb.acquisitions = since_frame_;  // the readouts no earlier frame held
            since_frame_ = 0;
            tb.frame = frames_++;
            out.emit(std::move(tb));
        }
    }

    static Key key_of(const Acquisition& a) {
        const auto& i = a.head.idx;
        return {a.head.encoding_space_ref, i.slice, i.contrast, i.phase, i.repetition, i.set};
    }

    // Whether this readout's coordinates are computed rather than read from its traj.
    bool computed_for(const Acquisition& a) const {
        return computed_ && (computed_->override_stream() || a.head.trajectory_dimensions == 0);
    }

    // Coordinates per sample of a readout: its own trajectory_dimensions (less the weight with
    // trajectory_weights), or the computed kind's.
    int dims_of(const Acquisition& a) const {
        if (computed_for(a)) return computed_->dims();
        return a.head.trajectory_dimensions - (weights_ ? 1 : 0);
    }

    std::string dims_origin(const Acquisition& a) const {
        if (computed_for(a))
            return " (computed " + computed_->kind_name() + (weights_ ? "; density weights from the traj)" : ")");
        return weights_ ? " (the readout's traj, its last component the density weight)" : " (the readout's traj)";
    }

    // With trajectory_weights the readout's own traj must hold one component after its coordinates:
    // 3 or 4, or the computed kind's coordinates + 1 (override_stream: coordinates computed, weights sent).
    void check_weight_component(const Acquisition& a) const {
        const int td = a.head.trajectory_dimensions;
        const bool computed = computed_for(a);
        if (computed ? td == computed_->dims() + 1 : (td == 3 || td == 4)) return;
        throw std::runtime_error(
            "AccumulateReadouts: trajectory_weights is set (density weights from the stream) but the readout has "
            "trajectory_dimensions " + std::to_string(td) +
            ", no component for a weight: each sample's weight follows its coordinates, 3 = (kx, ky, w) for a 2D "
            "trajectory or a stack of stars, 4 = (kx, ky, kz, w) for 3D" +
            (computed ? " (" + std::to_string(computed_->dims() + 1) + " with the computed " + computed_->kind_name() +
                            " coordinates)"
                      : std::string()) +
            "; without weights in the data, unset trajectory_weights and use a computed density" + a.scan_text());
    }

    const Grid& grid_for(const Acquisition& a) {
        const int td = dims_of(a);
        const int weight = weights_ ? 1 : 0;  // messages count traj components as the stream does
        if (grid_) {
            if (td != traj_dims_)
                throw std::runtime_error(
                    "AccumulateReadouts: trajectory_dimensions " + std::to_string(td + weight) + dims_origin(a) +
                    ", earlier readouts had " + std::to_string(traj_dims_ + weight) +
                    (computed_ && !computed_->override_stream()
                         ? "; set computed { override_stream: true } to use the computed trajectory for every readout"
                         : "") +
                    a.scan_text());
            return *grid_;
        }
        if (td != 2 && td != 3)
            throw std::runtime_error(
                "AccumulateReadouts: trajectory_dimensions " + std::to_string(td) +
                " (2 or 3 supported; a non-Cartesian chain needs each readout's trajectory: send it as the "
                "acquisition's traj, or compute it in the chain with accumulate_readouts { computed { kind: "
                "TRAJECTORY_GOLDEN_ANGLE ... } }, see README \"Non-Cartesian reconstruction\")" +
                (td == 4 ? "; 4 components are (kx, ky, kz, w) with density weights: set accumulate_readouts { "
                           "trajectory_weights: true }"
                         : "") +
                a.scan_text());
        if (a.head.encoding_space_ref != 0)
            throw std::runtime_error("AccumulateReadouts: encoding_space_ref " +
                                     std::to_string(a.head.encoding_space_ref) + " (one encoding space supported)" +
                                     a.scan_text());
        const auto& m = geometry_.recon_matrix;
        Grid g;
        const size_t partitions = geometry_.encoded_matrix[2];
        if (td == 3) {
            g.image = Shape{m[0], m[1], std::max<size_t>(m[2], 1)};
            g.dims = 3;
        } else if (partitions > 1) {
            g.image = Shape{m[0], m[1], partitions};
            g.dims = 3;
            g.stack = true;
        } else {
            g.image = Shape{m[0], m[1]};
        }
        traj_dims_ = static_cast<uint16_t>(td);
        grid_ = g;
        spdlog::info("[{}] AccumulateReadouts: {} trajectory, {}D coordinates{}{}, image {}", session_, trajectory_, td,
                     dims_origin(a), g.stack ? " (stack of stars)" : "", g.image.str());
        if (td == 3 && g.image[2] == 1 && !weights_ && !computed_for(a))
            spdlog::warn("[{}] AccumulateReadouts: 3 traj components on an encoding of one partition are read as "
                         "(kx, ky, kz){}", session_, kWeightHint);
        return *grid_;
    }

    // A stack of stars' partition index p (kz = p - partitions/2) of the readout, checked against the
    // encoding's partitions.
    int partition_of(const Acquisition& a, const Grid& g) const {
        const int p = int(a.head.idx.kspace_encode_step_2) + e2_offset(geometry_);
        if (p < 0 || p >= int(g.image[2]))
            throw std::runtime_error("AccumulateReadouts: kspace_encode_step_2 " +
                                     std::to_string(a.head.idx.kspace_encode_step_2) + " is outside the " +
                                     std::to_string(g.image[2]) + " partitions of the encoding" + a.scan_text());
        return p;
    }

    // The readout's traj, converted from the chain's units to cycles per FOV and checked, into r.coords.
    void stream_coords(const Acquisition& a, const Grid& g, Readout& r) const {
        const size_t ns = a.head.number_of_samples, stride = a.head.trajectory_dimensions;
        const bool normalised = cfg_.trajectory_units() == config::TRAJECTORY_NORMALISED;
        for (size_t s = 0; s < ns; ++s)
            for (int d = 0; d < traj_dims_; ++d) {
                const double n = static_cast<double>(g.image[d]);
                const float v = a.traj[s * stride + static_cast<size_t>(d)];
                double k = normalised ? v * n : v;
                if (!std::isfinite(k) || std::abs(k) > n / 2 * (1 + kRangeSlack) + 1e-9)
                    throw std::runtime_error(
                        "AccumulateReadouts: trajectory value " + std::to_string(v) + " at sample " + std::to_string(s) +
                        ", axis " + std::to_string(d) + " is outside the k-space of a " + std::to_string(g.image[d]) +
                        "-pixel axis (" +
                        (normalised ? std::string("[-0.5, 0.5] in normalised units")
                                    : "[-" + std::to_string(g.image[d] / 2) + ", " + std::to_string(g.image[d] / 2) +
                                          "] cycles per FOV") +
                        "; trajectory_units says " + (normalised ? "normalised" : "cycles per FOV") + ")" +
                        (d == 2 && g.image[2] == 1 ? kWeightHint : "") + a.scan_text());
                k = std::clamp(k, -n / 2, n / 2);
                r.coords[s * static_cast<size_t>(g.dims) + static_cast<size_t>(d)] = static_cast<float>(k);
            }
    }

    // The computed trajectory's coordinates (already in cycles per FOV) into r.coords; the first such
    // readout fixes the computed trajectory's geometry and says so, with a warning when the header's
    // trajectory type names another family.
    void computed_coords(const Acquisition& a, const Grid& g, Readout& r) {
        if (!computed_->bound()) {
            computed_->bind(geometry_, a.head.number_of_samples);
            spdlog::info("[{}] AccumulateReadouts: computing {} coordinates for readouts {}", session_,
                         computed_->kind_name(), computed_->override_stream() ? "(all of them)" : "without traj");
            const std::string differs = computed_->header_disagreement(header_.encoding.at(0).trajectory);
            if (!differs.empty()) spdlog::warn("[{}] AccumulateReadouts: {}", session_, differs);
        }
        const int partition = g.stack ? partition_of(a, g) : 0;
        computed_->fill(a.head, partition, r.coords.data(), g.dims);
    }

    // Each sample's density weight, the last of its traj components, into r.weights: used as sent
    // (DENSITY_FROM_STREAM), so only what no weighting can mean is refused.
    void stream_weights(const Acquisition& a, Readout& r) const {
        const size_t ns = a.head.number_of_samples, td = a.head.trajectory_dimensions;
        r.weights.resize(ns);
        for (size_t s = 0; s < ns; ++s) {
            const float w = a.traj[s * td + td - 1];
            if (!std::isfinite(w) || w < 0)
                throw std::runtime_error("AccumulateReadouts: density weight " + number(w) + " at sample " +
                                         std::to_string(s) + " (traj component " + std::to_string(td) + " of " +
                                         std::to_string(td) + ", trajectory_weights) is " +
                                         (std::isfinite(w) ? "negative" : "not finite") +
                                         "; weights must be finite and >= 0" + a.scan_text());
            r.weights[s] = w;
        }
    }

    Readout readout_of(const Acquisition& a) {
        if (weights_) check_weight_component(a);
        const Grid& g = grid_for(a);
        const bool computed = computed_for(a);
        const size_t ns = a.head.number_of_samples, ch = a.head.active_channels;
        if (ch == 0 || ch > kMaxChannels)
            throw std::runtime_error("AccumulateReadouts: " + std::to_string(ch) + " active channels (1.." +
                                     std::to_string(kMaxChannels) + " supported)" + a.scan_text());
        if (ns == 0 || a.data.size() != ch * ns)
            throw std::runtime_error("AccumulateReadouts: " + std::to_string(a.data.size()) + " values of data for " +
                                     std::to_string(ch) + " channels x " + std::to_string(ns) + " samples" + a.scan_text());
        const size_t td = a.head.trajectory_dimensions;  // traj's stride: coordinates (+ weight)
        if ((!computed || weights_) && a.traj.size() != ns * td)
            throw std::runtime_error("AccumulateReadouts: " + std::to_string(a.traj.size()) +
                                     " trajectory values for " + std::to_string(ns) + " samples x " +
                                     std::to_string(td) + " dimensions" + a.scan_text());
        if (samples_ && ns != *samples_)
            throw std::runtime_error("AccumulateReadouts: readout of " + std::to_string(ns) +
                                     " samples; earlier readouts had " + std::to_string(*samples_) + a.scan_text());
        if (channels_ && ch != *channels_)
            throw std::runtime_error("AccumulateReadouts: " + std::to_string(ch) + " channels; earlier readouts had " +
                                     std::to_string(*channels_) + a.scan_text());
        samples_ = ns;
        channels_ = ch;

        Readout r;
        const uint64_t bytes = uint64_t{ns} * ch * sizeof(cfloat) +
                               uint64_t{ns} * (static_cast<uint64_t>(g.dims) + (weights_ ? 1 : 0)) * sizeof(float);
        r.charge = BudgetCharge(backend_->budgets().host, bytes,
                                "AccumulateReadouts: readout " + std::to_string(readouts_held() + 1) + " of " +
                                    std::to_string(ns) + " samples x " + std::to_string(ch) + " channels" +
                                    a.scan_text());
        r.head = a.head;
        r.samples.assign(a.data.begin(), a.data.end());
        r.coords.resize(ns * static_cast<size_t>(g.dims));
        if (computed)
            computed_coords(a, g, r);
        else
            stream_coords(a, g, r);
        if (weights_) stream_weights(a, r);
        if (g.stack) {
            const int kz = partition_of(a, g) - int(g.image[2] / 2);
            for (size_t s = 0; s < ns; ++s) r.coords[s * 3 + 2] = static_cast<float>(kz);
        }
        return r;
    }

    template <class It>
    TrajectoryBuffer assemble(It first, It last) {
        const size_t readouts = static_cast<size_t>(std::distance(first, last));
        const size_t ns = *samples_, ch = *channels_;
        const Grid& g = *grid_;
        TrajectoryBuffer tb;
        tb.image = g.image;
        tb.partitions = g.stack ? g.image[2] : 1;
        // A 3D trajectory whose every readout lies in one kz plane, on more than one plane, is a stack of
        // stars that brought its kz along (the density weights treat it so).
        if (traj_dims_ == 3 && !g.stack && g.image[2] > 1) {
            bool planar = true;
            float kz_min = 0, kz_max = 0;
            size_t r = 0;
            for (It it = first; it != last && planar; ++it, ++r) {
                const float kz = it->coords[2];
                for (size_t s = 1; s < ns && planar; ++s) planar = it->coords[s * 3 + 2] == kz;
                kz_min = r == 0 ? kz : std::min(kz_min, kz);
                kz_max = r == 0 ? kz : std::max(kz_max, kz);
            }
            if (planar && kz_max > kz_min) tb.partitions = g.image[2];
        }
        tb.geometry = geometry_;
        tb.trajectory = trajectory_;
        tb.coords = RArray::host({static_cast<size_t>(g.dims), ns, readouts}, backend_->budgets().host);
        // Pageable, not the backend's page-locked staging: a real-time chain assembles a frame every few
        // spokes, and cudaHostAlloc / cudaFreeHost per frame cost milliseconds now and then (cudaFreeHost
        // waits for the whole device), where the upload of a pageable buffer costs its copy.
        CArray host = CArray::host({ns, readouts, ch}, backend_->budgets().host);
        size_t r = 0;
        for (It it = first; it != last; ++it, ++r) {
            std::copy(it->coords.begin(), it->coords.end(), tb.coords.data() + r * ns * static_cast<size_t>(g.dims));
            for (size_t c = 0; c < ch; ++c)
                std::copy_n(it->samples.data() + c * ns, ns, host.data() + (c * readouts + r) * ns);
            tb.reference = it->head;
        }
        tb.data = backend_->to_device(host);
        if (weights_) tb.weights = frame_weights(first, last, tb);
        return tb;
    }

    // The readouts' weights as one [samples, readouts] array. A frame whose weights are all zero would
    // grid to a zero image: refused, naming its readouts.
    template <class It>
    RArray frame_weights(It first, It last, const TrajectoryBuffer& tb) {
        const size_t ns = *samples_, readouts = static_cast<size_t>(std::distance(first, last));
        RArray w = RArray::host({ns, readouts}, backend_->budgets().host);
        double sum = 0;
        size_t r = 0;
        for (It it = first; it != last; ++it, ++r) {
            std::copy(it->weights.begin(), it->weights.end(), w.data() + r * ns);
            for (float v : it->weights) sum += v;
        }
        if (sum == 0)
            throw std::runtime_error("AccumulateReadouts: every density weight (trajectory_weights) of the " +
                                     std::to_string(readouts) + " readouts of frame " + std::to_string(frames_) +
                                     " is zero (acquisition scan_counter " + std::to_string(first->head.scan_counter) +
                                     " to " + std::to_string(tb.reference.scan_counter) + ")");
        if (frames_ == 0) say_weight_scale(sum, tb);
        return w;
    }

    // Stream weights are used as sent, so their units set the image's scale (and CG-SENSE's balance with
    // lambda). Says once how their sum compares with the volume of k-space the samples span, which the
    // computed weights (k-space area in cycles per FOV) match to a few percent when k-space is covered;
    // exports in normalised units, for one, are N^2 (N^3 in 3D) smaller.
    void say_weight_scale(double sum, const TrajectoryBuffer& tb) const {
        const size_t dims = tb.coords.shape()[0], m = tb.coords.size() / dims;
        const bool in_plane = tb.partitions > 1 || dims == 2;  // radius in kx-ky, kz the partition
        double kmax2 = 0;
        const float* k = tb.coords.data();
        for (size_t i = 0; i < m; ++i) {
            double r2 = 0;
            for (size_t d = 0; d < (in_plane ? 2 : dims); ++d) r2 += double(k[i * dims + d]) * k[i * dims + d];
            kmax2 = std::max(kmax2, r2);
        }
        const double kmax = std::sqrt(kmax2);
        const double volume = in_plane ? kPi * kmax2 * double(tb.partitions) : 4.0 / 3.0 * kPi * kmax2 * kmax;
        const double ratio = volume > 0 ? sum / volume : 0;
        const bool odd = !(ratio > 0.1 && ratio < 10);
        const auto level = odd ? spdlog::level::warn : spdlog::level::info;
        spdlog::log(level, "[{}] AccumulateReadouts: the stream's density weights sum to {:.4g}, {:.3g} times the "
                           "k-space {} their samples span ({:.4g} in cycles per FOV, the computed weights' units){}",
                    session_, sum, ratio, in_plane && tb.partitions == 1 ? "area" : "volume", volume,
                    odd ? ": used as sent, they scale the gridded image by that factor and shift CG-SENSE's balance "
                          "with lambda"
                        : "");
    }

    size_t readouts_held() const {
        size_t n = ring_.size();
        for (const auto& s : slots_) n += s.second.size();
        return n;
    }

    std::vector<Readout>& slot_for(const Key& key) {
        for (auto& s : slots_)
            if (s.first == key) return s.second;
        slots_.emplace_back(key, std::vector<Readout>{});
        return slots_.back().second;
    }

    void emit_slot(std::vector<Readout>& readouts, Emitter& out) {
        if (readouts.empty()) return;
        TrajectoryBuffer tb = assemble(readouts.begin(), readouts.end());
        tb.acquisitions = readouts.size();
        tb.frame = frames_++;
        readouts.clear();
        out.emit(std::move(tb));
    }

    void emit_key(const Key& key, Emitter& out) {
        for (auto it = slots_.begin(); it != slots_.end(); ++it)
            if (it->first == key) {
                std::vector<Readout> r = std::move(it->second);
                slots_.erase(it);
                emit_slot(r, out);
                return;
            }
    }

    void emit_all(Emitter& out) {
        auto slots = std::move(slots_);
        slots_.clear();
        for (auto& s : slots) emit_slot(s.second, out);
    }

    config::AccumulateReadouts cfg_;
    std::optional<ComputedTrajectory> computed_;
    size_t window_ = 0, stride_ = 0;
    ISMRMRD::IsmrmrdHeader header_;
    std::shared_ptr<Backend> backend_;
    std::shared_ptr<AcquisitionLedger> ledger_ = std::make_shared<AcquisitionLedger>();
    std::string session_, trajectory_;
    EncodingGeometry geometry_;
    std::optional<Grid> grid_;
    uint16_t traj_dims_ = 0;  // coordinates per sample (the weight not counted)
    bool weights_ = false;    // trajectory_weights: the traj's last component is the density weight
    std::optional<size_t> samples_, channels_;
    std::vector<std::pair<Key, std::vector<Readout>>> slots_;
    std::deque<Readout> ring_;  // real-time mode: the last `window` readouts
    size_t since_frame_ = 0;
    uint32_t frames_ = 0;
    std::optional<uint16_t> last_counter_;
};

}  // namespace

std::unique_ptr<Gadget> make_accumulate_readouts(const config::AccumulateReadouts& cfg) {
    return std::make_unique<AccumulateReadoutsGadget>(cfg);
}

}  // namespace larmor
