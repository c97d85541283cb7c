// PicsL1: l1-wavelet SENSE on each Cartesian recon buffer (what BART's `pics -l1` computes): ESPIRiT maps
// from the calibration region (gadgets/sense/cartesian_buffer.h), then FISTA on
// 1/2 ||M F S x - y||^2 + lambda ||W x||_1 (core/recon/l1_wavelet_sense.h). The loop, progress, deadline
// and meta are the shared solver loop's (gadgets/iterative/solver_loop.h).
#include <chrono>
#include <string>

#include <spdlog/spdlog.h>

#include "core/coils/coil_combination.h"
#include "core/recon/l1_wavelet_sense.h"
#include "gadgets/calibration_provenance.h"
#include "gadgets/chain_config.h"
#include "gadgets/encoding.h"
#include "gadgets/factories.h"
#include "gadgets/image_header.h"
#include "gadgets/iterative/settings.h"
#include "gadgets/iterative/solver_loop.h"
#include "gadgets/recon_grid.h"
#include "gadgets/sense/cartesian_buffer.h"
#include "gadgets/sense/espirit_settings.h"
#include "gadgets/typed_gadget.h"

#ifndef LARMOR_VERSION
#define LARMOR_VERSION "unknown"
#endif

namespace larmor {
namespace {

constexpr const char* kGadget = "PicsL1";
constexpr const char* kStage = "pics_l1";

struct PicsL1Settings {
    SolverKnobs solver;
    L1WaveletSenseSettings l1;
    coils::EspiritSettings espirit;
};

int levels_of(int v, const char* gadget) {
    if (v < 0 || v > 16)
        throw ConfigError(std::string(gadget) + ": wavelet_levels " + std::to_string(v) + " is outside 0..16");
    return v == 0 ? -1 : v;
}

PicsL1Settings settings_of(const config::PicsL1& c) {
    PicsL1Settings s;
    if (c.solver().has_lambda())
        throw ConfigError("PicsL1: solver.lambda is CG's Tikhonov weight; the l1 weight is `lambda`");
    s.solver = solver_knobs(c.solver(), kGadget);
    s.l1.iterations = s.solver.iterations;
    if (c.has_lambda()) {
        if (!(c.lambda() >= 0.f && c.lambda() <= 10.f))
            throw ConfigError("PicsL1: lambda " + std::to_string(c.lambda()) + " is outside 0..10");
        s.l1.lambda = c.lambda();
    }
    s.l1.levels = levels_of(c.wavelet_levels(), kGadget);
    s.l1.cycle_spinning = !c.fixed_wavelet();
    if (c.power_iterations() < 0 || c.power_iterations() > 1000)
        throw ConfigError("PicsL1: power_iterations " + std::to_string(c.power_iterations()) + " is outside 0..1000");
    if (c.power_iterations() > 0) s.l1.power_iterations = c.power_iterations();
    s.espirit = espirit_settings(c.espirit(), kGadget);
    if (s.espirit.sets != 1) throw ConfigError("PicsL1: espirit.sets " + std::to_string(s.espirit.sets) + ": one set only");
    return s;
}

class PicsL1Gadget final : public TypedGadget<ReconBuffer> {
public:
    explicit PicsL1Gadget(const config::PicsL1& cfg) : s_(settings_of(cfg)) {}

    // Coil-sized arrays at once: merged data and its extra copy, the maps, the ESPIRiT work (two), the
    // encoding's k-space workspace and A^H y's: 7; image-sized: x, z, the gradient, the step, the
    // wavelet workspace, the power method's two vectors, A^H y: 8.
    uint64_t working_set(const ISMRMRD::IsmrmrdHeader& h) const override {
        return saturating_add(declared_kspace_bytes(h, 7), declared_image_bytes(h, 8));
    }

    void start(const SessionContext& ctx) override {
        backend_ = ctx.backend;
        chain_ = ctx.chain_name;
        session_ = ctx.session_id;
        if (!backend_) throw std::runtime_error("PicsL1: the session has no backend");
    }

