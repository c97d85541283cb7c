// FFT (Gadgetron's FFTGadget): a recon buffer to one complex image per coil. Inverse centred FFT over
// x, y (and z for 3D encodings) on the session backend, then to the reconstruction grid
// (gadgets/recon_grid.h). The buffer's calibration lines, when it carries them, become an image of
// their own (marked calibration-only, its own image series), before the data's.
#include <stdexcept>
#include <string>

#include "gadgets/encoding.h"
#include "gadgets/factories.h"
#include "gadgets/image_header.h"
#include "gadgets/recon_grid.h"
#include "gadgets/typed_gadget.h"

namespace larmor {
namespace {

class FFTGadget final : public TypedGadget<ReconBuffer> {
public:
    // The coil images of one buffer.
    uint64_t working_set(const ISMRMRD::IsmrmrdHeader& h) const override { return declared_kspace_bytes(h); }

    void start(const SessionContext& ctx) override {
        backend_ = ctx.backend;
        if (!backend_) throw std::runtime_error("FFT: the session has no backend");
    }

    void process(ReconBuffer& rb, Emitter& out) override {
        // The buffer's acquisitions reach an image with the data's image (the calibration image's when
        // the buffer holds calibration lines only).
        if (!rb.ref.empty()) reconstruct(rb.ref, rb.geometry, true, rb.data.empty() ? rb.acquisitions : 0, out);
        if (!rb.data.empty()) reconstruct(rb.data, rb.geometry, false, rb.acquisitions, out);
    }

private:
    void reconstruct(const KSpace& k, const EncodingGeometry& g, bool calibration, uint64_t acquisitions,
                     Emitter& out) {
        const Shape& s = k.data.shape();
        if (s.rank() != 4)
            throw std::runtime_error("FFT: k-space buffer of shape " + s.str() + ", expected [RO, E1, E2, CH]");
        CArray coils = backend_->empty(s);
        backend_->fft(k.data, coils, s[2] > 1 ? 0b111u : 0b011u, FFTDirection::Inverse);
        ImageArray img;
        img.acquisitions = acquisitions;
        img.data = to_recon_grid(*backend_, coils, g);
        uint16_t& counter = calibration ? calibration_index_ : image_index_;
        img.head = image_header_from(k.reference, g, img.data.shape(), ++counter);

        ISMRMRD::MetaContainer& meta = img.meta;
        meta.set(kMetaDataRole, "Image");
        meta.set(kMetaGadgetronDataRole, "Image");
        if (calibration) {
            meta.set(kMetaCalibration, 1L);
            meta.set("ImageComment", "ACS");
        }
        append_processing_history(meta, "FFT");
        out.emit(std::move(img));
    }

    std::shared_ptr<Backend> backend_;
    uint16_t image_index_ = 0;        // image_index of the images of this session, from 1
    uint16_t calibration_index_ = 0;  // same, for calibration-only images
};

}  // namespace

std::unique_ptr<Gadget> make_fft(const config::FFT& cfg) {
    (void)cfg;
    return std::make_unique<FFTGadget>();
}

}  // namespace larmor
