// CoilCombine (Gadgetron's CombineGadget): one image from the coil images, by root-sum-of-squares or
// by the adaptive combination of Walsh, Gmitro & Marcellin, MRM 43:682 (2000), whose coil
// sensitivities come from the locally averaged coil correlation matrix (the backend computes both).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/coils/coil_combination.h"
#include "gadgets/encoding.h"
#include "gadgets/chain_config.h"
#include "gadgets/factories.h"
#include "gadgets/typed_gadget.h"
#include "gadgets/image_header.h"

namespace larmor {
namespace {

constexpr int kDefaultWalshKernel = 7;
// Coil maps vary over many pixels (the window average already assumes it), so they are estimated
// on a grid and interpolated. The default spacing is the window side: the windows of neighbouring
// grid points then tile the image, so every pixel enters one correlation estimate, and a 7x7 window
// solves 49x fewer eigenproblems than every pixel; the interpolation error of smooth maps is second
// order in the spacing.
constexpr int kMaxMapStride = 64;

class CoilCombineGadget final : public TypedGadget<ImageArray> {
public:
    explicit CoilCombineGadget(const config::CoilCombine& cfg) : cfg_(cfg) {
        kernel_ = cfg.kernel_size() == 0 ? kDefaultWalshKernel : cfg.kernel_size();
        if (kernel_ < 1 || kernel_ > 255)
            throw ConfigError("CoilCombine: kernel_size " + std::to_string(cfg.kernel_size()) +
                                     " is outside 1..255");
        if (cfg.map_stride() < 0 || cfg.map_stride() > kMaxMapStride)
            throw ConfigError("CoilCombine: map_stride " + std::to_string(cfg.map_stride()) + " is outside 0.." +
                              std::to_string(kMaxMapStride) + " (0 = kernel_size, 1 = every pixel)");
        stride_ = cfg.map_stride() == 0 ? std::min(kernel_, kMaxMapStride) : cfg.map_stride();
    }

    // The combined image (the coil images are the FFT's).
    uint64_t working_set(const ISMRMRD::IsmrmrdHeader& h) const override { return declared_image_bytes(h); }

    void start(const SessionContext& ctx) override {
        backend_ = ctx.backend;
        if (!backend_) throw std::runtime_error("CoilCombine: the session has no backend");
    }

    void process(ImageArray& img, Emitter& out) override {
        const Shape& s = img.data.shape();
        if (s.rank() != 4)
            throw std::runtime_error("CoilCombine: image of shape " + s.str() + ", expected [X, Y, Z, CH]");
        const Shape combined{s[0], s[1], s[2]};
        CArray y = backend_->empty(combined);
        const char* step = "RSS";
        if (cfg_.method() == config::COMBINE_WALSH) {
            coils::walsh_combine(*backend_, img.data, kernel_, stride_, y);
            step = "COMBINE_WALSH";
            img.meta.set("LarmorCoilMapKernel", static_cast<long>(kernel_));
            img.meta.set("LarmorCoilMapStride", static_cast<long>(stride_));
        } else {
            coils::rss_last_axis(*backend_, img.data, y);
        }
        img.data = y.reshaped({s[0], s[1], s[2], 1});
        img.head.channels = 1;
        img.meta.set("LarmorCoilCombination", step);
        img.meta.set("LarmorCoils", static_cast<long>(s[3]));
        append_processing_history(img.meta, step);
        out.emit(std::move(img));
    }

private:
    config::CoilCombine cfg_;
    int kernel_ = kDefaultWalshKernel;
    int stride_ = kDefaultWalshKernel;
    std::shared_ptr<Backend> backend_;
};

}  // namespace

std::unique_ptr<Gadget> make_coil_combine(const config::CoilCombine& cfg) {
    return std::make_unique<CoilCombineGadget>(cfg);
}

}  // namespace larmor