    void process(ReconBuffer& rb, Emitter& out) override {
        if (rb.data.empty()) {
            spdlog::debug("[{}] PicsL1: a buffer of calibration lines only; nothing to reconstruct", session_);
            return;
        }
        const auto t0 = std::chrono::steady_clock::now();
        Backend& be = *backend_;
        const Shape& shape = rb.data.data.shape();
        if (shape.rank() != 4)
            throw std::runtime_error("PicsL1: k-space buffer of shape " + shape.str() + ", expected [RO, E1, E2, CH]");
        const size_t ro = shape[0], e1 = shape[1], e2 = shape[2];
        const MergedKSpace merged = merged_kspace(be, rb, kGadget);
        const coils::CalibrationRegion region = calibration_region(rb);
        const coils::EspiritMaps maps = buffer_espirit_maps(be, rb, region, s_.espirit, kGadget);
        coils::check_coil_maps(be, maps.maps, kGadget, "the calibration region " + region.str());

        L1WaveletSense p = l1_wavelet_sense(backend_, merged.data, readout_mask(merged.sampled, ro, e1, e2),
                                            maps.maps.reshaped(shape), s_.l1);
        ResidualAlgRef<Fista> fista(*p.solver);
        const bool deadline_hit = run_solver_loop(fista, s_.solver, kStage, t0, out);

        ImageArray img;
        img.acquisitions = rb.acquisitions;
        img.data = to_recon_grid(be, p.image.reshaped({ro, e1, e2, 1}), rb.geometry);
        img.head = image_header_from(rb.data.reference, rb.geometry, img.data.shape(), ++image_index_);
        img.meta.set(kMetaDataRole, "Image");
        img.meta.set(kMetaGadgetronDataRole, "Image");
        append_processing_history(img.meta, "PICS_L1");
        img.meta.set("LarmorChain", chain_.c_str());
        img.meta.set("LarmorVersion", LARMOR_VERSION);
        SolverKnobs recorded = s_.solver;
        recorded.lambda = s_.l1.lambda;
        record_solver_meta(img.meta, "PicsL1", fista, recorded, deadline_hit);
        img.meta.set("PicsL1Threshold", double(p.threshold));
        img.meta.set("PicsL1Lipschitz", double(p.lipschitz));
        img.meta.set("PicsL1WaveletLevels", long(p.wavelet.levels()));
        img.meta.set("PicsL1CycleSpinning", long(s_.l1.cycle_spinning ? 1 : 0));
        img.meta.set("PicsL1Calibration", region.str().c_str());
        img.meta.set("ImageComment", "l1-wavelet SENSE");
        CalibrationProvenance cp;
        cp.method = "l1-wavelet SENSE";
        cp.kernel = "ESPIRiT " + std::to_string(s_.espirit.kernel) + "x" + std::to_string(s_.espirit.kernel);
        cp.lambda = s_.l1.lambda;
        cp.region = region.str();
        cp.maps = describe(s_.espirit);
        record_calibration_provenance(img.meta, cp);
        spdlog::info("[{}] PicsL1: {} -> {} in {} iterations, change {:.3e}, threshold {:.3e}, L {:.3f}, {:.1f} ms",
                     session_, shape.str(), img.data.shape().str(), fista.iteration(), fista.residual(), p.threshold,
                     p.lipschitz, milliseconds_since(t0));
        emit_or_fail(std::move(img), solver_failure("l1-wavelet SENSE", fista, s_.solver, deadline_hit), out);
    }

private:
    PicsL1Settings s_;
    std::shared_ptr<Backend> backend_;
    std::string chain_, session_;
    uint16_t image_index_ = 0;
};

}  // namespace

std::unique_ptr<Gadget> make_pics_l1(const config::PicsL1& cfg) { return std::make_unique<PicsL1Gadget>(cfg); }

}  // namespace larmor
