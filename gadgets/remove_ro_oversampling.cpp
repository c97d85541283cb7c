// RemoveROOversampling (Gadgetron's RemoveROOversamplingGadget). Only requests the operation: the
// readout goes on as a PendingAcquisition, the accumulator removes the oversampling on the whole
// buffer at once (one batched FFT along the readout, keep the centre half of the FOV, inverse FFT),
// and a gadget that takes plain acquisitions gets it materialised per line (gadgets/line_ops.h).
// Readouts are oversampled when the encoded matrix x differs from the reconstruction matrix x, the
// rule Gadgetron uses.
#include <spdlog/spdlog.h>

#include "gadgets/encoding.h"
#include "gadgets/factories.h"
#include "gadgets/typed_gadget.h"

namespace larmor {
namespace {

class RemoveROOversamplingGadget final : public TypedGadget<Acquisition, PendingAcquisition> {
public:
    void start(const SessionContext& ctx) override {
        const EncodingGeometry g = encoding_geometry(ctx.header);
        oversampled_ = g.encoded_matrix[0] != g.recon_matrix[0];
        if (!oversampled_)
            spdlog::info("[{}] RemoveROOversampling: encoded and reconstructed matrix x are both {}; nothing to do",
                         ctx.session_id, g.encoded_matrix[0]);
    }

    void process(Acquisition& acq, Emitter& out) override {
        if (!applies_to(acq)) return out.emit(std::move(acq));
        PendingAcquisition pending{std::move(acq), {}};
        pending.ops.remove_ro_oversampling = true;
        out.emit(std::move(pending));
    }

    // Joins what an earlier gadget (noise prewhitening) requested; nothing is applied here.
    void process(PendingAcquisition& p, Emitter& out) override {
        if (applies_to(p.acq)) p.ops.remove_ro_oversampling = true;
        out.emit(std::move(p));
    }

private:
    bool applies_to(const Acquisition& acq) const {
        return oversampled_ && !acq.flag(ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT);
    }

    bool oversampled_ = false;
};

}  // namespace

std::unique_ptr<Gadget> make_remove_ro_oversampling(const config::RemoveROOversampling& cfg) {
    (void)cfg;
    return std::make_unique<RemoveROOversamplingGadget>();
}

}  // namespace larmor
