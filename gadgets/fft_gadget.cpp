// FFT (Gadgetron's FFTGadget): k-space buffer to one complex image per coil. Inverse centred FFT over
// x, y (and z for 3D encodings) on the session backend, then a centred crop to the reconstruction
// field of view: x to the reconstruction matrix (this also removes readout oversampling when no
// RemoveROOversampling ran), y and z by reconstruction FOV / encoded FOV (phase / slice
// oversampling), as Gadgetron's generic Cartesian chain does. A reconstruction matrix that differs
// from the cropped extent (interpolated reconstructions) is reached by zero-padding k-space.
#include <cmath>
#include <stdexcept>
#include <string>

#include "gadgets/factories.h"
#include "gadgets/image_header.h"

namespace larmor {
namespace {

// Extent of the reconstructed image along y or z: the encoded extent scaled by the FOV ratio.
size_t cropped_extent(size_t encoded, float encoded_fov, float recon_fov, size_t recon_matrix) {
    if (encoded <= 1) return encoded;
    if (encoded_fov > 0 && recon_fov > 0) {
        const size_t n = size_t(std::lround(double(encoded) * double(recon_fov) / double(encoded_fov)));
        return std::max<size_t>(1, n);
    }
    return std::min(encoded, recon_matrix);  // header without FOVs: trust the matrix
}

class FFTGadget final : public Gadget {
public:
    void start(const SessionContext& ctx) override {
        backend_ = ctx.backend;
        if (!backend_) throw std::runtime_error("FFT: the session has no backend");
    }

    void process(Message msg, Emitter& out) override {
        auto* kb = std::get_if<KSpaceBuffer>(&msg);
        if (!kb) return out.emit(std::move(msg));
        const Shape& s = kb->data.shape();
        if (s.rank() != 4)
            throw std::runtime_error("FFT: k-space buffer of shape " + s.str() + ", expected [RO, E1, E2, CH]");
        const EncodingGeometry& g = kb->geometry;
        const size_t e2 = s[2];
        backend_->fft(kb->data, e2 > 1 ? 0b111u : 0b011u, FFTDirection::Inverse);

        // Field of view first (image-domain crop), then the matrix: when the reconstruction matrix
        // differs from the cropped extent (interpolation), resample by zero-padding / cropping k-space.
        const Shape fov_shape{g.recon_matrix[0],
                              cropped_extent(s[1], g.encoded_fov[1], g.recon_fov[1], g.recon_matrix[1]),
                              cropped_extent(e2, g.encoded_fov[2], g.recon_fov[2], g.recon_matrix[2]), s[3]};
        const Shape image_shape{g.recon_matrix[0], g.recon_matrix[1], e2 > 1 ? g.recon_matrix[2] : e2, s[3]};
        ImageArray img;
        img.data = crop(kb->data, fov_shape);
        if (image_shape != fov_shape) {
            const AxisMask axes = e2 > 1 ? 0b110u : 0b010u;
            backend_->fft(img.data, axes, FFTDirection::Forward);
            img.data = crop(img.data, image_shape);
            backend_->fft(img.data, axes, FFTDirection::Inverse);
        }
        uint16_t& counter = kb->calibration_only ? calibration_index_ : image_index_;
        img.head = image_header_from(kb->reference, g, image_shape, ++counter);

        ISMRMRD::MetaContainer& meta = img.meta;
        meta.set(kMetaDataRole, "Image");
        meta.set(kMetaGadgetronDataRole, "Image");
        if (kb->calibration_only) {
            meta.set(kMetaCalibration, 1L);
            meta.set("ImageComment", "ACS");
        }
        append_processing_history(meta, "FFT");
        out.emit(std::move(img));
    }

private:
    CArray crop(const CArray& x, const Shape& shape) {
        if (x.shape() == shape) return x;
        CArray y = backend_->empty(shape);
        backend_->crop_pad_centred(x, y);
        return y;
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
