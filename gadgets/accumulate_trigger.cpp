// AccumulateTrigger (Gadgetron's AccumulatorGadget / AcquisitionAccumulateTriggerGadget +
// BucketToBufferGadget): places Cartesian readouts into [RO, E1, E2, CH] k-space buffers, one per
// (encoding space, slice, contrast, phase, repetition, set[, average]), and emits a ReconBuffer (the
// imaging k-space with its calibration lines) when a trigger fires.
//
// Placement: line kspace_encode_step_1 goes to index step + E1/2 - centre (encodingLimits centre), so
// the k-space centre sits at E1/2 as the centred FFT expects and partial Fourier is zero-filled on the
// unsampled side; E2 likewise. An asymmetric echo is placed so that center_sample lands at RO/2.
// Repeated readouts of the same line (averages, unless average is the trigger dimension) are averaged.
//
// Pending line operations (noise prewhitening, readout oversampling removal: PendingAcquisition) are
// applied on the session backend to batches of readouts as they arrive (see Buffer).
#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "gadgets/encoding.h"
#include "gadgets/factories.h"
#include "gadgets/kernels/line_placement.h"
#include "gadgets/line_ops.h"
#include "gadgets/trigger_counter.h"
#include "gadgets/typed_gadget.h"

namespace larmor {
namespace {

// What a special readout is, for the session summary; nullptr for ordinary data.
const char* special_kind(const Acquisition& a) {
    using namespace ISMRMRD;
    static const std::pair<int, const char*> kinds[] = {
        {ISMRMRD_ACQ_IS_NAVIGATION_DATA, "navigator readouts"},
        {ISMRMRD_ACQ_IS_PHASECORR_DATA, "phase correction readouts"},
        {ISMRMRD_ACQ_IS_HPFEEDBACK_DATA, "HP feedback readouts"},
        {ISMRMRD_ACQ_IS_DUMMYSCAN_DATA, "dummy scans"},
        {ISMRMRD_ACQ_IS_RTFEEDBACK_DATA, "real-time feedback readouts"},
        {ISMRMRD_ACQ_IS_SURFACECOILCORRECTIONSCAN_DATA, "surface coil correction scans"},
        {ISMRMRD_ACQ_IS_PHASE_STABILIZATION_REFERENCE, "phase stabilisation references"},
        {ISMRMRD_ACQ_IS_PHASE_STABILIZATION, "phase stabilisation readouts"}};
    for (const auto& [flag, kind] : kinds)
        if (a.flag(flag)) return kind;
    return nullptr;
}

struct BufferKey {
    uint16_t encoding, slice, contrast, phase, repetition, set, average;
    bool operator==(const BufferKey& o) const {
        return encoding == o.encoding && slice == o.slice && contrast == o.contrast && phase == o.phase &&
               repetition == o.repetition && set == o.set && average == o.average;
    }
};

// The prewhitening matrix on the backend. NoiseAdjust hands every acquisition of a session the same
// matrix (one shared_ptr), so it goes up once per session, not once per buffer.
class MixMatrix {
public:
    const CArray& on(Backend& be, const std::shared_ptr<const std::vector<cfloat>>& m) {
        if (m != host_ && (!host_ || !m || *m != *host_)) {
            CArray h = CArray::host({m->size()});
            std::copy(m->begin(), m->end(), h.data());
            device_ = be.to_device(h);
            host_ = m;
        }
        return device_;
    }

private:
    std::shared_ptr<const std::vector<cfloat>> host_;
    CArray device_;
};

// One k-space buffer being filled. Readouts go to the session backend as they arrive, into a batch
// of kBatchLines slots; a full batch gets the pending line operations as a whole (readout FFT, crop
// to the centre half of the FOV, FFT back; then prewhitening, folded into the placement into the
// buffer by mix_place_lines). So on a GPU, when the last readout of a frame arrives only its batch
// and the reconstruction are left, and the line operations cost one batched FFT pair and one mixing
// pass per 16 readouts, not per readout.
class Buffer {
public:
    // Small enough that the last batch adds little latency, large enough that launches amortise.
    static constexpr size_t kBatchLines = 16;

    bool empty() const { return lines_ == 0; }

