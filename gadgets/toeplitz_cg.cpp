// ToeplitzCg: the iterative, physically modelled reconstruction of arbitrary-trajectory data (Stone et
// al., J. Parallel Distrib. Comput. 68:1307, 2008): CG on (S^H F^H W F S + lambda R^H R) rho =
// S^H F^H W d with FHd exact and F^H W F as a Toeplitz convolution (core/recon/toeplitz_cg.h). The
// gadget adapts the stream: coordinates and data of a trajectory buffer, density weights when asked,
// coil maps for multi-coil data, Q kept while the trajectory repeats, the anatomical reference (an
// image the client sent, or the data's gridding image), the shared solver loop (progress, deadline,
// the solver's record in the meta) and the image header.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/coils/calibration.h"
#include "core/linops/sense.h"
#include "core/recon/anatomical_weights.h"
#include "core/recon/toeplitz_cg.h"
#include "core/trajectory/trajectory.h"
#include "gadgets/chain_config.h"
#include "gadgets/encoding.h"
#include "gadgets/factories.h"
#include "gadgets/image_header.h"
#include "gadgets/image_magnitude.h"
#include "gadgets/iterative/settings.h"
#include "gadgets/iterative/solver_loop.h"
#include "gadgets/noncart/cached_toeplitz.h"
#include "gadgets/noncart/density_weights.h"
#include "gadgets/noncart/nufft_plan_cache.h"
#include "gadgets/sense/noncartesian_sense.h"
#include "gadgets/typed_gadget.h"

#ifndef LARMOR_VERSION
#define LARMOR_VERSION "unknown"
#endif

namespace larmor {
namespace {

constexpr int kDefaultIterations = 60;  // Stone et al.'s count

struct ToeplitzCgSettings {
    SolverKnobs solver;
    NufftOptions nufft;
    ToeplitzCgSetup setup;
    config::ToeplitzCg::Kernel q = config::ToeplitzCg::Q_AUTO;
    DensityRequest density;
    float calibration_radius = 12.f;
    int map_kernel = 7, map_stride = 7;
    bool reference_from_stream = false;  // REGULARIZER_ANATOMICAL: a sent image, else the gridding image
    float edge_threshold = 0.05f;
};

ToeplitzCgSettings settings_of(const config::ToeplitzCg& c) {
    ToeplitzCgSettings s;
    config::SolverSettings solver = c.solver();
    if (solver.iterations() == 0) solver.set_iterations(kDefaultIterations);
    s.solver = solver_knobs(solver, "ToeplitzCg");
    s.nufft = nufft_options(c.nufft(), "ToeplitzCg");
    s.setup.basis = c.voxel_basis() == config::ToeplitzCg::VOXEL_BOX ? VoxelBasis::Box : VoxelBasis::Dirac;
    s.setup.adjoint = c.adjoint() == config::ToeplitzCg::FHD_NUFFT ? ToeplitzCgSetup::Adjoint::Nufft
                                                                  : ToeplitzCgSetup::Adjoint::Exact;
    s.setup.normal = c.normal() == config::ToeplitzCg::NORMAL_NUFFT_PAIR ? ToeplitzCgSetup::Normal::NufftPair
                                                                        : ToeplitzCgSetup::Normal::Toeplitz;
    switch (c.regularizer()) {
        case config::ToeplitzCg::REGULARIZER_FINITE_DIFFERENCES:
            s.setup.regularizer = ToeplitzCgSetup::Regularizer::FiniteDifference;
            break;
        case config::ToeplitzCg::REGULARIZER_ANATOMICAL:
            s.setup.regularizer = ToeplitzCgSetup::Regularizer::AnatomicalFiniteDifference;
            break;
        default: s.setup.regularizer = ToeplitzCgSetup::Regularizer::Identity;
    }
    s.reference_from_stream = c.anatomical_reference() == config::ToeplitzCg::REFERENCE_STREAM;
    s.edge_threshold = c.edge_threshold() == 0.f ? 0.05f : c.edge_threshold();
    if (!(s.edge_threshold > 0.f && s.edge_threshold < 1.f))
        throw ConfigError("ToeplitzCg: edge_threshold " + std::to_string(c.edge_threshold()) +
                          " is outside (0, 1) (a fraction of the reference's maximum; 0 = 0.05)");
    s.setup.accurate_sincos = c.accurate_sincos();
    s.setup.nufft = s.nufft;
    s.setup.lambda = s.solver.lambda;
    s.setup.cg = s.solver.cg();
    s.q = c.q();
    s.density.method = c.has_density() ? c.density() : config::DENSITY_NONE;
    s.density.tolerance = s.nufft.tolerance;
    s.calibration_radius = c.calibration_radius() == 0.f ? 12.f : c.calibration_radius();
    s.map_kernel = c.map_kernel_size() == 0 ? 7 : c.map_kernel_size();
    s.map_stride = c.map_stride() == 0 ? s.map_kernel : c.map_stride();
    if (!(s.calibration_radius >= 2.f && s.calibration_radius <= 1024.f))
        throw ConfigError("ToeplitzCg: calibration_radius " + std::to_string(c.calibration_radius()) +
                          " is outside 2..1024 cycles per FOV");
    if (s.map_kernel < 1 || s.map_kernel > 255)
        throw ConfigError("ToeplitzCg: map_kernel_size " + std::to_string(c.map_kernel_size()) + " is outside 1..255");
    if (s.map_stride < 1 || s.map_stride > 64)
        throw ConfigError("ToeplitzCg: map_stride " + std::to_string(c.map_stride()) + " is outside 0..64");
    return s;
}

const char* kernel_name(ToeplitzOptions::Method m) { return m == ToeplitzOptions::Method::Exact ? "exact" : "NUFFT 1e-6"; }

class ToeplitzCgGadget final : public TypedGadget<TrajectoryBuffer, Image> {
public:
    explicit ToeplitzCgGadget(const config::ToeplitzCg& cfg) : s_(settings_of(cfg)) {}

