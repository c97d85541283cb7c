// Spirit: SPIRiT on each Cartesian recon buffer. Kernels from the calibration region (core/coils/spirit.h:
// one Cholesky for all coils; 3D scans per readout position after an inverse FFT along the readout),
// then the coil images by l1-SPIRiT's POCS (core/recon/l1_spirit.h), its penalised form by FISTA
// (core/recon/l1_spirit_fista.h) or CG-SPIRiT (core/recon/cg_spirit.h), combined with ESPIRiT maps or by the root sum of squares. The loop, progress, deadline and meta are the
// shared solver loop's (gadgets/iterative/solver_loop.h).
#include <chrono>
#include <string>

#include <spdlog/spdlog.h>

#include "core/coils/calibration_matrix.h"
#include "core/coils/coil_combination.h"
#include "core/coils/spirit.h"
#include "core/recon/cg_spirit.h"
#include "core/recon/l1_spirit.h"
#include "core/recon/l1_spirit_fista.h"
#include "core/recon/l1_spirit_slabs.h"
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

constexpr const char* kGadget = "Spirit";
constexpr const char* kStage = "spirit";
// The most calibration lines per axis a kernel fit uses (more rows than unknowns many times over):
// 32 x 32 in 2D; 24^3 in 3D (13824 windows of a 5^3 kernel, 1000 unknowns at 8 coils).
constexpr size_t kMostCalibration = 32, kMostCalibration3d = 24;

struct SpiritGadgetSettings {
    config::Spirit::Method method = config::Spirit::METHOD_POCS;
    SolverKnobs solver;
    coils::SpiritSettings kernels;
    L1SpiritSettings pocs;
    L1SpiritFistaSettings fista;
    float consistency_lambda = 1.f;
    config::Spirit::Combine combine = config::Spirit::COMBINE_ESPIRIT;
    coils::EspiritSettings espirit;
    size_t slab_slices = 0;
};

SpiritGadgetSettings settings_of(const config::Spirit& c) {
    SpiritGadgetSettings s;
    s.method = c.method();
    if (c.solver().has_lambda())
        throw ConfigError("Spirit: solver.lambda is CG-SENSE's Tikhonov weight; SPIRiT's weights are l1_lambda "
                          "(POCS, FISTA) and consistency_lambda (CG, FISTA)");
    s.solver = solver_knobs(c.solver(), kGadget);
    if (c.kernel() != 0) {
        if (c.kernel() < 3 || c.kernel() > 9 || c.kernel() % 2 == 0)
            throw ConfigError("Spirit: kernel " + std::to_string(c.kernel()) + " is not an odd width in 3..9");
        s.kernels.kernel = c.kernel();
    }
    s.kernels.lambda = 0.001f;  // the proto's default (proto/chain.proto says why)
    if (c.calibration_lambda() != 0.f) {
        if (!(c.calibration_lambda() > 0.f && c.calibration_lambda() < 1.f))
            throw ConfigError("Spirit: calibration_lambda " + std::to_string(c.calibration_lambda()) +
                              " is outside (0, 1)");
        s.kernels.lambda = c.calibration_lambda();
    }
    if (c.has_l1_lambda()) {
        if (!(c.l1_lambda() >= 0.f && c.l1_lambda() <= 10.f))
            throw ConfigError("Spirit: l1_lambda " + std::to_string(c.l1_lambda()) + " is outside 0..10");
        s.pocs.lambda = s.fista.lambda = c.l1_lambda();
    }
    if (c.wavelet_levels() < 0 || c.wavelet_levels() > 16)
        throw ConfigError("Spirit: wavelet_levels " + std::to_string(c.wavelet_levels()) + " is outside 0..16");
    s.pocs.levels = c.wavelet_levels() == 0 ? -1 : c.wavelet_levels();
    s.pocs.cycle_spinning = !c.fixed_wavelet();
    s.pocs.iterations = s.fista.iterations = s.solver.iterations;
    s.pocs.tolerance = s.fista.tolerance = s.solver.tolerance;
    s.fista.levels = s.pocs.levels;
    s.fista.cycle_spinning = s.pocs.cycle_spinning;
    if (c.consistency_lambda() != 0.f) {
        if (!(c.consistency_lambda() > 0.f && c.consistency_lambda() <= 1e4f))
            throw ConfigError("Spirit: consistency_lambda " + std::to_string(c.consistency_lambda()) +
                              " is outside (0, 1e4]");
        s.consistency_lambda = s.fista.consistency_lambda = c.consistency_lambda();
    }
    s.combine = c.combine();
    s.espirit = espirit_settings(c.espirit(), kGadget);
    if (s.espirit.sets != 1) throw ConfigError("Spirit: espirit.sets " + std::to_string(s.espirit.sets) + ": one set only");
    if (c.slab_slices() > 65536)
        throw ConfigError("Spirit: slab_slices " + std::to_string(c.slab_slices()) + " is over 65536");
    s.slab_slices = c.slab_slices();
    return s;
}

