// CgSense: Cartesian CG-SENSE on each recon buffer (maps from the calibration lines by ESPIRiT or Walsh,
// core/coils/calibration.h; CG on the regularised normal equations of E = M F S, gadgets/sense). The
// gadget adapts the stream to the core; the solver's loop (progress to the client, the deadline, the
// residual history in the image's meta, the failure check) is gadgets/iterative/solver_loop.h, shared
// with the other iterative gadgets, and so are the solver and NUFFT settings (gadgets/iterative/settings.h).
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include <spdlog/spdlog.h>

#include "core/coils/calibration.h"
#include "core/coils/coil_combination.h"
#include "core/coils/grappa.h"
#include "gadgets/calibration_provenance.h"
#include "gadgets/chain_config.h"
#include "gadgets/encoding.h"
#include "gadgets/factories.h"
#include "gadgets/image_header.h"
#include "gadgets/iterative/settings.h"
#include "gadgets/iterative/solver_loop.h"
#include "gadgets/recon_grid.h"
#include "gadgets/noncart/density_weights.h"
#include "gadgets/noncart/normal_operator.h"
#include "gadgets/noncart/nufft_plan_cache.h"
#include "gadgets/sense/cartesian_buffer.h"
#include "gadgets/sense/cartesian_sense.h"
#include "gadgets/sense/espirit_settings.h"
#include "gadgets/sense/noncartesian_sense.h"
#include "gadgets/typed_gadget.h"

#ifndef LARMOR_VERSION
#define LARMOR_VERSION "unknown"
#endif

namespace larmor {
namespace {

constexpr const char* kGadget = "CgSense";
// The progress lines' stage name; clients and tests read "progress cg_sense: ...".
constexpr const char* kStage = "cg_sense";
constexpr int kDefaultMapKernel = 7;

struct CgSenseSettings {
    SolverKnobs solver;
    int map_kernel, map_stride;
    config::CgSense::CoilMaps maps = config::CgSense::MAPS_DEFAULT;
    coils::EspiritSettings espirit;
    // Non-Cartesian data.
    float calibration_radius;
    DensityRequest density;
    NufftOptions nufft;
    config::CgSense::NormalOperator normal = config::CgSense::NORMAL_AUTO;
};

CgSenseSettings settings_of(const config::CgSense& c) {
    CgSenseSettings s{};
    s.solver = solver_knobs(c.solver(), kGadget);
    s.nufft = nufft_options(c.nufft(), kGadget);
    s.map_kernel = c.map_kernel_size() == 0 ? kDefaultMapKernel : c.map_kernel_size();
    s.map_stride = c.map_stride() == 0 ? s.map_kernel : c.map_stride();
    s.calibration_radius = c.calibration_radius() == 0.f ? 12.f : c.calibration_radius();
    s.density.method = c.density();
    s.density.tolerance = s.nufft.tolerance;
    s.normal = c.normal();
    s.maps = c.maps();
    s.espirit = espirit_settings(c.espirit(), kGadget);
    if (!(s.calibration_radius >= 2.f && s.calibration_radius <= 1024.f))
        throw ConfigError("CgSense: calibration_radius " + std::to_string(c.calibration_radius()) +
                          " is outside 2..1024 cycles per FOV");
    if (s.map_kernel < 1 || s.map_kernel > 255)
        throw ConfigError("CgSense: map_kernel_size " + std::to_string(c.map_kernel_size()) + " is outside 1..255");
    if (s.map_stride < 1 || s.map_stride > 64)
        throw ConfigError("CgSense: map_stride " + std::to_string(c.map_stride()) + " is outside 0..64");
    return s;
}

class CgSenseGadget final : public TypedGadget<ReconBuffer, TrajectoryBuffer> {
public:
    explicit CgSenseGadget(const config::CgSense& cfg) : s_(settings_of(cfg)), normal_(s_.normal) {}