    void add(const Acquisition& a, const LineOps& ops, const EncodingGeometry& g, Backend& be, MixMatrix& mix) {
        const size_t ns = a.head.number_of_samples;
        const size_t ch = a.head.active_channels;
        if (empty()) init(a, ops, g, be, mix);
        if (ch != channels_)
            throw std::runtime_error("AccumulateTrigger: " + std::to_string(ch) +
                                     " channels, but earlier readouts of this buffer have " +
                                     std::to_string(channels_) + a.scan_text());
        if (ops.remove_ro_oversampling != ops_.remove_ro_oversampling || !same_mix(ops.coil_mix))
            throw std::runtime_error("AccumulateTrigger: the pending line operations (noise prewhitening, readout "
                                     "oversampling removal) changed within one buffer" + a.scan_text());
        if (ro_for(a, ops, g) != ro_)
            throw std::runtime_error("AccumulateTrigger: readout of " + std::to_string(ns) +
                                     " samples does not fit the buffer's readout length " + std::to_string(ro_) +
                                     a.scan_text());

        // Readout position (asymmetric echo: center_sample at RO/2).
        const int off = readout_offset(ro_, ns, a.head.center_sample);
        if (off < 0 || size_t(off) + ns > ro_)
            throw std::runtime_error("AccumulateTrigger: readout of " + std::to_string(ns) + " samples with center_sample " +
                                     std::to_string(a.head.center_sample) + " does not fit the readout length " +
                                     std::to_string(ro_) + a.scan_text());
        const size_t e1 = position(a.head.idx.kspace_encode_step_1, g.e1_min, g.e1_max, e1_offset(g), e1_,
                                   "kspace_encode_step_1", a);
        const size_t e2 = position(a.head.idx.kspace_encode_step_2, g.e2_min, g.e2_max, e2_offset(g), e2_,
                                   "kspace_encode_step_2", a);
        const size_t line = e2 * e1_ + e1;

        // A line twice in one batch (averages back to back) would be placed twice by one call.
        if (std::find(batch_lines_.begin(), batch_lines_.end(), line) != batch_lines_.end()) flush(be);
        // A short readout (asymmetric echo) fills only part of its slot: the rest must be zero.
        const bool partial = ns != ro_;
        if (partial && !batch_zero_) {
            flush(be);
            be.fill(batch_, cfloat(0.f, 0.f));
            batch_zero_ = true;
        }
        const size_t slot = batch_lines_.size();
        // Channel c of the readout -> batch_[off.., slot, c].
        be.upload_rows(a.data.data(), ns, ns, channels_, batch_, slot * ro_ + size_t(off), ro_ * kBatchLines);
        batch_lines_.push_back(line);
        note_line(a, g, line);
        if (batch_lines_.size() == kBatchLines) flush(be);
    }

    // Processes the last batch and hands the k-space over; `geometry` receives the buffer's geometry
    // (the encoded readout shrinks when oversampling was removed).
    KSpace take(Backend& be, EncodingGeometry& geometry) {
        flush(be);
        KSpace k;
        k.reference = reference_;
        k.sampled.resize(counts_.size());
        for (size_t i = 0; i < counts_.size(); ++i) k.sampled[i] = counts_[i] > 0 ? 1 : 0;
        if (ops_.remove_ro_oversampling) halve_readout_header(k.reference);
        if (ops_.coil_mix) k.reference.active_channels = uint16_t(data_.shape()[3]);
        geometry = geometry_;
        // The buffer's readout may be shorter than the header's encoded matrix (oversampling removed
        // here or upstream): the encoded FOV shrinks with it.
        const size_t ro_out = data_.shape()[0];
        if (ro_out != geometry.encoded_matrix[0]) {
            geometry.encoded_fov[0] *= float(ro_out) / float(geometry.encoded_matrix[0]);
            geometry.encoded_matrix[0] = uint16_t(ro_out);
        }
        k.data = data_;
        *this = Buffer{};
        return k;
    }

private:
    // Applies the pending line operations to the batch and places its lines. The whole batch is
    // transformed even when it is not full, so the FFT plans keep one shape; unused slots are not placed.
    void flush(Backend& be) {
        if (batch_lines_.empty()) return;
        const CArray* x = &batch_;
        if (ops_.remove_ro_oversampling) {
            be.fft(batch_, ro_image_, 1u, FFTDirection::Inverse);
            be.crop_pad_centred(ro_image_, half_image_);
            be.fft(half_image_, half_kspace_, 1u, FFTDirection::Forward);
            x = &half_kspace_;
        }
        std::vector<kernels::LinePlacement> where(batch_lines_.size());
        for (size_t k = 0; k < where.size(); ++k) {
            // Running mean over repeated acquisitions of a line: n-th copy weighs 1/n.
            const float n = float(counts_[batch_lines_[k]]);
            where[k] = {batch_lines_[k], (n - 1.0f) / n, 1.0f / n};
        }
        if (ops_.coil_mix)
            kernels::mix_place_lines(be, *x, mix_, where, data_);  // prewhitening on the way in
        else
            kernels::place_lines(be, *x, where, data_);
        batch_lines_.clear();
        batch_zero_ = false;  // the slots now hold the readouts just placed
    }