    // Per coil: the data, their weighted copy and the NUDFT's scratch (3 k-space buffers), the maps
    // (1); the Toeplitz operator's two work arrays on the 2N grid (2 x 2^d coil images) and its spectrum
    // (2^d images); CG's vectors and the right-hand side (5 images).
    uint64_t working_set(const ISMRMRD::IsmrmrdHeader& h) const override {
        const bool three_d = !h.encoding.empty() && h.encoding[0].encodedSpace.matrixSize.z > 1;
        const uint64_t grid = three_d ? 8 : 4;
        return saturating_add(declared_kspace_bytes(h, 4 + 2 * grid), declared_image_bytes(h, 5 + grid));
    }

    void start(const SessionContext& ctx) override {
        backend_ = ctx.backend;
        chain_ = ctx.chain_name;
        session_ = ctx.session_id;
        cache_ = &precompute_cache(ctx);
        if (!backend_) throw std::runtime_error("ToeplitzCg: the session has no backend");
    }

    // An image the client sent: the anatomical reference when the chain asks for one from the stream
    // (the last one counts), otherwise passed on as it came.
    void process(Image& image, Emitter& out) override {
        if (!anatomical() || !s_.reference_from_stream) {
            out.emit(Message(std::move(image)));
            return;
        }
        const auto& m = image.head.matrix_size;
        reference_shape_ = m[2] > 1 ? Shape{m[0], m[1], m[2]} : Shape{m[0], m[1]};
        try {
            reference_ = image_magnitude(image);
        } catch (const std::exception& e) {
            throw std::runtime_error(std::string("ToeplitzCg: the anatomical reference image: ") + e.what());
        }
        spdlog::info("[{}] ToeplitzCg: anatomical reference image {} received (series {}, index {})", session_,
                     reference_shape_.str(), image.head.image_series_index, image.head.image_index);
    }

