// AccumulateTrigger (Gadgetron's AccumulatorGadget / AcquisitionAccumulateTriggerGadget +
// BucketToBufferGadget): places Cartesian readouts into [RO, E1, E2, CH] k-space buffers, one per
// (encoding space, slice, contrast, phase, repetition, set[, average]), and emits a KSpaceBuffer when
// a trigger fires.
//
// Placement: line kspace_encode_step_1 goes to index step + E1/2 - centre (encodingLimits centre), so
// the k-space centre sits at E1/2 as the centred FFT expects and partial Fourier is zero-filled on the
// unsampled side; E2 likewise. An asymmetric echo is placed so that center_sample lands at RO/2.
// Repeated readouts of the same line (averages, unless average is the trigger dimension) are averaged.
//
// Pending line operations (noise prewhitening, readout oversampling removal) are applied once per
// buffer on the session backend after the upload: one batched FFT pair and one GEMM instead of one
// per readout.
#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "gadgets/encoding.h"
#include "gadgets/factories.h"
#include "gadgets/line_ops.h"

namespace larmor {
namespace {

constexpr size_t kMaxChannels = 1024;

bool is_special(const Acquisition& a) {
    using namespace ISMRMRD;
    for (int f : {ISMRMRD_ACQ_IS_NAVIGATION_DATA, ISMRMRD_ACQ_IS_PHASECORR_DATA, ISMRMRD_ACQ_IS_HPFEEDBACK_DATA,
                  ISMRMRD_ACQ_IS_DUMMYSCAN_DATA, ISMRMRD_ACQ_IS_RTFEEDBACK_DATA,
                  ISMRMRD_ACQ_IS_SURFACECOILCORRECTIONSCAN_DATA, ISMRMRD_ACQ_IS_PHASE_STABILIZATION_REFERENCE,
                  ISMRMRD_ACQ_IS_PHASE_STABILIZATION})
        if (a.flag(f)) return true;
    return false;
}

std::string scan(const Acquisition& a) { return " (acquisition scan_counter " + std::to_string(a.head.scan_counter) + ")"; }

struct BufferKey {
    uint16_t encoding, slice, contrast, phase, repetition, set, average;
    bool operator==(const BufferKey& o) const {
        return encoding == o.encoding && slice == o.slice && contrast == o.contrast && phase == o.phase &&
               repetition == o.repetition && set == o.set && average == o.average;
    }
};

// Value of the loop counter a TriggerDimension watches.
std::optional<uint16_t> counter(const ISMRMRD::ISMRMRD_EncodingCounters& idx, config::TriggerDimension d) {
    switch (d) {
        case config::TRIGGER_SLICE: return idx.slice;
        case config::TRIGGER_CONTRAST: return idx.contrast;
        case config::TRIGGER_PHASE: return idx.phase;
        case config::TRIGGER_REPETITION: return idx.repetition;
        case config::TRIGGER_SET: return idx.set;
        case config::TRIGGER_AVERAGE: return idx.average;
        default: return std::nullopt;
    }
}

// Host staging arrays whose contents were copied to the device (CUDA): page-locked allocations are
// slow (cudaHostAlloc), so they are kept for the next buffer of the same shape instead of freed.
// Backend::to_device returns once the host memory has been read (the CUDA backend waits for the copy),
// so a returned array may be refilled at once. On the CPU backend the uploaded array is the staging
// array itself and nothing comes back here.
class StagingPool {
public:
    CArray get(Backend& be, const Shape& shape) {
        for (auto it = spare_.begin(); it != spare_.end(); ++it) {
            if (it->shape() != shape) continue;
            CArray a = *it;  // not cleared: Buffer writes every element before the upload
            spare_.erase(it);
            return a;
        }
        return be.host_staging(shape);
    }
    void put(CArray a) {
        if (spare_.size() == kMaxSpare) spare_.erase(spare_.begin());
        spare_.push_back(std::move(a));
    }

private:
    static constexpr size_t kMaxSpare = 4;
    std::vector<CArray> spare_;
};

// One k-space buffer being filled on the host.
class Buffer {
public:
    bool empty() const { return lines_ == 0; }