    // Bookkeeping of the lines and the representative header.
    void note_line(const Acquisition& a, const EncodingGeometry& g, size_t line) {
        ++counts_[line];
        ++lines_;
        // Representative header: the first readout, replaced by the k-space centre line when it comes.
        const bool centre = a.head.idx.kspace_encode_step_1 == g.e1_centre && a.head.idx.kspace_encode_step_2 == g.e2_centre;
        if (lines_ == 1 || (centre && !reference_is_centre_)) {
            reference_ = a.head;
            reference_is_centre_ = centre;
        }
    }

    // Readout length of the buffer a line belongs in: the encoded matrix x, or half of it when the
    // header says the readout is oversampled and a line-wise gadget upstream already removed the
    // oversampling (no pending request; the line is no longer than half the matrix, which a raw
    // readout never is: even an asymmetric echo keeps more than half of the samples).
    static size_t ro_for(const Acquisition& a, const LineOps& ops, const EncodingGeometry& g) {
        const size_t enc = g.encoded_matrix[0];
        const bool oversampled = g.encoded_matrix[0] != g.recon_matrix[0];
        if (oversampled && !ops.remove_ro_oversampling && a.head.number_of_samples <= enc / 2) return enc / 2;
        return enc;
    }

    void init(const Acquisition& a, const LineOps& ops, const EncodingGeometry& g, Backend& be, MixMatrix& mix) {
        channels_ = a.head.active_channels;
        ops_ = ops;
        geometry_ = g;
        ro_ = ro_for(a, ops, g);
        e1_ = g.encoded_matrix[1];
        e2_ = g.encoded_matrix[2];
        const size_t ro_out = ops_.remove_ro_oversampling ? ro_ / 2 : ro_;
        const size_t ch_out = ops_.coil_mix ? mixed_channels(ops_.coil_mix->size(), channels_) : channels_;
        data_ = be.zeros({ro_out, e1_, e2_, ch_out});  // unsampled lines stay zero
        batch_ = be.zeros({ro_, kBatchLines, channels_});
        // Workspaces of the line operations, for every batch of the buffer (no allocation per batch).
        if (ops_.remove_ro_oversampling) {
            ro_image_ = be.empty({ro_, kBatchLines, channels_});
            half_image_ = be.empty({ro_ / 2, kBatchLines, channels_});
            half_kspace_ = be.empty({ro_ / 2, kBatchLines, channels_});
        }
        if (ops_.coil_mix) mix_ = mix.on(be, ops_.coil_mix);
        batch_zero_ = true;
        counts_.assign(e1_ * e2_, 0);
    }

    bool same_mix(const std::shared_ptr<const std::vector<cfloat>>& m) const {
        if (m == ops_.coil_mix) return true;
        return m && ops_.coil_mix && *m == *ops_.coil_mix;
    }

    static size_t position(uint16_t step, uint16_t lo, uint16_t hi, int offset, size_t extent, const char* name,
                           const Acquisition& a) {
        if (step < lo || step > hi)
            throw std::runtime_error("AccumulateTrigger: " + std::string(name) + " " + std::to_string(step) +
                                     " is outside the encoding limits [" + std::to_string(lo) + ", " +
                                     std::to_string(hi) + "]" + a.scan_text());
        const int p = int(step) + offset;
        if (p < 0 || size_t(p) >= extent)
            throw std::runtime_error("AccumulateTrigger: " + std::string(name) + " " + std::to_string(step) +
                                     " lands at index " + std::to_string(p) + ", outside the encoded matrix of " +
                                     std::to_string(extent) + " (centre line at " + std::to_string(extent / 2) + ")" +
                                     a.scan_text());
        return size_t(p);
    }

