// Gridding: the non-Cartesian reconstruction by density-compensated adjoint NUFFT (Jackson et al.,
// "Selection of a convolution function for Fourier inversion using gridding", IEEE TMI 10:473, 1991;
// Beatty, Nishimura & Pauly, IEEE TMI 24:799, 2005, for the oversampled grid with a Kaiser-Bessel-like
// kernel; core/linops/nufft.h). Per trajectory buffer: weights (gadgets/noncart/density_weights.h,
// cached by trajectory), y_w = W y, x_c = F_nu^H y_w per coil. The coil images [X, Y, Z, C] go on to
// coil_combine, as the Cartesian FFT gadget's do.
#include <chrono>
#include <stdexcept>
#include <string>

#include <spdlog/spdlog.h>

#include "gadgets/chain_config.h"
#include "gadgets/encoding.h"
#include "gadgets/factories.h"
#include "gadgets/image_header.h"
#include "gadgets/noncart/density_weights.h"
#include "gadgets/noncart/nufft_plan_cache.h"
#include "gadgets/typed_gadget.h"

namespace larmor {
namespace {

struct GriddingSettings {
    DensityRequest density;
    NufftOptions nufft;
};

GriddingSettings settings_of(const config::Gridding& c) {
    GriddingSettings s;
    s.density.method = c.density();
    s.density.iterations = c.density_iterations() == 0 ? 20 : c.density_iterations();
    s.nufft.tolerance = c.tolerance() == 0.f ? 1e-3 : static_cast<double>(c.tolerance());
    s.nufft.upsampling = c.upsampling() == 0.f ? 2.0 : static_cast<double>(c.upsampling());
    s.density.tolerance = s.nufft.tolerance;
    if (!(s.nufft.tolerance >= 1e-6 && s.nufft.tolerance <= 0.1))
        throw ConfigError("Gridding: tolerance " + std::to_string(c.tolerance()) + " is outside 1e-6..0.1");
    if (!(s.nufft.upsampling >= 1.25 && s.nufft.upsampling <= 2.0))
        throw ConfigError("Gridding: upsampling " + std::to_string(c.upsampling()) + " is outside 1.25..2");
    if (s.density.iterations < 1 || s.density.iterations > 1000)
        throw ConfigError("Gridding: density_iterations " + std::to_string(c.density_iterations()) +
                          " is outside 1..1000");
    return s;
}

class GriddingGadget final : public TypedGadget<TrajectoryBuffer> {
public:
    explicit GriddingGadget(const config::Gridding& cfg) : s_(settings_of(cfg)) {}

    // The weighted copy of the data and the coil images, each about a k-space buffer of the declared
    // matrix; the oversampled grid (sigma^2 = 4 times an image per coil in 2D).
    uint64_t working_set(const ISMRMRD::IsmrmrdHeader& h) const override {
        return saturating_add(declared_kspace_bytes(h, 2), declared_image_bytes(h, 0) + declared_kspace_bytes(h, 4));
    }

    void start(const SessionContext& ctx) override {
        backend_ = ctx.backend;
        session_ = ctx.session_id;
        chain_ = ctx.chain_name;
        cache_ = &precompute_cache(ctx);
        if (!backend_) throw std::runtime_error("Gridding: the session has no backend");
    }

    void process(TrajectoryBuffer& tb, Emitter& out) override {
        const auto t0 = std::chrono::steady_clock::now();
        Backend& be = *backend_;
        const Shape& ds = tb.data.shape();  // [S, R, C]
        const size_t m = ds[0] * ds[1], coils = ds[2];
        const RArray coords = tb.coords.reshaped({tb.coords.shape()[0], m});
        Nufft& plan = *plans_.get(*cache_, backend_, tb.image, coils, coords, s_.nufft);

        const auto w = density_weights(*cache_, backend_, tb, s_.density);
        if (weights_.empty() || weights_host_ != w) {  // upload once per distinct weight array
            weights_ = be.to_device(*w);
            weights_host_ = w;
        }
        const CArray y = tb.data.reshaped({m, coils});
        CArray& yw = scratch(weighted_, {m, coils});
        be.mul(y, weights_, yw);

        Shape img_shape = tb.image;
        img_shape.push_back(coils);
        CArray coil_images = be.empty(img_shape);
        plan.adjoint(yw, coil_images);

        ImageArray img;
        img.acquisitions = tb.acquisitions;
        const size_t nz = tb.image.rank() == 3 ? tb.image[2] : 1;
        img.data = coil_images.reshaped({tb.image[0], tb.image[1], nz, coils});
        img.head = image_header_from(tb.reference, tb.geometry, img.data.shape(), ++image_index_);
        ISMRMRD::MetaContainer& meta = img.meta;
        meta.set(kMetaDataRole, "Image");
        meta.set(kMetaGadgetronDataRole, "Image");
        append_processing_history(meta, "GRIDDING");
        meta.set("LarmorChain", chain_.c_str());
        meta.set("LarmorTrajectory", tb.trajectory.c_str());
        meta.set("LarmorDensityCompensation", density_name(s_.density.method));
        meta.set("LarmorNufftTolerance", s_.nufft.tolerance);
        meta.set("LarmorFrame", static_cast<long>(tb.frame));
        meta.set("ImageComment", "GRIDDING");
        spdlog::debug("[{}] Gridding: {} readouts x {} samples x {} coils -> {} in {:.2f} ms", session_, ds[1], ds[0],
                      coils, img.data.shape().str(),
                      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        out.emit(std::move(img));
    }

private:
    CArray& scratch(CArray& a, const Shape& s) {
        if (a.shape() != s) a = backend_->empty(s);
        return a;
    }

    GriddingSettings s_;
    std::shared_ptr<Backend> backend_;
    std::string session_, chain_;
    PrecomputeCache* cache_ = nullptr;
    NufftPlanCache plans_;
    std::shared_ptr<const RArray> weights_host_;
    RArray weights_;
    CArray weighted_;
    uint16_t image_index_ = 0;
};

}  // namespace

std::unique_ptr<Gadget> make_gridding(const config::Gridding& cfg) { return std::make_unique<GriddingGadget>(cfg); }

}  // namespace larmor