    // Coil-sized arrays held at once: merged data, the extra ACS copy, the maps, their calibration
    // images (two), the normal operator's two workspaces and the right-hand side's: 8; plus the CG
    // vectors (x, r, p, Ap and the image), image-sized.
    // Non-Cartesian data with the Toeplitz normal (or AUTO, which may pick it): its two work arrays on the
    // 2N grid (2 x 2^d coil images; counted as k-space, which the readout oversampling makes larger).
    // Two ESPIRiT sets: one more coil-sized array (the second maps) and twice the CG vectors.
    uint64_t working_set(const ISMRMRD::IsmrmrdHeader& h) const override {
        const bool two = s_.espirit.sets == 2;
        const uint64_t base = saturating_add(declared_kspace_bytes(h, two ? 9 : 8), declared_image_bytes(h, two ? 10 : 5));
        const bool noncartesian =
            !h.encoding.empty() && h.encoding[0].trajectory != ISMRMRD::TrajectoryType::CARTESIAN;
        if (!noncartesian || s_.normal == config::CgSense::NORMAL_NUFFT_PAIR) return base;
        const bool three_d = h.encoding[0].encodedSpace.matrixSize.z > 1;
        return saturating_add(base, declared_kspace_bytes(h, three_d ? 16 : 8));
    }

    void start(const SessionContext& ctx) override {
        backend_ = ctx.backend;
        chain_ = ctx.chain_name;
        session_ = ctx.session_id;
        cache_ = &precompute_cache(ctx);
        if (!backend_) throw std::runtime_error("CgSense: the session has no backend");
    }

    // Non-Cartesian CG-SENSE (gadgets/sense/noncartesian_sense.h): maps from the gridded k-space centre,
    // CG on the density-weighted normal equations of E = W^1/2 F_nu S.
    void process(TrajectoryBuffer& tb, Emitter& out) override {
        const auto t0 = std::chrono::steady_clock::now();
        Backend& be = *backend_;
        const Shape& ds = tb.data.shape();  // [S, R, C]
        const size_t m = ds[0] * ds[1], coils = ds[2];
        const RArray coords = tb.coords.reshaped({tb.coords.shape()[0], m});
        std::shared_ptr<Nufft> plan = plans_.get(*cache_, backend_, tb.image, coils, coords, s_.nufft);
        const std::shared_ptr<const RArray> w = density_weights(*cache_, backend_, tb, s_.density);
        const RArray weights = be.to_device(w->reshaped({m}));
        const NormalDecision normal =
            normal_.choose(*cache_, backend_, tb, coords, plan, w->reshaped({m}), s_.nufft, s_.solver.iterations);
        NoncartesianSenseSetup setup;
        setup.calibration_radius = s_.calibration_radius;
        setup.map_kernel = s_.map_kernel;
        setup.map_stride = s_.map_stride;
        setup.lambda = s_.solver.lambda;
        setup.cg = s_.solver.cg();
        setup.toeplitz_spectrum = normal.spectrum;
        setup.espirit = noncartesian_espirit();
        setup.espirit_settings = s_.espirit;
        if (setup.espirit && s_.espirit.sets == 2)
            throw std::runtime_error("CgSense: two sets of ESPIRiT maps (espirit.sets 2) are for Cartesian data; "
                                     "non-Cartesian data take one set");
        const std::string map_method = setup.espirit ? describe(s_.espirit) + " on the gridded k-space centre"
                                                     : std::string("Walsh on the gridded k-space centre");
        NoncartesianSense p = [&] {
            try {
                return noncartesian_sense(backend_, tb, plan, weights, setup);
            } catch (const coils::EspiritError& e) {
                throw std::runtime_error("CgSense: the coil maps cannot be estimated from the gridded k-space centre: " +
                                         std::string(e.what()));
            }
        }();
        check_maps(p.maps, "the gridded k-space centre");
        ResidualAlgRef<ConjugateGradient> cg(*p.solver);
        const bool deadline_hit = run_solver_loop(cg, s_.solver, kStage, t0, out);

        ImageArray img;
        img.acquisitions = tb.acquisitions;
        const size_t nz = tb.image.rank() == 3 ? tb.image[2] : 1;
        img.data = p.image.reshaped({tb.image[0], tb.image[1], nz, 1});
        img.head = image_header_from(tb.reference, tb.geometry, img.data.shape(), ++image_index_);
        coils::CalibrationRegion none;
        provenance(img.meta, cg, none, map_method, deadline_hit);
        CalibrationProvenance cp;
        cp.method = "CG-SENSE";
        cp.kernel = setup.espirit ? "ESPIRiT " + std::to_string(s_.espirit.kernel) + "x" + std::to_string(s_.espirit.kernel)
                                  : "Walsh window " + std::to_string(s_.map_kernel);
        cp.lambda = s_.solver.lambda;
        cp.region = "k-space centre, radius " + std::to_string(s_.calibration_radius) + " cycles/FOV";
        cp.maps = map_method;
        record_calibration_provenance(img.meta, cp);
        img.meta.set("CgSenseCalibration", ("k-space centre, radius " + std::to_string(s_.calibration_radius) +
                                            " cycles/FOV").c_str());
        img.meta.set("LarmorTrajectory", tb.trajectory.c_str());
        img.meta.set("LarmorDensityCompensation", density_name(s_.density.method));
        img.meta.set("LarmorNufftTolerance", s_.nufft.tolerance);
        img.meta.set("CgSenseNormal", normal.description.c_str());
        spdlog::info("[{}] CgSense: {} readouts x {} samples x {} coils ({}) -> {} in {} iterations, residual "
                     "{:.3e}, {:.1f} ms; F^H W F: {}",
                     session_, ds[1], ds[0], coils, tb.trajectory, img.data.shape().str(), cg.iteration(),
                     cg.residual(), milliseconds_since(t0), normal.description);
        emit_checked(std::move(img), cg, deadline_hit, out);
    }

