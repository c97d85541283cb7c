// RadialFbp: filtered backprojection of 2D radial spokes (core/recon/radial_fbp.h; Schiwietz et al.,
// SPIE 2006). Per trajectory buffer: the spokes' angles, sample spacing and offsets from k = 0 come
// from the trajectory (checked to be straight lines through or beside the centre; off-centre spokes
// are corrected by the Fourier shift), coil images [X, Y, 1, C] go on to coil_combine.
// The reconstruction object keeps its filter and workspace, and is rebuilt only when the trajectory
// changes (hash of the coordinates).
#include <chrono>
#include <stdexcept>
#include <string>

#include <spdlog/spdlog.h>

#include "core/recon/radial_fbp.h"
#include "core/trajectory/trajectory.h"
#include "gadgets/chain_config.h"
#include "gadgets/encoding.h"
#include "gadgets/factories.h"
#include "gadgets/image_header.h"
#include "gadgets/typed_gadget.h"

namespace larmor {
namespace {

RampWindow window_of(config::RampWindow w) {
    switch (w) {
        case config::RAMP_SHEPP_LOGAN: return RampWindow::SheppLogan;
        case config::RAMP_HANN: return RampWindow::Hann;
        default: return RampWindow::RamLak;
    }
}

const char* window_name(config::RampWindow w) {
    switch (w) {
        case config::RAMP_SHEPP_LOGAN: return "Shepp-Logan";
        case config::RAMP_HANN: return "Hann";
        default: return "Ram-Lak";
    }
}

class RadialFbpGadget final : public TypedGadget<TrajectoryBuffer> {
public:
    explicit RadialFbpGadget(const config::RadialFbp& cfg) : cfg_(cfg) {}

    // Filtered spokes and coil images: about two k-space buffers of the declared size.
    uint64_t working_set(const ISMRMRD::IsmrmrdHeader& h) const override { return declared_kspace_bytes(h, 3); }

    void start(const SessionContext& ctx) override {
        backend_ = ctx.backend;
        session_ = ctx.session_id;
        chain_ = ctx.chain_name;
        if (!backend_) throw std::runtime_error("RadialFbp: the session has no backend");
    }

    void process(TrajectoryBuffer& tb, Emitter& out) override {
        const auto t0 = std::chrono::steady_clock::now();
        if (tb.image.rank() != 2 || tb.coords.shape()[0] != 2)
            throw std::runtime_error("RadialFbp: filtered backprojection needs a 2D radial trajectory; this buffer's "
                                     "image is " + tb.image.str() + " with " +
                                     std::to_string(tb.coords.shape()[0]) + "D coordinates");
        const Shape& ds = tb.data.shape();  // [S, R, C]
        const uint64_t hash = trajectory::trajectory_hash(tb.coords, tb.image);
        if (!fbp_ || hash != hash_ || ds != data_shape_) {
            RadialFbpOptions opts;
            opts.window = window_of(cfg_.window());
            fbp_ = RadialFbp::create(backend_, tb.image, ds[0], ds[1], ds[2], tb.coords, opts);
            hash_ = hash;
            data_shape_ = ds;
        }
        CArray coil_images = backend_->empty({tb.image[0], tb.image[1], ds[2]});
        fbp_->reconstruct(tb.data, coil_images);

        ImageArray img;
        img.acquisitions = tb.acquisitions;
        img.data = coil_images.reshaped({tb.image[0], tb.image[1], 1, ds[2]});
        img.head = image_header_from(tb.reference, tb.geometry, img.data.shape(), ++image_index_);
        ISMRMRD::MetaContainer& meta = img.meta;
        meta.set(kMetaDataRole, "Image");
        meta.set(kMetaGadgetronDataRole, "Image");
        append_processing_history(meta, "RADIAL_FBP");
        meta.set("LarmorChain", chain_.c_str());
        meta.set("LarmorTrajectory", tb.trajectory.c_str());
        meta.set("LarmorRampWindow", window_name(cfg_.window()));
        // What shaped the image, so two images can be told apart: the ramp's window and the largest
        // spoke shift (samples) the Fourier shift undid (0: centred spokes, 0.5: BART's sampling).
        meta.set("LarmorFbpWindow", window_name(cfg_.window()));
        meta.set("LarmorFbpMaxSpokeOffset", fbp_->max_spoke_shift());
        meta.set("LarmorFrame", static_cast<long>(tb.frame));
        meta.set("ImageComment", "FBP");
        spdlog::debug("[{}] RadialFbp: {} spokes x {} samples x {} coils -> {} in {:.2f} ms", session_, ds[1], ds[0],
                      ds[2], img.data.shape().str(),
                      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        out.emit(std::move(img));
    }

private:
    config::RadialFbp cfg_;
    std::shared_ptr<Backend> backend_;
    std::string session_, chain_;
    std::unique_ptr<RadialFbp> fbp_;
    uint64_t hash_ = 0;
    Shape data_shape_;
    uint16_t image_index_ = 0;
};

}  // namespace

std::unique_ptr<Gadget> make_radial_fbp(const config::RadialFbp& cfg) {
    return std::make_unique<RadialFbpGadget>(cfg);
}

}  // namespace larmor