    size_t ro_ = 0, e1_ = 0, e2_ = 0, channels_ = 0, lines_ = 0;
    EncodingGeometry geometry_;
    LineOps ops_;
    CArray data_;                    // [RO out, E1, E2, CH out] on the backend: the k-space buffer
    CArray batch_;                   // [RO, kBatchLines, CH] on the backend: readouts awaiting their line ops
    CArray ro_image_, half_image_, half_kspace_;  // readout oversampling removal of a batch
    CArray mix_;                     // the coil mixing matrix on the backend
    bool batch_zero_ = false;        // batch_ slots not yet written since zeroed
    std::vector<size_t> batch_lines_;  // buffer line of each filled slot
    std::vector<uint16_t> counts_;   // readouts acquired per (E1, E2) line
    ISMRMRD::ISMRMRD_AcquisitionHeader reference_{};
    bool reference_is_centre_ = false;
};

struct Slot {
    BufferKey key;
    Buffer imaging;
    Buffer calibration;
    uint64_t acquisitions = 0;  // used into this slot (ReconBuffer::acquisitions)
};

class AccumulateTriggerGadget final : public TypedGadget<Acquisition, PendingAcquisition> {
public:
    explicit AccumulateTriggerGadget(const config::AccumulateTrigger& cfg) : cfg_(cfg) {}

    bool cartesian_only() const override { return true; }

    // One k-space buffer of the declared matrix and channels; more are charged as they are opened.
    uint64_t working_set(const ISMRMRD::IsmrmrdHeader& h) const override { return declared_kspace_bytes(h); }

    void start(const SessionContext& ctx) override {
        header_ = ctx.header;
        backend_ = ctx.backend;
        session_ = ctx.session_id;
        ledger_ = ctx.ledger;
        if (!backend_) throw std::runtime_error("AccumulateTrigger: the session has no backend");
        const EncodingGeometry first = encoding_geometry(header_, 0);  // fail at start without an encoding
        geometries_.assign(ctx.header.encoding.size(), std::nullopt);
        geometries_[0] = first;
    }

    void process(Acquisition& a, Emitter& out) override { accumulate(a, LineOps{}, out); }

    // Taken as it is: the line operations are applied here in batches (see Buffer).
    void process(PendingAcquisition& p, Emitter& out) override { accumulate(p.acq, p.ops, out); }

