// Grappa (Gadgetron's GenericReconCartesianGrappaGadget): GRAPPA on each recon buffer, by the core's
// calibration (core/coils/grappa.h). The buffer's calibration lines (or, without them, the data's fully
// sampled centre) give the kernels and the Walsh maps they are combined with; the resulting unmixing
// weights are kept on the backend per slice, so the frames that follow without calibration lines
// (repetitions, dynamics) cost one inverse FFT and a weighted coil sum each. One combined complex image
// per buffer.
#include <chrono>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>

#include <spdlog/spdlog.h>

#include "core/coils/calibration.h"
#include "core/coils/grappa.h"
#include "gadgets/calibration_provenance.h"
#include "gadgets/chain_config.h"
#include "gadgets/encoding.h"
#include "gadgets/factories.h"
#include "gadgets/image_header.h"
#include "gadgets/iterative/solver_loop.h"
#include "gadgets/recon_grid.h"
#include "gadgets/typed_gadget.h"

#ifndef LARMOR_VERSION
#define LARMOR_VERSION "unknown"
#endif

namespace larmor {
namespace {

constexpr const char* kGadget = "Grappa";
constexpr int kDefaultMapKernel = 7;
constexpr size_t kMinCalibrationLines = 4;

struct GrappaGadgetSettings {
    coils::GrappaSettings grappa;
    int map_kernel = kDefaultMapKernel, map_stride = kDefaultMapKernel;
};

GrappaGadgetSettings settings_of(const config::Grappa& c) {
    GrappaGadgetSettings s;
    if (c.kernel_ro() != 0) s.grappa.kernel_ro = c.kernel_ro();
    if (c.kernel_e1() != 0) s.grappa.kernel_e1 = c.kernel_e1();
    if (c.kernel_e2() != 0) s.grappa.kernel_e2 = c.kernel_e2();
    if (c.has_lambda()) s.grappa.lambda = c.lambda();
    s.map_kernel = c.map_kernel_size() == 0 ? kDefaultMapKernel : c.map_kernel_size();
    s.map_stride = c.map_stride() == 0 ? s.map_kernel : c.map_stride();
    try {
        coils::check(s.grappa);
    } catch (const std::invalid_argument& e) {
        // "GRAPPA: kernel_ro 4 is not ..." -> "Grappa: kernel_ro 4 is not ..."
        throw ConfigError(std::string(kGadget) + ": " + (std::string(e.what()).substr(std::string("GRAPPA: ").size())));
    }
    if (s.map_kernel < 1 || s.map_kernel > 255)
        throw ConfigError("Grappa: map_kernel_size " + std::to_string(c.map_kernel_size()) + " is outside 1..255");
    if (s.map_stride < 1 || s.map_stride > 64)
        throw ConfigError("Grappa: map_stride " + std::to_string(c.map_stride()) + " is outside 0..64");
    return s;
}

std::string kernel_text(const coils::GrappaKernels& k) {
    const coils::GrappaSettings& s = k.settings;
    return std::to_string(s.kernel_ro) + "x" + std::to_string(s.kernel_e1) +
           (k.lattice.r2 > 1 ? "x" + std::to_string(k.kernel_e2) : std::string());
}

class GrappaGadget final : public TypedGadget<ReconBuffer> {
public:
    explicit GrappaGadget(const config::Grappa& cfg) : s_(settings_of(cfg)) {}

    // Coil-sized arrays held at once: the data, its lattice-only copy, the coil images, the unmixing
    // weights, the maps, the calibration images and the FFT of one source coil's kernels: 7; plus the image.
    uint64_t working_set(const ISMRMRD::IsmrmrdHeader& h) const override {
        return saturating_add(declared_kspace_bytes(h, 7), declared_image_bytes(h, 1));
    }

    void start(const SessionContext& ctx) override {
        backend_ = ctx.backend;
        chain_ = ctx.chain_name;
        session_ = ctx.session_id;
        if (!backend_) throw std::runtime_error("Grappa: the session has no backend");
    }