    void process(TrajectoryBuffer& tb, Emitter& out) override {
        const auto t0 = std::chrono::steady_clock::now();
        Backend& be = *backend_;
        const Shape& ds = tb.data.shape();  // [S, R, C]
        const size_t m = ds[0] * ds[1], coils = ds[2];
        const RArray coords = tb.coords.reshaped({tb.coords.shape()[0], m});
        ToeplitzCgSetup setup = s_.setup;
        setup.q = s_.q == config::ToeplitzCg::Q_EXACT ||
                          (s_.q == config::ToeplitzCg::Q_AUTO && be.device() == Device::Cuda)
                      ? ToeplitzOptions::Method::Exact
                      : ToeplitzOptions::Method::Nufft;

        // W: none by default (the array stays empty, W = I).
        std::shared_ptr<const RArray> w;
        if (s_.density.method != config::DENSITY_NONE) w = density_weights(*cache_, backend_, tb, s_.density);
        const RArray weights = w ? w->reshaped({m}) : RArray();

        CArray maps;
        DensityRequest cal = s_.density;
        if (cal.method == config::DENSITY_NONE) cal.method = config::DENSITY_PIPE_MENON;  // a fair low-res image
        if (coils > 1) {
            const auto cw = density_weights(*cache_, backend_, tb, cal);
            Nufft& plan = *plans_.get(*cache_, backend_, tb.image, coils, coords, s_.nufft);
            const CArray m4 = noncartesian_coil_maps(backend_, tb, plan, cw->reshaped({m}), s_.calibration_radius,
                                                     s_.map_kernel, s_.map_stride);
            Shape ms = tb.image;
            ms.push_back(coils);
            maps = m4.reshaped(ms);
            coils::check_coil_maps(be, maps, "ToeplitzCg", "the gridded k-space centre");
        }
        if (anatomical()) setup.edge_weights = edge_weights(tb, coords, maps, cal);

        // The stages are timed apart (the log says each): Q is paid once per trajectory and server (the
        // precompute cache keeps it for every later session), the rest per buffer.
        const bool toeplitz = setup.normal == ToeplitzCgSetup::Normal::Toeplitz;
        be.synchronize();
        const double prep_ms = milliseconds_since(t0);
        CArray spectrum;
        double q_ms = 0;
        const char* q_source = "not used";
        if (toeplitz) {
            const CachedSpectrum q =
                cached_toeplitz_spectrum(*cache_, backend_, tb.image, coords, weights, toeplitz_options(setup));
            spectrum = q.spectrum;
            q_ms = 1e3 * q.seconds;
            q_source = PrecomputeCache::source_name(q.source);
        }
        auto t = std::chrono::steady_clock::now();
        ToeplitzCg p = toeplitz_cg(backend_, tb.image, coords, tb.data.reshaped({m, coils}), maps, weights, setup, spectrum);
        be.synchronize();
        const double rhs_ms = milliseconds_since(t);
        t = std::chrono::steady_clock::now();
        ResidualAlgRef<ConjugateGradient> solver(*p.solver);
        const bool stopped = run_solver_loop(solver, s_.solver, "toeplitz_cg", t0, out);
        be.synchronize();
        const double cg_ms = milliseconds_since(t);

        ImageArray img;
        img.acquisitions = tb.acquisitions;
        const size_t nz = tb.image.rank() == 3 ? tb.image[2] : 1;
        img.data = p.image.reshaped({tb.image[0], tb.image[1], nz, 1});
        img.head = image_header_from(tb.reference, tb.geometry, img.data.shape(), ++image_index_);
        ISMRMRD::MetaContainer& meta = img.meta;
        meta.set(kMetaDataRole, "Image");
        meta.set(kMetaGadgetronDataRole, "Image");
        append_processing_history(meta, "TOEPLITZ_CG");
        meta.set("LarmorChain", chain_.c_str());
        meta.set("LarmorVersion", LARMOR_VERSION);
        record_solver_meta(meta, "ToeplitzCg", solver, s_.solver, stopped);
        meta.set("ToeplitzCgLambdaAbsolute", p.lambda_absolute);
        meta.set("ToeplitzCgRegularizer", regularizer_name(setup.regularizer));
        if (anatomical()) {
            meta.set("ToeplitzCgAnatomicalReference", s_.reference_from_stream ? "image from the stream" : "gridding");
            meta.set("ToeplitzCgEdgeThreshold", double(s_.edge_threshold));
            meta.set("ToeplitzCgUnpenalisedDifferences", edge_fraction(setup.edge_weights));
        }
        meta.set("ToeplitzCgVoxelBasis", voxel_basis_name(setup.basis));
        meta.set("ToeplitzCgAdjoint", setup.adjoint == ToeplitzCgSetup::Adjoint::Exact ? "exact NUDFT (FHd)" : "NUFFT");
        meta.set("ToeplitzCgNormal", toeplitz ? (std::string("Toeplitz, Q ") + kernel_name(setup.q)).c_str() : "NUFFT pair");
        meta.set("ToeplitzCgQ", q_source);
        meta.set("ToeplitzCgCoils", static_cast<long>(coils));
        meta.set("LarmorTrajectory", tb.trajectory.c_str());
        meta.set("LarmorDensityCompensation", density_name(s_.density.method));
        meta.set("ImageComment", "TOEPLITZ_CG");
        spdlog::info("[{}] ToeplitzCg: {} readouts x {} samples x {} coils ({}) -> {} in {} iterations, residual "
                     "{:.3e}, {:.1f} ms: weights and maps {:.1f} ms, Q {} {:.1f} ms, F^H d {:.1f} ms, CG {:.1f} ms",
                     session_, ds[1], ds[0], coils, tb.trajectory, img.data.shape().str(), solver.iteration(),
                     solver.residual(), milliseconds_since(t0), prep_ms,
                     q_source, q_ms, rhs_ms, cg_ms);
        emit_or_fail(std::move(img), solver_failure("Toeplitz CG", solver, s_.solver, stopped), out);
    }

private:
    bool anatomical() const {
        return s_.setup.regularizer == ToeplitzCgSetup::Regularizer::AnatomicalFiniteDifference;
    }