    void add(const Acquisition& a, const EncodingGeometry& g, Backend& be, StagingPool& pool) {
        const size_t ns = a.head.number_of_samples;
        const size_t ch = a.head.active_channels;
        if (empty()) init(a, g, be, pool);
        if (ch != channels_)
            throw std::runtime_error("AccumulateTrigger: " + std::to_string(ch) +
                                     " channels, but earlier readouts of this buffer have " +
                                     std::to_string(channels_) + scan(a));
        if (a.pending.remove_ro_oversampling != ops_.remove_ro_oversampling || !same_mix(a.pending.coil_mix))
            throw std::runtime_error("AccumulateTrigger: the pending line operations (noise prewhitening, readout "
                                     "oversampling removal) changed within one buffer" + scan(a));
        if (ro_for(a, g) != ro_)
            throw std::runtime_error("AccumulateTrigger: readout of " + std::to_string(ns) +
                                     " samples does not fit the buffer's readout length " + std::to_string(ro_) +
                                     scan(a));

        // Readout position (asymmetric echo: center_sample at RO/2).
        const int off = readout_offset(ro_, ns, a.head.center_sample);
        if (off < 0 || size_t(off) + ns > ro_)
            throw std::runtime_error("AccumulateTrigger: readout of " + std::to_string(ns) + " samples with center_sample " +
                                     std::to_string(a.head.center_sample) + " does not fit the readout length " +
                                     std::to_string(ro_) + scan(a));
        const size_t e1 = position(a.head.idx.kspace_encode_step_1, g.e1_min, g.e1_max, e1_offset(g), e1_,
                                   "kspace_encode_step_1", a);
        const size_t e2 = position(a.head.idx.kspace_encode_step_2, g.e2_min, g.e2_max, e2_offset(g), e2_,
                                   "kspace_encode_step_2", a);

        const size_t line = e2 * e1_ + e1;
        const size_t plane = ro_ * e1_ * e2_;
        if (streaming_ && counts_[line] != 0) leave_streaming(be, pool);  // a repeat: average on the host
        if (streaming_) {
            // One row per channel, straight from the readout into the zeroed device buffer.
            be.upload_rows(a.data.data(), ns, ns, channels_, device_, line * ro_ + size_t(off), plane);
            note_line(a, g, line);
            return;
        }
        cfloat* dst = staging_.data();
        for (size_t c = 0; c < channels_; ++c) {
            cfloat* row = dst + c * plane + line * ro_;
            const cfloat* in = a.data.data() + c * ns;
            if (counts_[line] == 0) {
                // First readout of this line: it defines the whole row (zeros outside an asymmetric echo).
                std::fill(row, row + off, cfloat(0));
                std::copy(in, in + ns, row + off);
                std::fill(row + off + ns, row + ro_, cfloat(0));
            } else {
                for (size_t s = 0; s < ns; ++s) row[size_t(off) + s] += in[s];
            }
        }
        note_line(a, g, line);
    }

    // Uploads, applies the pending operations on the backend and hands the buffer over.
    KSpaceBuffer take(Backend& be, bool calibration_only, StagingPool& pool) {
        KSpaceBuffer kb;
        kb.geometry = geometry_;
        kb.reference = reference_;
        kb.calibration_only = calibration_only;
        kb.sampled.resize(counts_.size());
        for (size_t i = 0; i < counts_.size(); ++i) kb.sampled[i] = counts_[i] > 0 ? 1 : 0;
        CArray x = streaming_ ? device_ : upload_staging(be, pool);
        return finish_buffer(be, std::move(kb), std::move(x));
    }

private:
    CArray upload_staging(Backend& be, StagingPool& pool) {
        // Unsampled lines are zero (the staging array may be a recycled one); repeated readouts of a
        // line are averaged.
        const size_t plane = ro_ * e1_ * e2_;
        for (size_t line = 0; line < counts_.size(); ++line) {
            if (counts_[line] == 1) continue;
            const float scale = counts_[line] == 0 ? 0.0f : 1.0f / float(counts_[line]);
            for (size_t c = 0; c < channels_; ++c) {
                cfloat* p = staging_.data() + c * plane + line * ro_;
                if (scale == 0.0f)
                    std::fill(p, p + ro_, cfloat(0));
                else
                    for (size_t s = 0; s < ro_; ++s) p[s] *= scale;
            }
        }
        CArray x = be.to_device(staging_);
        if (x.storage() != staging_.storage() && staging_.pinned()) pool.put(staging_);
        return x;
    }