// The relative change of POCS (of the whole volume when it is split into slabs) and of FISTA, and the
// residual of CG, seen alike by the solver loop.
class SpiritSolver final : public ResidualAlg {
public:
    explicit SpiritSolver(Pocs& p) : pocs_(&p) {}
    explicit SpiritSolver(L1SpiritSlabs& s) : slabs_(&s) {}
    explicit SpiritSolver(Fista& f) : fista_(&f) {}
    explicit SpiritSolver(ConjugateGradient& cg) : cg_(&cg) {}
    void update() override { alg().update(); }
    bool done() const override { return alg().done(); }
    int iteration() const override { return alg().iteration(); }
    const std::vector<double>& residuals() const override {
        return pocs_ ? pocs_->residuals() : slabs_ ? slabs_->residuals() : fista_ ? fista_->residuals() : cg_->residuals();
    }

private:
    Alg& alg() const {
        if (pocs_) return *pocs_;
        if (slabs_) return *slabs_;
        if (fista_) return *fista_;
        return *cg_;
    }
    Pocs* pocs_ = nullptr;
    L1SpiritSlabs* slabs_ = nullptr;
    Fista* fista_ = nullptr;
    ConjugateGradient* cg_ = nullptr;
};

class SpiritGadget final : public TypedGadget<ReconBuffer> {
public:
    explicit SpiritGadget(const config::Spirit& cfg) : s_(settings_of(cfg)) {}

    // G: C per-voxel matrices of C entries = C coil-sized arrays (its adjoint layout as many again for
    // CG); merged data, hybrid data, the coil images, the solver's workspaces (POCS: the previous
    // iterate, the FFT's, the wavelet's, the SPIRiT step's, the measured data: 5; CG: r, p, Ap, b and
    // the stacked residual: 6; FISTA: A^H y, z, the gradient, the next iterate, the stacked output and the
    // normal operator's, the wavelet's: 7), the ESPIRiT maps and their work (3): 12 more (13 for FISTA).
    uint64_t working_set(const ISMRMRD::IsmrmrdHeader& h) const override {
        uint64_t coils = 1;
        if (h.acquisitionSystemInformation && h.acquisitionSystemInformation->receiverChannels)
            coils = std::max<uint64_t>(*h.acquisitionSystemInformation->receiverChannels, 1);
        const bool penalised = s_.method != config::Spirit::METHOD_POCS;
        const uint64_t g = penalised ? 2 * coils : coils;
        return declared_kspace_bytes(h, saturating_add(g, s_.method == config::Spirit::METHOD_FISTA ? 13 : 12));
    }

    // 3D l1-SPIRiT splits its volume into slabs over the session's devices.
    bool splits_across_devices() const override { return s_.method == config::Spirit::METHOD_POCS; }

    void start(const SessionContext& ctx) override {
        backend_ = ctx.backend;
        backends_ = {ctx.backend};
        backends_.insert(backends_.end(), ctx.peers.begin(), ctx.peers.end());
        chain_ = ctx.chain_name;
        session_ = ctx.session_id;
        if (!backend_) throw std::runtime_error("Spirit: the session has no backend");
    }