    void process(ReconBuffer& rb, Emitter& out) override {
        if (rb.data.empty()) {
            spdlog::debug("[{}] CgSense: a buffer of calibration lines only; nothing to reconstruct", session_);
            return;
        }
        const auto t0 = std::chrono::steady_clock::now();
        Backend& be = *backend_;
        const Shape& shape = rb.data.data.shape();
        if (shape.rank() != 4)
            throw std::runtime_error("CgSense: k-space buffer of shape " + shape.str() + ", expected [RO, E1, E2, CH]");
        const size_t e1 = shape[1], e2 = shape[2];

        // Calibration lines are measurements too: they join the data where the imaging lines lack them.
        const MergedKSpace merged = merged_kspace(be, rb, kGadget);
        const coils::CalibrationRegion region = calibration_region(rb);
        // ESPIRiT unless Walsh is asked for (the two measured side by side in tests/cg_sense_chain_test.cpp).
        const bool espirit = s_.maps != config::CgSense::MAPS_WALSH;
        CArray maps, second;  // second: ESPIRiT's second set, when asked for
        if (!espirit) {
            maps = coils::sense_maps(be, coils::calibration_images(be, calibration_kspace(rb).data, region),
                                     s_.map_kernel, s_.map_stride);
        } else {
            coils::EspiritMaps m = buffer_espirit_maps(be, rb, region, s_.espirit, kGadget);
            maps = m.maps;
            second = m.second;
        }
        const std::string map_method = espirit ? describe(s_.espirit) : std::string("Walsh on the calibration image");
        check_maps(maps, "the calibration region " + region.str());

        CartesianSense p =
            cartesian_sense(backend_, merged.data, merged.sampled, maps, s_.solver.lambda, s_.solver.cg(), second);
        ResidualAlgRef<ConjugateGradient> cg(*p.solver);
        const bool deadline_hit = run_solver_loop(cg, s_.solver, kStage, t0, out);

        ImageArray img;
        img.acquisitions = rb.acquisitions;
        CArray combined;
        if (second.empty()) {
            combined = p.image.reshaped({shape[0], e1, e2, 1});
        } else {
            // Two sets: the two images' root sum of squares (their phases are not comparable).
            combined = be.empty({shape[0], e1, e2, 1});
            CArray rss = combined.reshaped({shape[0], e1, e2});
            coils::rss_last_axis(be, p.image.reshaped({shape[0], e1, e2, 2}), rss);
        }
        img.data = to_recon_grid(be, combined, rb.geometry);
        img.head = image_header_from(rb.data.reference, rb.geometry, img.data.shape(), ++image_index_);
        provenance(img.meta, cg, region, map_method, deadline_hit);
        CalibrationProvenance cp;
        cp.method = "CG-SENSE";
        cp.kernel = espirit ? "ESPIRiT " + std::to_string(s_.espirit.kernel) + "x" + std::to_string(s_.espirit.kernel)
                           : "Walsh window " + std::to_string(s_.map_kernel);
        cp.lambda = s_.solver.lambda;
        cp.region = region.str();
        cp.maps = map_method;
        cp.acceleration = coils::grappa_lattice(rb.data.sampled, e1, e2).str();
        record_calibration_provenance(img.meta, cp);
        const std::string replay = p.solver->recorded() ? std::string("replayed as one CUDA graph")
                                                        : "queued call by call: " + p.solver->why_not_recorded();
        spdlog::info("[{}] CgSense: {} -> {} in {} iterations, residual {:.3e}, calibration {}, maps {}, normal "
                     "operator {}, iterations {}, {:.1f} ms",
                     session_, shape.str(), img.data.shape().str(), cg.iteration(), cg.residual(), region.str(),
                     map_method, p.normal, replay, milliseconds_since(t0));
        emit_checked(std::move(img), cg, deadline_hit, out);
    }

private:
    // Non-Cartesian maps: ESPIRiT when asked for; the default stays Walsh's there, as the two measured
    // alike and Walsh costs less (proto/chain.proto, CoilMaps; tests/noncartesian_chain_test.cpp,
    // RadialCgSenseAt64SpokesBeatsGridding).
    bool noncartesian_espirit() const { return s_.maps == config::CgSense::MAPS_ESPIRIT; }