    // Applies the pending line operations to the whole buffer on the backend.
    KSpaceBuffer finish_buffer(Backend& be, KSpaceBuffer kb, CArray x) {
        if (ops_.remove_ro_oversampling) {
            // Readout to image space, keep the centre half of the FOV, back to k-space.
            be.fft(x, 1u, FFTDirection::Inverse);
            CArray y = be.empty({ro_ / 2, e1_, e2_, channels_});
            be.crop_pad_centred(x, y);
            be.fft(y, 1u, FFTDirection::Forward);
            x = y;
            halve_readout_header(kb.reference);
        }
        if (ops_.coil_mix) {
            const size_t out_channels = mixed_channels(ops_.coil_mix->size(), channels_);
            CArray y = be.empty({x.shape()[0], e1_, e2_, out_channels});
            be.mix_last_axis(x, *ops_.coil_mix, y);
            x = y;
            kb.reference.active_channels = uint16_t(out_channels);
        }
        // The buffer's readout may be shorter than the header's encoded matrix (oversampling removed
        // here or upstream): the encoded FOV shrinks with it.
        const size_t ro_out = x.shape()[0];
        if (ro_out != kb.geometry.encoded_matrix[0]) {
            kb.geometry.encoded_fov[0] *= float(ro_out) / float(kb.geometry.encoded_matrix[0]);
            kb.geometry.encoded_matrix[0] = uint16_t(ro_out);
        }
        kb.data = x;
        *this = Buffer{};
        return kb;
    }

    // Bookkeeping shared by the streaming and host paths.
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

    // A line came twice (averages summed into one buffer): bring what was streamed back to the
    // host and continue there, where repeated lines are summed and averaged.
    void leave_streaming(Backend& be, StagingPool& pool) {
        staging_ = pool.get(be, device_.shape());
        CArray streamed = be.to_host(device_);
        std::copy(streamed.data(), streamed.data() + streamed.size(), staging_.data());
        device_ = CArray();
        streaming_ = false;
    }

    // Readout length of the buffer a line belongs in: the encoded matrix x, or half of it when the
    // header says the readout is oversampled and a line-wise gadget upstream already removed the
    // oversampling (no pending request; the line is no longer than half the matrix, which a raw
    // readout never is: even an asymmetric echo keeps more than half of the samples).
    static size_t ro_for(const Acquisition& a, const EncodingGeometry& g) {
        const size_t enc = g.encoded_matrix[0];
        const bool oversampled = g.encoded_matrix[0] != g.recon_matrix[0];
        if (oversampled && !a.pending.remove_ro_oversampling && a.head.number_of_samples <= enc / 2) return enc / 2;
        return enc;
    }

    void init(const Acquisition& a, const EncodingGeometry& g, Backend& be, StagingPool& pool) {
        channels_ = a.head.active_channels;
        ops_ = a.pending;
        geometry_ = g;
        ro_ = ro_for(a, g);
        e1_ = g.encoded_matrix[1];
        e2_ = g.encoded_matrix[2];
        // On a GPU, readouts go straight to a zeroed device buffer as they arrive (upload_rows);
        // on the CPU the host buffer is the reconstruction buffer.
        streaming_ = be.device() != Device::Cpu;
        if (streaming_)
            device_ = be.zeros({ro_, e1_, e2_, channels_});
        else
            staging_ = pool.get(be, {ro_, e1_, e2_, channels_});
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
                                     std::to_string(hi) + "]" + scan(a));
        const int p = int(step) + offset;
        if (p < 0 || size_t(p) >= extent)
            throw std::runtime_error("AccumulateTrigger: " + std::string(name) + " " + std::to_string(step) +
                                     " lands at index " + std::to_string(p) + ", outside the encoded matrix of " +
                                     std::to_string(extent) + " (centre line at " + std::to_string(extent / 2) + ")" +
                                     scan(a));
        return size_t(p);
    }

    size_t ro_ = 0, e1_ = 0, e2_ = 0, channels_ = 0, lines_ = 0;
    EncodingGeometry geometry_;
    PendingLineOps ops_;
    CArray staging_;               // [RO, E1, E2, CH] on the host (host path)
    CArray device_;                // [RO, E1, E2, CH] on the device (streaming path)
    bool streaming_ = false;
    std::vector<uint16_t> counts_; // readouts summed per (E1, E2) line
    ISMRMRD::ISMRMRD_AcquisitionHeader reference_{};
    bool reference_is_centre_ = false;
};

struct Slot {
    BufferKey key;
    Buffer imaging;
    Buffer calibration;
};

class AccumulateTriggerGadget final : public Gadget {
public:
    explicit AccumulateTriggerGadget(const config::AccumulateTrigger& cfg) : cfg_(cfg) {}