    // The regulariser's edge weights from the sent reference, or from the gridding image of the data
    // (density-compensated NUFFT adjoint, combined with the coil maps: the image a reader would look at).
    RArray edge_weights(const TrajectoryBuffer& tb, const RArray& coords, const CArray& maps, const DensityRequest& cal) {
        if (s_.reference_from_stream) {
            if (reference_.empty())
                throw std::runtime_error(
                    "ToeplitzCg: regularizer REGULARIZER_ANATOMICAL with anatomical_reference REFERENCE_STREAM needs "
                    "an image of the anatomy before the data (larmor-client --send-images); none arrived");
            if (reference_shape_ != tb.image)
                throw std::runtime_error("ToeplitzCg: the anatomical reference image " + reference_shape_.str() +
                                         " is not the reconstruction matrix " + tb.image.str());
            RArray r = RArray::host(tb.image);
            std::copy(reference_.begin(), reference_.end(), r.data());
            return anatomical_edge_weights(r, s_.edge_threshold);
        }
        Backend& be = *backend_;
        const Shape& ds = tb.data.shape();
        const size_t m = ds[0] * ds[1], coils = ds[2];
        const auto w = density_weights(*cache_, backend_, tb, cal);
        Nufft& plan = *plans_.get(*cache_, backend_, tb.image, coils, coords, s_.nufft);
        CArray dw = be.empty({m, coils});
        be.mul(tb.data.reshaped({m, coils}), be.to_device(w->reshaped({m})), dw);
        Shape cs = tb.image;
        cs.push_back(coils);
        CArray x = be.empty(cs);
        plan.adjoint(dw, x);
        CArray combined;
        if (maps.empty()) {
            combined = x.reshaped(tb.image);
        } else {
            combined = be.empty(tb.image);
            sense(backend_, maps)->adjoint(x, combined);
        }
        const CArray h = be.to_host(combined);
        RArray r = RArray::host(tb.image);
        for (size_t i = 0; i < r.size(); ++i) r.data()[i] = std::abs(h.data()[i]);
        return anatomical_edge_weights(r, s_.edge_threshold);
    }

    ToeplitzCgSettings s_;
    std::shared_ptr<Backend> backend_;
    std::string chain_, session_;
    NufftPlanCache plans_;
    PrecomputeCache* cache_ = nullptr;
    uint16_t image_index_ = 0;
    std::vector<float> reference_;  // the sent reference's magnitude, x fastest
    Shape reference_shape_;
};

}  // namespace

std::unique_ptr<Gadget> make_toeplitz_cg(const config::ToeplitzCg& cfg) { return std::make_unique<ToeplitzCgGadget>(cfg); }

}  // namespace larmor