    void process(ReconBuffer& rb, Emitter& out) override {
        Calibration& cal = calibrations_[rb.data.empty() ? rb.ref.reference.idx.slice : rb.data.reference.idx.slice];
        if (rb.data.empty()) {
            spdlog::debug("[{}] Grappa: a buffer of calibration lines only; kept for the next data", session_);
            if (!rb.ref.empty()) cal.pending_ref = rb.ref;
            return;
        }
        const auto t0 = std::chrono::steady_clock::now();
        Backend& be = *backend_;
        const Shape& shape = rb.data.data.shape();
        if (shape.rank() != 4)
            throw std::runtime_error("Grappa: k-space buffer of shape " + shape.str() + ", expected [RO, E1, E2, CH]");
        const size_t e1 = shape[1], e2 = shape[2];
        size_t off_lattice = 0;
        const coils::GrappaLattice lattice = coils::grappa_lattice(rb.data.sampled, e1, e2, &off_lattice);

        // Calibrate on new calibration lines, or when the frame does not fit the weights kept.
        const KSpace* ref = !rb.ref.empty() ? &rb.ref : !cal.pending_ref.empty() ? &cal.pending_ref : nullptr;
        const bool stale = cal.unmixing.empty() || cal.unmixing.shape() != shape ||
                           cal.kernels.lattice.r1 != lattice.r1 || cal.kernels.lattice.r2 != lattice.r2;
        bool calibrated = false;
        if (ref || stale) {
            calibrate(cal, ref ? *ref : rb.data, lattice, shape);
            calibrated = true;
            cal.image = uint16_t(image_index_ + 1);
            cal.pending_ref = KSpace{};
        }
        const double calibration_ms = calibrated ? milliseconds_since(t0) : 0.0;

        // The unmixing assumes the lattice's lines only: calibration lines sent as imaging lines go.
        CArray kspace = rb.data.data;
        if (off_lattice > 0) kspace = lattice_only(rb.data.data, lattice);
        CArray coil_images = be.empty(shape), image = be.empty({shape[0], e1, e2, 1});
        coils::grappa_apply(be, cal.unmixing, kspace, coil_images, image);

        ImageArray img;
        img.acquisitions = rb.acquisitions;
        img.data = to_recon_grid(be, image, rb.geometry);
        img.head = image_header_from(rb.data.reference, rb.geometry, img.data.shape(), ++image_index_);
        provenance(img.meta, cal, lattice);
        spdlog::info("[{}] Grappa: {} {} -> {}; {}{} lines off the lattice ignored; {:.1f} ms", session_, shape.str(),
                     lattice.str(), img.data.shape().str(),
                     calibrated ? "calibrated on " + cal.region.str() + " (" + kernel_text(cal.kernels) + " kernel, " +
                                      std::to_string(cal.kernels.rows) + " fits, residual " +
                                      std::to_string(cal.kernels.fit_residual) + ", " + std::to_string(calibration_ms) +
                                      " ms), "
                                : std::string("weights kept, "),
                     off_lattice, milliseconds_since(t0));
        out.emit(std::move(img));
    }

private:
    // What one slice's calibration left: the weights its later frames reuse.
    struct Calibration {
        coils::GrappaKernels kernels;
        coils::CalibrationRegion region;
        CArray unmixing;
        KSpace pending_ref;  // calibration lines that came in a buffer of their own
        uint16_t image = 0;  // the image whose calibration lines made the weights
    };

    void calibrate(Calibration& out, const KSpace& cal, const coils::GrappaLattice& lattice, const Shape& shape) {
        Backend& be = *backend_;
        if (cal.data.shape() != shape)
            throw std::runtime_error("Grappa: calibration k-space " + cal.data.shape().str() + " does not match the data " +
                                     shape.str());
        out.unmixing = CArray{};
        out.region = coils::fully_sampled_centre(cal.sampled, shape[1], shape[2], kMinCalibrationLines);
        try {
            out.kernels = coils::grappa_kernels(be, cal.data, out.region, lattice, s_.grappa);
            const CArray maps =
                coils::sense_maps(be, coils::calibration_images(be, cal.data, out.region), s_.map_kernel, s_.map_stride);
            coils::check_coil_maps(be, maps, kGadget, "the calibration region " + out.region.str());
            out.unmixing = coils::grappa_unmixing(be, out.kernels, maps);
        } catch (const coils::GrappaError& e) {
            throw std::runtime_error("Grappa: " + std::string(e.what()).substr(std::string("GRAPPA: ").size()));
        }
    }

    CArray lattice_only(const CArray& kspace, const coils::GrappaLattice& l) {
        Backend& be = *backend_;
        const Shape& s = kspace.shape();
        RArray mask = be.host_real({s[0], s[1], s[2]});
        for (size_t z = 0; z < s[2]; ++z)
            for (size_t y = 0; y < s[1]; ++y)
                if (l.on(y, z)) std::fill(mask.data() + s[0] * (y + s[1] * z), mask.data() + s[0] * (y + 1 + s[1] * z), 1.f);
        CArray out = be.empty(s);
        be.mul(kspace, be.to_device(mask), out);
        return out;
    }

    void provenance(ISMRMRD::MetaContainer& meta, const Calibration& cal, const coils::GrappaLattice& lattice) const {
        meta.set(kMetaDataRole, "Image");
        meta.set(kMetaGadgetronDataRole, "Image");
        append_processing_history(meta, "GRAPPA");
        meta.set("LarmorChain", chain_.c_str());
        meta.set("LarmorVersion", LARMOR_VERSION);
        CalibrationProvenance p;
        p.method = "GRAPPA";
        p.kernel = kernel_text(cal.kernels) + " (RO x E1" + std::string(cal.kernels.lattice.r2 > 1 ? " x E2" : "") + ")";
        p.lambda = s_.grappa.lambda;
        p.region = cal.region.str();
        p.maps = "Walsh on the calibration image (" + std::to_string(s_.map_kernel) + " pixels)";
        p.acceleration = lattice.str();
        record_calibration_provenance(meta, p);
        meta.set("GrappaFitResidual", cal.kernels.fit_residual);
        // The image whose calibration lines made the weights (this one's, or an earlier frame's).
        meta.set("GrappaCalibratedOnImage", long(cal.image));
        meta.set("ImageComment", "GRAPPA");
    }

    GrappaGadgetSettings s_;
    std::shared_ptr<Backend> backend_;
    std::string chain_, session_;
    // Per slice: each has its own calibration lines and coil geometry.
    std::map<uint16_t, Calibration> calibrations_;
    uint16_t image_index_ = 0;
};

}  // namespace

std::unique_ptr<Gadget> make_grappa(const config::Grappa& cfg) { return std::make_unique<GrappaGadget>(cfg); }

}  // namespace larmor