    void start(const SessionContext& ctx) override {
        header_ = ctx.header;
        backend_ = ctx.backend;
        session_ = ctx.session_id;
        if (!backend_) throw std::runtime_error("AccumulateTrigger: the session has no backend");
        const EncodingGeometry first = encoding_geometry(header_, 0);  // fail at start without an encoding
        geometries_.assign(ctx.header.encoding.size(), std::nullopt);
        geometries_[0] = first;
    }

    bool handles_pending_line_ops() const override { return true; }

    void process(Message msg, Emitter& out) override {
        auto* a = std::get_if<Acquisition>(&msg);
        if (!a) return out.emit(std::move(msg));
        if (a->flag(ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT)) return;

        const auto dim = cfg_.trigger();
        if (auto v = counter(a->head.idx, dim)) {
            if (last_counter_ && *last_counter_ != *v) emit_all(out);
            last_counter_ = v;
        }

        if (cfg_.keep_special_lines() || !is_special(*a)) add(*a);

        if (dim == config::TRIGGER_AUTO) {
            if (a->flag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_REPETITION) || a->flag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_MEASUREMENT))
                emit_all(out);
            else if (a->flag(ISMRMRD::ISMRMRD_ACQ_LAST_IN_SLICE))
                emit_key(key_of(*a), out);
        }
    }

    void finish(Emitter& out) override { emit_all(out); }

private:
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

    void add(const Acquisition& a) {
        const EncodingGeometry& g = geometry(a.head.encoding_space_ref);
        const size_t ch = a.head.active_channels;
        if (ch == 0 || ch > kMaxChannels)
            throw std::runtime_error("AccumulateTrigger: " + std::to_string(ch) + " active channels (1.." +
                                     std::to_string(kMaxChannels) + " supported)" + scan(a));
        if (a.data.size() != ch * a.head.number_of_samples)
            throw std::runtime_error("AccumulateTrigger: " + std::to_string(a.data.size()) + " values of data for " +
                                     std::to_string(ch) + " channels x " + std::to_string(a.head.number_of_samples) +
                                     " samples" + scan(a));
        if (a.head.number_of_samples == 0 || a.head.number_of_samples > g.encoded_matrix[0])
            throw std::runtime_error("AccumulateTrigger: readout of " + std::to_string(a.head.number_of_samples) +
                                     " samples for an encoded matrix x of " + std::to_string(g.encoded_matrix[0]) +
                                     scan(a));

        const bool calibration = a.flag(ISMRMRD::ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION);
        const bool both = a.flag(ISMRMRD::ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION_AND_IMAGING);
        if (calibration && !cfg_.emit_calibration()) return;  // calibration-only line, not wanted

        Slot& slot = slot_for(key_of(a));
        if (!calibration || both) slot.imaging.add(a, g, *backend_, pool_);
        if (cfg_.emit_calibration() && (calibration || both)) slot.calibration.add(a, g, *backend_, pool_);
    }

    Slot& slot_for(const BufferKey& key) {
        for (Slot& s : slots_)
            if (s.key == key) return s;
        slots_.push_back(Slot{key, {}, {}});
        return slots_.back();
    }

    // Calibration first: a parallel-imaging reconstruction downstream needs it before the data.
    void emit_slot(Slot& s, Emitter& out) {
        spdlog::debug("[{}] AccumulateTrigger: buffer of slice {}, contrast {}, phase {}, repetition {}, set {}", session_,
                      s.key.slice, s.key.contrast, s.key.phase, s.key.repetition, s.key.set);
        if (!s.calibration.empty()) out.emit(s.calibration.take(*backend_, true, pool_));
        if (!s.imaging.empty()) out.emit(s.imaging.take(*backend_, false, pool_));
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
    std::string session_;
    std::vector<std::optional<EncodingGeometry>> geometries_;
    std::vector<Slot> slots_;  // open buffers, in the order they were opened
    StagingPool pool_;
    std::optional<uint16_t> last_counter_;
};

}  // namespace

std::unique_ptr<Gadget> make_accumulate_trigger(const config::AccumulateTrigger& cfg) {
    return std::make_unique<AccumulateTriggerGadget>(cfg);
}

}  // namespace larmor