    void check_maps(const CArray& maps, const std::string& from) {
        coils::check_coil_maps(*backend_, maps, "CgSense", from);
    }

    // A solver that did nothing, or whose residual is not a number, produced no image worth the name:
    // it goes out marked as failed, and the error names the step and the values.
    void emit_checked(ImageArray img, const ResidualAlg& cg, bool deadline_hit, Emitter& out) {
        emit_or_fail(std::move(img), solver_failure("CG-SENSE", cg, s_.solver, deadline_hit), out);
    }

    void provenance(ISMRMRD::MetaContainer& meta, const ResidualAlg& cg, const coils::CalibrationRegion& region,
                    const std::string& map_method, bool deadline_hit) const {
        meta.set(kMetaDataRole, "Image");
        meta.set(kMetaGadgetronDataRole, "Image");
        append_processing_history(meta, "CG_SENSE");
        meta.set("LarmorChain", chain_.c_str());
        meta.set("LarmorVersion", LARMOR_VERSION);
        record_solver_meta(meta, "CgSense", cg, s_.solver, deadline_hit);
        meta.set("CgSenseCalibration", region.str().c_str());
        meta.set("CgSenseCoilMaps", map_method.c_str());
        meta.set("ImageComment", "CG-SENSE");
    }

    CgSenseSettings s_;
    std::shared_ptr<Backend> backend_;
    std::string chain_, session_;
    NufftPlanCache plans_;
    NormalOperatorChoice normal_;
    PrecomputeCache* cache_ = nullptr;
    uint16_t image_index_ = 0;
};

}  // namespace

std::unique_ptr<Gadget> make_cg_sense(const config::CgSense& cfg) { return std::make_unique<CgSenseGadget>(cfg); }

}  // namespace larmor
