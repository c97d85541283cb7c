// RemoveROOversampling (Gadgetron's RemoveROOversamplingGadget). Only requests the operation: the
// accumulator removes the oversampling on the whole buffer at once (one batched FFT along the
// readout, keep the centre half of the FOV, inverse FFT), and any other consumer materialises it
// per line (gadgets/line_ops.h). Readouts are oversampled when the encoded matrix x differs from the
// reconstruction matrix x, the rule Gadgetron uses.
#include <spdlog/spdlog.h>

#include "gadgets/encoding.h"
#include "gadgets/factories.h"

namespace larmor {
namespace {

class RemoveROOversamplingGadget final : public Gadget {
public:
    void start(const SessionContext& ctx) override {
        const EncodingGeometry g = encoding_geometry(ctx.header);
        oversampled_ = g.encoded_matrix[0] != g.recon_matrix[0];
        if (!oversampled_)
            spdlog::info("[{}] RemoveROOversampling: encoded and reconstructed matrix x are both {}; nothing to do",
                         ctx.session_id, g.encoded_matrix[0]);
    }

    void process(Message msg, Emitter& out) override {
        if (oversampled_) {
            if (auto* acq = std::get_if<Acquisition>(&msg);
                acq && !acq->flag(ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT))
                acq->pending.remove_ro_oversampling = true;
        }
        out.emit(std::move(msg));
    }

    // Only sets a flag; must not make the runner materialise what NoiseAdjust requested.
    bool handles_pending_line_ops() const override { return true; }

private:
    bool oversampled_ = false;
};

}  // namespace

std::unique_ptr<Gadget> make_remove_ro_oversampling(const config::RemoveROOversampling& cfg) {
    (void)cfg;
    return std::make_unique<RemoveROOversamplingGadget>();
}

}  // namespace larmor
