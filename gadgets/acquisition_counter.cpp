// Counts what the stream carried and reports it to the client as TEXT at the end of the session:
// lets a test (or a site engineer) check that every acquisition sent reached the chain.
#include <cstdint>
#include <sstream>

#include "gadgets/factories.h"
#include "gadgets/typed_gadget.h"

namespace larmor {
namespace {
constexpr int kNoiseFlag = 19;  // ISMRMRD ACQ_IS_NOISE_MEASUREMENT

class AcquisitionCounter final : public TypedGadget<Acquisition, Waveform> {
public:
    explicit AcquisitionCounter(bool forward) : forward_(forward) {}

    void start(const SessionContext& ctx) override { ledger_ = ctx.ledger; }

    void process(Acquisition& acq, Emitter& out) override {
        ++acquisitions_;
        if (acq.flag(kNoiseFlag)) ++noise_;
        samples_ += uint64_t{acq.head.number_of_samples} * acq.head.active_channels;
        bytes_ += acq.data.size() * sizeof(cfloat) + acq.traj.size() * sizeof(float);
        if (forward_) return out.emit(std::move(acq));
        ledger_->used("counted");
    }

    void process(Waveform& wav, Emitter& out) override {
        ++waveforms_;
        bytes_ += wav.data.size() * sizeof(uint32_t);
        if (forward_) out.emit(std::move(wav));
    }

    void finish(Emitter& out) override {
        std::ostringstream s;
        s << "AcquisitionCounter: " << acquisitions_ << " acquisitions (" << noise_ << " noise), " << waveforms_
          << " waveforms, " << samples_ << " complex samples, " << bytes_ << " payload bytes, " << other_
          << " other messages";
        out.emit(Text{s.str()});
    }

private:
    void pass_on(Message& msg, Emitter& out) override {
        ++other_;
        forward(msg, out);
    }

    std::shared_ptr<AcquisitionLedger> ledger_ = std::make_shared<AcquisitionLedger>();
    bool forward_;  // acquisitions and waveforms go on downstream (config pass_on)
    uint64_t acquisitions_ = 0, noise_ = 0, waveforms_ = 0, samples_ = 0, bytes_ = 0, other_ = 0;
};
}  // namespace

std::unique_ptr<Gadget> make_acquisition_counter(const config::AcquisitionCounter& cfg) {
    return std::make_unique<AcquisitionCounter>(cfg.pass_on());
}

}  // namespace larmor
