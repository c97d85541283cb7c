// ToeplitzCg: the iterative, physically modelled reconstruction of arbitrary-trajectory data (Stone et
// al., J. Parallel Distrib. Comput. 68:1307, 2008): CG on (S^H F^H W F S + lambda R^H R) rho =
// S^H F^H W d with FHd exact and F^H W F as a Toeplitz convolution (core/recon/toeplitz_cg.h). The
// gadget adapts the stream: coordinates and data of a trajectory buffer, density weights when asked,
// coil maps for multi-coil data, Q kept while the trajectory repeats, the shared solver loop
// (progress, deadline, the solver's record in the meta) and the image header.
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include <spdlog/spdlog.h>

#include "core/trajectory/trajectory.h"
#include "core/recon/toeplitz_cg.h"
#include "gadgets/chain_config.h"
#include "gadgets/encoding.h"
#include "gadgets/factories.h"
#include "gadgets/image_header.h"
#include "gadgets/iterative/settings.h"
#include "gadgets/iterative/solver_loop.h"
#include "gadgets/noncart/density_weights.h"
#include "gadgets/noncart/nufft_plan_cache.h"
#include "gadgets/sense/calibration.h"
#include "gadgets/sense/noncartesian_sense.h"
#include "gadgets/typed_gadget.h"

#ifndef LARMOR_VERSION
#define LARMOR_VERSION "unknown"
#endif

namespace larmor {
namespace {

constexpr int kDefaultIterations = 60;  // Stone et al.'s count

struct Settings {
    SolverKnobs solver;
    NufftOptions nufft;
    ToeplitzCgSetup setup;
    config::ToeplitzCg::Kernel q = config::ToeplitzCg::Q_AUTO;
    DensityRequest density;
    float calibration_radius = 12.f;
    int map_kernel = 7, map_stride = 7;
};

Settings settings_of(const config::ToeplitzCg& c) {
    Settings s;
    config::SolverSettings solver = c.solver();
    if (solver.iterations() == 0) solver.set_iterations(kDefaultIterations);
    s.solver = solver_knobs(solver, "ToeplitzCg");
    s.nufft = nufft_options(c.nufft(), "ToeplitzCg");
    s.setup.basis = c.voxel_basis() == config::ToeplitzCg::VOXEL_BOX ? VoxelBasis::Box : VoxelBasis::Dirac;
    s.setup.adjoint = c.adjoint() == config::ToeplitzCg::FHD_NUFFT ? ToeplitzCgSetup::Adjoint::Nufft
                                                                  : ToeplitzCgSetup::Adjoint::Exact;
    s.setup.normal = c.normal() == config::ToeplitzCg::NORMAL_NUFFT_PAIR ? ToeplitzCgSetup::Normal::NufftPair
                                                                        : ToeplitzCgSetup::Normal::Toeplitz;
    s.setup.regularizer = c.regularizer() == config::ToeplitzCg::REGULARIZER_FINITE_DIFFERENCES
                              ? ToeplitzCgSetup::Regularizer::FiniteDifference
                              : ToeplitzCgSetup::Regularizer::Identity;
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

class ToeplitzCgGadget final : public TypedGadget<TrajectoryBuffer> {
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
        if (!backend_) throw std::runtime_error("ToeplitzCg: the session has no backend");
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
        if (s_.density.method != config::DENSITY_NONE) w = density_weights(backend_, tb, s_.density);
        const RArray weights = w ? w->reshaped({m}) : RArray();

        CArray maps;
        if (coils > 1) {
            DensityRequest cal = s_.density;
            if (cal.method == config::DENSITY_NONE) cal.method = config::DENSITY_PIPE_MENON;  // a fair low-res image
            const auto cw = density_weights(backend_, tb, cal);
            Nufft& plan = *plans_.get(backend_, tb.image, coils, coords, s_.nufft);
            const CArray m4 = noncartesian_coil_maps(backend_, tb, plan, cw->reshaped({m}), s_.calibration_radius,
                                                     s_.map_kernel, s_.map_stride);
            Shape ms = tb.image;
            ms.push_back(coils);
            maps = m4.reshaped(ms);
            check_coil_maps(be, maps, "ToeplitzCg", "the gridded k-space centre");
        }

        // Q depends on the trajectory, the grid, the weights and the basis: kept while they repeat.
        const uint64_t hash = trajectory::trajectory_hash(coords, tb.image);
        const bool toeplitz = setup.normal == ToeplitzCgSetup::Normal::Toeplitz;
        CArray spectrum;
        if (toeplitz && hash == q_hash_ && w == q_weights_ && setup.q == q_method_) spectrum = q_;
        const bool q_reused = !spectrum.empty();
        // The stages are timed apart (the log says each): Q is paid once per trajectory, the rest per buffer.
        be.synchronize();
        const double prep_ms = milliseconds_since(t0);
        auto t = std::chrono::steady_clock::now();
        double q_ms = 0;
        if (toeplitz && !q_reused) {
            spectrum = toeplitz_spectrum(backend_, tb.image, coords, weights, toeplitz_options(setup));
            be.synchronize();
            q_ms = milliseconds_since(t);
            q_ = spectrum;
            q_hash_ = hash;
            q_weights_ = w;
            q_method_ = setup.q;
        }
        t = std::chrono::steady_clock::now();
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
        meta.set("ToeplitzCgVoxelBasis", voxel_basis_name(setup.basis));
        meta.set("ToeplitzCgAdjoint", setup.adjoint == ToeplitzCgSetup::Adjoint::Exact ? "exact NUDFT (FHd)" : "NUFFT");
        meta.set("ToeplitzCgNormal", toeplitz ? (std::string("Toeplitz, Q ") + kernel_name(setup.q)).c_str() : "NUFFT pair");
        meta.set("ToeplitzCgCoils", static_cast<long>(coils));
        meta.set("LarmorTrajectory", tb.trajectory.c_str());
        meta.set("LarmorDensityCompensation", density_name(s_.density.method));
        meta.set("ImageComment", "TOEPLITZ_CG");
        spdlog::info("[{}] ToeplitzCg: {} readouts x {} samples x {} coils ({}) -> {} in {} iterations, residual "
                     "{:.3e}, {:.1f} ms: weights and maps {:.1f} ms, Q {} {:.1f} ms, F^H d {:.1f} ms, CG {:.1f} ms",
                     session_, ds[1], ds[0], coils, tb.trajectory, img.data.shape().str(), solver.iteration(),
                     solver.residual(), milliseconds_since(t0), prep_ms,
                     toeplitz ? (q_reused ? "reused" : "computed") : "not used", q_ms, rhs_ms, cg_ms);
        emit_or_fail(std::move(img), solver_failure("Toeplitz CG", solver, s_.solver, stopped), out);
    }

private:
    Settings s_;
    std::shared_ptr<Backend> backend_;
    std::string chain_, session_;
    NufftPlanCache plans_;
    CArray q_;
    uint64_t q_hash_ = 0;
    std::shared_ptr<const RArray> q_weights_;
    ToeplitzOptions::Method q_method_ = ToeplitzOptions::Method::Exact;
    uint16_t image_index_ = 0;
};

}  // namespace

std::unique_ptr<Gadget> make_toeplitz_cg(const config::ToeplitzCg& cfg) { return std::make_unique<ToeplitzCgGadget>(cfg); }

}  // namespace larmor