    void process(ReconBuffer& rb, Emitter& out) override {
        if (rb.data.empty()) {
            spdlog::debug("[{}] Spirit: a buffer of calibration lines only; nothing to reconstruct", session_);
            return;
        }
        const auto t0 = std::chrono::steady_clock::now();
        Backend& be = *backend_;
        const Shape& shape = rb.data.data.shape();
        if (shape.rank() != 4)
            throw std::runtime_error("Spirit: k-space buffer of shape " + shape.str() + ", expected [RO, E1, E2, CH]");
        const size_t ro = shape[0], e1 = shape[1], e2 = shape[2], nc = shape[3];
        const bool volume = e2 > 1;
        const MergedKSpace merged = merged_kspace(be, rb, kGadget);
        const coils::CalibrationRegion region = calibration_region(rb);
        const KSpace& cal = calibration_kspace(rb);

        // Kernels (3D scans: k^3 kernels of the 3D calibration block), and for 3D the data with the readout
        // transformed (independent (E1, E2) slices, each with its own image-space G).
        CArray g, data = merged.data;
        coils::SpiritKernels kernels3d;
        const bool slabs = volume && s_.method == config::Spirit::METHOD_POCS;
        try {
            if (!volume) {
                const size_t lines = std::min(region.e1_lines(), kMostCalibration);
                const CArray block = coils::calibration_block(be.to_host(cal.data), region.e1_lo, region.e1_hi,
                                                              std::min(ro, lines), lines);
                g = coils::spirit_image_kernels(be, coils::spirit_kernels(be, block, s_.kernels), ro, e1);
            } else {
                // POCS builds each slab's G on its own device (core/recon/l1_spirit_slabs.h); CG the whole.
                kernels3d = coils::spirit_kernels_3d(be, cal.data, region.e1_lo, region.e1_hi, region.e2_lo,
                                                     region.e2_hi, kMostCalibration3d, s_.kernels);
                if (!slabs) g = coils::spirit_image_kernels(be, kernels3d, ro, e1, e2);
                data = be.empty(shape);
                be.fft(merged.data, data, 0b001u, FFTDirection::Inverse);
            }
        } catch (const coils::SpiritError& e) {
            throw std::runtime_error("Spirit: the kernels cannot be calibrated on the region " + region.str() + ": " +
                                     e.what());
        }
        const RArray mask3 = readout_mask(merged.sampled, ro, e1, e2);
        const RArray mask = volume ? mask3 : mask3.reshaped({ro, e1});

        CArray images;
        std::unique_ptr<L1Spirit> pocs;
        std::unique_ptr<L1SpiritFista> fista;
        std::unique_ptr<L1SpiritSlabs> split;
        CgSpirit cg;
        std::unique_ptr<SpiritSolver> solver;
        if (s_.method == config::Spirit::METHOD_CG) {
            cg = cg_spirit(backend_, data, mask, g, s_.consistency_lambda, s_.solver.cg());
            images = cg.images;
            solver = std::make_unique<SpiritSolver>(*cg.solver);
        } else if (s_.method == config::Spirit::METHOD_FISTA) {
            fista = std::make_unique<L1SpiritFista>(l1_spirit_fista(backend_, data, mask, g, s_.fista));
            images = fista->images;
            solver = std::make_unique<SpiritSolver>(*fista->solver);
        } else if (slabs) {
            split = std::make_unique<L1SpiritSlabs>(backends_, data, mask, kernels3d, s_.pocs, s_.slab_slices);
            data = CArray{};  // each slab holds its own part
            solver = std::make_unique<SpiritSolver>(*split);
        } else {
            pocs = std::make_unique<L1Spirit>(l1_spirit(backend_, data, mask, g, s_.pocs));
            images = pocs->images;
            solver = std::make_unique<SpiritSolver>(*pocs->solver);
        }
        const bool deadline_hit = run_solver_loop(*solver, s_.solver, kStage, t0, out);
        if (split) images = split->images(be);

        CArray combined = be.empty({ro, e1, e2, 1});
        CArray plane = combined.reshaped({ro, e1, e2});
        std::string combination = "root sum of squares";
        if (s_.combine == config::Spirit::COMBINE_RSS) {
            coils::rss_last_axis(be, images.reshaped({ro, e1, e2, nc}), plane);
        } else {
            const coils::EspiritMaps maps = buffer_espirit_maps(be, rb, region, s_.espirit, kGadget);
            coils::check_coil_maps(be, maps.maps, kGadget, "the calibration region " + region.str());
            be.reduce_conj_mul(maps.maps.reshaped({ro, e1, e2, nc}), images.reshaped({ro, e1, e2, nc}), plane);
            combination = describe(s_.espirit) + " maps";
        }

        const std::string method = method_name();
        ImageArray img;
        img.acquisitions = rb.acquisitions;
        img.data = to_recon_grid(be, combined, rb.geometry);
        img.head = image_header_from(rb.data.reference, rb.geometry, img.data.shape(), ++image_index_);
        img.meta.set(kMetaDataRole, "Image");
        img.meta.set(kMetaGadgetronDataRole, "Image");
        append_processing_history(img.meta, "SPIRIT");
        img.meta.set("LarmorChain", chain_.c_str());
        img.meta.set("LarmorVersion", LARMOR_VERSION);
        SolverKnobs recorded = s_.solver;
        recorded.lambda = s_.method == config::Spirit::METHOD_CG      ? s_.consistency_lambda
                          : s_.method == config::Spirit::METHOD_FISTA ? s_.fista.lambda
                                                                      : s_.pocs.lambda;
        record_solver_meta(img.meta, "Spirit", *solver, recorded, deadline_hit);
        img.meta.set("SpiritMethod", method.c_str());
        img.meta.set("SpiritKernel", long(s_.kernels.kernel));
        img.meta.set("SpiritCalibration", region.str().c_str());
        img.meta.set("SpiritCombination", combination.c_str());
        if (pocs) img.meta.set("SpiritThreshold", double(pocs->threshold));
        if (fista) {
            img.meta.set("SpiritThreshold", double(fista->threshold));
            img.meta.set("SpiritConsistencyLambda", double(s_.fista.consistency_lambda));
            img.meta.set("SpiritLipschitz", double(fista->lipschitz));
        }
        if (split) {
            img.meta.set("SpiritThreshold", double(split->threshold()));
            img.meta.set("SpiritSlabs", long(split->slabs().size()));
            img.meta.set("SpiritDevices", long(backends_.size()));
        }
        img.meta.set("ImageComment", method.c_str());
        CalibrationProvenance cp;
        cp.method = method;
        cp.kernel = "SPIRiT " + std::to_string(s_.kernels.kernel) + "x" + std::to_string(s_.kernels.kernel) +
                    (volume ? " per readout position" : "");
        cp.lambda = s_.kernels.lambda;
        cp.region = region.str();
        cp.maps = combination;
        record_calibration_provenance(img.meta, cp);
        const std::string spread = split ? ", " + std::to_string(split->slabs().size()) + " slab(s) on " +
                                               std::to_string(backends_.size()) + " backend(s)"
                                         : std::string();
        spdlog::info("[{}] Spirit: {} {} -> {} in {} iterations, residual {:.3e}, calibration {}{}, {:.1f} ms", session_,
                     method, shape.str(), img.data.shape().str(), solver->iteration(), solver->residual(), region.str(),
                     spread, milliseconds_since(t0));
        emit_or_fail(std::move(img), solver_failure(method, *solver, s_.solver, deadline_hit), out);
    }

private:
    std::string method_name() const {
        switch (s_.method) {
            case config::Spirit::METHOD_CG: return "CG-SPIRiT";
            case config::Spirit::METHOD_FISTA: return s_.fista.lambda > 0 ? "l1-SPIRiT (penalised, FISTA)" : "SPIRiT (FISTA)";
            default: return s_.pocs.lambda > 0 ? "l1-SPIRiT" : "POCS SPIRiT";
        }
    }

    SpiritGadgetSettings s_;
    std::shared_ptr<Backend> backend_;
    std::vector<std::shared_ptr<Backend>> backends_;  // backend_ first, then the session's other devices
    std::string chain_, session_;
    uint16_t image_index_ = 0;
};

}  // namespace

std::unique_ptr<Gadget> make_spirit(const config::Spirit& cfg) { return std::make_unique<SpiritGadget>(cfg); }

}  // namespace larmor
