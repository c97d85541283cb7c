// Counts what the stream carried and reports it to the client as TEXT at the end of the session:
// lets a test (or a site engineer) check that every acquisition sent reached the chain.
#include <cstdint>
#include <sstream>

#include "gadgets/factories.h"

namespace larmor {
namespace {
constexpr int kNoiseFlag = 19;  // ISMRMRD ACQ_IS_NOISE_MEASUREMENT

class AcquisitionCounter final : public Gadget {
public:
    explicit AcquisitionCounter(bool pass_on) : pass_on_(pass_on) {}

    void process(Message msg, Emitter& out) override {
        if (auto* acq = std::get_if<Acquisition>(&msg)) {
            ++acquisitions_;
            if (acq->flag(kNoiseFlag)) ++noise_;
            samples_ += uint64_t{acq->head.number_of_samples} * acq->head.active_channels;
            bytes_ += acq->data.size() * sizeof(cfloat) + acq->traj.size() * sizeof(float);
            if (!pass_on_) return;
        } else if (auto* wav = std::get_if<Waveform>(&msg)) {
            ++waveforms_;
            bytes_ += wav->data.size() * sizeof(uint32_t);
            if (!pass_on_) return;
        } else {
            ++other_;
        }
        out.emit(std::move(msg));
    }

    void finish(Emitter& out) override {
        std::ostringstream s;
        s << "AcquisitionCounter: " << acquisitions_ << " acquisitions (" << noise_ << " noise), " << waveforms_
          << " waveforms, " << samples_ << " complex samples, " << bytes_ << " payload bytes, " << other_
          << " other messages";
        out.emit(Text{s.str()});
    }

private:
    bool pass_on_;
    uint64_t acquisitions_ = 0, noise_ = 0, waveforms_ = 0, samples_ = 0, bytes_ = 0, other_ = 0;
};
}  // namespace

std::unique_ptr<Gadget> make_acquisition_counter(const config::AcquisitionCounter& cfg) {
    return std::make_unique<AcquisitionCounter>(cfg.pass_on());
}

}  // namespace larmor