    void finish(Emitter& out) override { emit_all(out); }

private:
    void accumulate(const Acquisition& a, const LineOps& ops, Emitter& out) {
        if (a.flag(ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT)) {
            ledger_->discarded("noise scans (no noise_adjust before the accumulator)", a);
            return;
        }

        const auto dim = cfg_.trigger();
        if (auto v = trigger_counter(a.head.idx, dim)) {
            if (last_counter_ && *last_counter_ != *v) emit_all(out);
            last_counter_ = v;
        }

        const char* special = special_kind(a);
        if (cfg_.keep_special_lines() || !special)
            add(a, ops);
        else
            ledger_->discarded(std::string(special) + " (not reconstructed; keep_special_lines is off)", a);

        if (dim == config::TRIGGER_AUTO) {
            if (a.flag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_REPETITION) || a.flag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_MEASUREMENT))
                emit_all(out);
            else if (a.flag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_SLICE))
                emit_key(key_of(a), out);
        }
    }

    const EncodingGeometry& geometry(size_t index) {
        if (index >= geometries_.size())
            throw std::runtime_error("AccumulateTrigger: encoding_space_ref " + std::to_string(index) +
                                     ", but the ISMRMRD header has " + std::to_string(geometries_.size()) +
                                     " encoding section(s)");
        if (!geometries_[index]) geometries_[index] = encoding_geometry(header_, index);
        return *geometries_[index];
    }

    BufferKey key_of(const Acquisition& a) const {
        const auto& i = a.head.idx;
        const uint16_t average = cfg_.trigger() == config::TRIGGER_AVERAGE ? i.average : 0;
        return {a.head.encoding_space_ref, i.slice, i.contrast, i.phase, i.repetition, i.set, average};
    }

    void add(const Acquisition& a, const LineOps& ops) {
        const EncodingGeometry& g = geometry(a.head.encoding_space_ref);
        const size_t ch = a.head.active_channels;
        if (ch == 0 || ch > wire::kMaxChannels)
            throw std::runtime_error("AccumulateTrigger: " + std::to_string(ch) + " active channels (1.." +
                                     std::to_string(wire::kMaxChannels) + " supported)" + a.scan_text());
        if (a.data.size() != ch * a.head.number_of_samples)
            throw std::runtime_error("AccumulateTrigger: " + std::to_string(a.data.size()) + " values of data for " +
                                     std::to_string(ch) + " channels x " + std::to_string(a.head.number_of_samples) +
                                     " samples" + a.scan_text());
        if (a.head.number_of_samples == 0 || a.head.number_of_samples > g.encoded_matrix[0])
            throw std::runtime_error("AccumulateTrigger: readout of " + std::to_string(a.head.number_of_samples) +
                                     " samples for an encoded matrix x of " + std::to_string(g.encoded_matrix[0]) +
                                     a.scan_text());

        const bool calibration = a.flag(ISMRMRD::ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION);
        const bool both = a.flag(ISMRMRD::ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION_AND_IMAGING);
        if (calibration && !cfg_.emit_calibration()) {  // calibration-only line, not wanted
            ledger_->discarded("calibration-only lines (the chain does not use them: emit_calibration is off)", a);
            return;
        }

        Slot& slot = slot_for(key_of(a));
        if (!calibration || both) slot.imaging.add(a, ops, g, *backend_, mix_);
        if (cfg_.emit_calibration() && (calibration || both)) slot.calibration.add(a, ops, g, *backend_, mix_);
        const bool as_calibration = cfg_.emit_calibration() && (calibration || both);
        ++slot.acquisitions;
        ledger_->used(as_calibration && (!calibration || both) ? "imaging and calibration"
                      : as_calibration                         ? "calibration"
                                                               : "imaging");
    }

    Slot& slot_for(const BufferKey& key) {
        for (Slot& s : slots_)
            if (s.key == key) return s;
        slots_.push_back(Slot{key, {}, {}, 0});
        return slots_.back();
    }

    // One recon buffer: the imaging data with its calibration lines.
    void emit_slot(Slot& s, Emitter& out) {
        spdlog::debug("[{}] AccumulateTrigger: buffer of slice {}, contrast {}, phase {}, repetition {}, set {}", session_,
                      s.key.slice, s.key.contrast, s.key.phase, s.key.repetition, s.key.set);
        if (s.imaging.empty() && s.calibration.empty()) return;
        ReconBuffer rb;
        EncodingGeometry g;
        if (!s.calibration.empty()) rb.ref = s.calibration.take(*backend_, g);
        if (!s.imaging.empty()) rb.data = s.imaging.take(*backend_, g);
        rb.geometry = g;
        rb.acquisitions = s.acquisitions;
        const auto& enc = header_.encoding.at(s.key.encoding);
        if (enc.parallelImaging) {
            rb.acceleration_e1 = std::max<uint16_t>(1, enc.parallelImaging->accelerationFactor.kspace_encoding_step_1);
            rb.acceleration_e2 = std::max<uint16_t>(1, enc.parallelImaging->accelerationFactor.kspace_encoding_step_2);
            if (enc.parallelImaging->calibrationMode) rb.calibration_mode = *enc.parallelImaging->calibrationMode;
        }
        out.emit(std::move(rb));
    }

    void emit_key(const BufferKey& key, Emitter& out) {
        for (auto it = slots_.begin(); it != slots_.end(); ++it)
            if (it->key == key) {
                Slot s = std::move(*it);
                slots_.erase(it);
                emit_slot(s, out);
                return;
            }
    }

    void emit_all(Emitter& out) {
        std::vector<Slot> slots = std::move(slots_);
        slots_.clear();
        for (Slot& s : slots) emit_slot(s, out);
    }

    config::AccumulateTrigger cfg_;
    ISMRMRD::IsmrmrdHeader header_;
    std::shared_ptr<Backend> backend_;
    std::shared_ptr<AcquisitionLedger> ledger_ = std::make_shared<AcquisitionLedger>();
    std::string session_;
    std::vector<std::optional<EncodingGeometry>> geometries_;
    std::vector<Slot> slots_;  // open buffers, in the order they were opened
    MixMatrix mix_;
    std::optional<uint16_t> last_counter_;
};

}  // namespace

std::unique_ptr<Gadget> make_accumulate_trigger(const config::AccumulateTrigger& cfg) {
    return std::make_unique<AccumulateTriggerGadget>(cfg);
}

}  // namespace larmor
