// CG-SENSE on the operator core (core/linops, core/iter): the encoding E = M F S of a Cartesian
// acquisition, 256^2 pixels, 8 or 32 coils, R = 4 along y with 24 fully sampled centre lines,
// lambda = 0.01.
//   BM_CgSenseNormal{GPU,CPU}/coils     E^H E x alone (the normal operator, through the overrides:
//                                       S^H (F_y^H M F_y) S, core/linops/sampled_fft.h)
//   BM_CgSenseIteration{GPU,CPU}/coils/fused/recorded
//                                       one ConjugateGradient::update(): cg_update, the normal
//                                       operator and the Tikhonov term on the residual (fused: one
//                                       launch; composed: the operators), cg_coefficients and the
//                                       asynchronous read of ||r||^2; 25 iterations back to back
//                                       and a final wait, per iteration (what a reconstruction pays)
//   BM_CgSenseIterationPartsGPU/coils/part
//                                       that iteration taken apart (iteration_parts below)
//   BM_CgSenseMaps{GPU,CPU}/coils       the coil maps of a recon buffer (calibration region, image,
//                                       Walsh), then a wait
//   BM_CgSenseSetup{GPU,CPU}/coils      cartesian_sense(): the operators, E^H y and CG's start
//   BM_CgSenseRecon{GPU,CPU}/coils/maps the whole reconstruction once the last readout is in the
//                                       buffer: the CgSense gadget on a recon buffer (calibration
//                                       region, maps: 0 the gadget's default, ESPIRiT; 1 Walsh;
//                                       30 CG iterations, recon grid) and
//                                       ImageFinish's magnitude download, wall clock per buffer
// GPU timing: the normal operator by CUDA events around 20 back-to-back calls with the stream gated
// until all are queued (device time); the rest by the wall clock, ending with a wait for the device. Counter `bytes`: what the pipeline
// moves through memory per normal operator: expand (maps + x in, k out), FFT along y (in + out), mask
// (in, out), inverse FFT (in + out), coil sum (maps + image in, x out): 10 passes over one
// [256, 256, C] complex array, so bench_table.py shows time over that bound.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <random>

#include "core/backend.h"
#include "core/coils/calibration.h"
#include "core/iter/cg.h"
#include "core/linops/algebra.h"
#include "core/linops/sampled_fft.h"
#include "gadgets/factories.h"
#include "gadgets/message.h"
#include "gadgets/sense/cartesian_sense.h"
#include "core/linops/sense.h"
#include "core/linops/sense_normal.h"

#ifdef LARMOR_WITH_CUDA
#include "bench/gpu_timing.h"
#include "cuda/cuda_backend.h"
#endif

namespace {

using larmor::Backend;
using larmor::CArray;
using larmor::cfloat;
using larmor::LinOp;
using larmor::RArray;
using larmor::Shape;

constexpr size_t kN = 256;
constexpr int kAccel = 4;
constexpr size_t kAcs = 24;
constexpr float kLambda = 0.01f;

// Smooth coil maps normalised to unit norm per pixel: Gaussian profiles around the FOV with a
// linear phase each (values do not change the timing, only realism).
CArray coil_maps(size_t coils) {
    CArray m = CArray::host({kN, kN, coils});
    std::vector<double> norm(kN * kN, 0.0);
    for (size_t c = 0; c < coils; ++c) {
        const double a = 2 * M_PI * double(c) / double(coils);
        const double cx = 0.5 + 0.45 * std::cos(a), cy = 0.5 + 0.45 * std::sin(a);
        for (size_t y = 0; y < kN; ++y)
            for (size_t x = 0; x < kN; ++x) {
                const double u = double(x) / kN, v = double(y) / kN;
                const double g = std::exp(-((u - cx) * (u - cx) + (v - cy) * (v - cy)) / 0.08);
                const double ph = 3.0 * (u * std::cos(a) + v * std::sin(a));
                m.data()[(c * kN + y) * kN + x] = cfloat(float(g * std::cos(ph)), float(g * std::sin(ph)));
                norm[y * kN + x] += g * g;
            }
    }
    for (size_t c = 0; c < coils; ++c)
        for (size_t p = 0; p < kN * kN; ++p) m.data()[c * kN * kN + p] /= float(std::sqrt(norm[p]));
    return m;
}

RArray sampling(size_t coils) {
    (void)coils;
    RArray mask = RArray::host({kN, kN});
    for (size_t y = 0; y < kN; ++y) {
        const bool acs = y >= kN / 2 - kAcs / 2 && y < kN / 2 + kAcs / 2;
        if (y % kAccel != 0 && !acs) continue;
        for (size_t x = 0; x < kN; ++x) mask.data()[y * kN + x] = 1.f;
    }
    return mask;
}

CArray random_host(const Shape& s, unsigned seed) {
    CArray a = CArray::host(s);
    std::mt19937 gen(seed);
    std::normal_distribution<float> nd;
    for (size_t i = 0; i < a.size(); ++i) {
        const float re = nd(gen);
        a.data()[i] = cfloat(re, nd(gen));
    }
    return a;
}

struct Problem {
    LinOp e;
    CArray y;
    LinOp fused;  // the fused E^H E + lambda I (core/linops/sense_normal.h)
};

Problem make_problem(const std::shared_ptr<Backend>& be, size_t coils) {
    const Shape ks{kN, kN, coils};
    Problem p;
    p.e = larmor::compose(larmor::sampled_fft(be, ks, 3u, sampling(coils)), larmor::sense(be, coil_maps(coils)));
    p.y = be->to_device(random_host(ks, 3));
    const RArray mask = sampling(coils);
    std::vector<float> lines(kN);
    for (size_t y = 0; y < kN; ++y) lines[y] = mask.data()[y * kN];
    p.fused = larmor::sense_normal(be, coil_maps(coils), lines, kLambda);
    return p;
}

// The composed operator's 10 passes over the coil array (bench/FLOORS-cg-sense.md); the fused one reads
// the maps and the image and writes the result: C + 2 image-sized arrays.
double normal_bytes(size_t coils, bool fused) {
    return fused ? double(kN * kN * (coils + 2)) * sizeof(cfloat) : 10.0 * double(kN * kN * coils) * sizeof(cfloat);
}

std::shared_ptr<Backend> backend(bool gpu, benchmark::State& state) {
    if (!gpu) return larmor::make_cpu_backend();
    if (!larmor::cuda_available()) {
        state.SkipWithError("no CUDA device");
        return nullptr;
    }
    return larmor::make_cuda_backend();
}

void normal_op(benchmark::State& state, bool gpu) {
    auto be = backend(gpu, state);
    if (!be) return;
    const size_t coils = static_cast<size_t>(state.range(0));
    const bool fused = state.range(1) != 0;
    Problem p = make_problem(be, coils);
    const CArray x = be->to_device(random_host({kN, kN}, 4));
    CArray z = be->empty({kN, kN});
    auto apply = [&] { fused ? p.fused->forward(x, z) : p.e->normal(x, z); };
    apply();  // plans, workspaces
    be->synchronize();
#ifdef LARMOR_WITH_CUDA
    if (gpu) {
        const double host = larmor::bench::device_timed(state, larmor::cuda::backend_stream(*be), apply);
        state.counters["host_us_per_call"] = host * 1e6;
    }
#endif
    if (!gpu)
        for (auto _ : state) {
            const auto t0 = std::chrono::steady_clock::now();
            apply();
            state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
    state.counters["bytes"] = normal_bytes(coils, fused);
    state.SetLabel(be->describe());
}

void iteration(benchmark::State& state, bool gpu) {
    auto be = backend(gpu, state);
    if (!be) return;
    const size_t coils = static_cast<size_t>(state.range(0));
    const bool fused = state.range(1) != 0;
    const bool record = state.range(2) != 0;  // iterations replayed from a recording (a CUDA graph)
    Problem p = make_problem(be, coils);
    constexpr int kRun = 25;  // iterations per timed run, from a fresh start (set-up untimed)
    std::unique_ptr<larmor::ConjugateGradient> cg;
    CArray b = be->empty({kN, kN});
    p.e->adjoint(p.y, b);
    auto restart = [&] {
        cg = fused ? std::make_unique<larmor::ConjugateGradient>(p.fused, b, be->zeros({kN, kN}),
                                                                 larmor::CGOptions{kRun, 0.0, record})
                   : larmor::cg_least_squares(p.e, p.y, be->zeros({kN, kN}), kLambda, {kRun, 0.0, record});
        be->synchronize();
    };
    restart();
    for (int i = 0; i < 3; ++i) cg->update();
    for (auto _ : state) {
        state.PauseTiming();
        restart();
        state.ResumeTiming();
        const auto t0 = std::chrono::steady_clock::now();
        while (!cg->done()) cg->update();
        be->synchronize();
        state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kRun);
    }
    state.counters["recorded"] = cg->recorded() ? 1 : 0;
    state.counters["bytes"] = normal_bytes(coils, fused);
    state.SetLabel(be->describe());
}

#ifdef LARMOR_WITH_CUDA
// One CG iteration taken apart, device time by CUDA events (20 calls back to back, gated): where the
// wall-clock iteration of BM_CgSenseIteration goes. Part: 0 cg_update, 1 the fused normal operator,
// 2 cg_coefficients, 7 the operator with the coefficients in its epilogue (forward_cg, what CG
// calls), 3 cg_update and forward_cg in a row (direct launches), 4 the two replayed as one recording,
// 5 the replay and the 8-byte read of ||r||^2 (the reads awaited after the batch), 6 the wall time of
// recording and instantiating the iteration (what every new ConjugateGradient pays once).
void iteration_parts(benchmark::State& state) {
    auto be = backend(true, state);
    if (!be) return;
    const size_t coils = static_cast<size_t>(state.range(0));
    const int part = static_cast<int>(state.range(1));
    Problem pr = make_problem(be, coils);
    CArray x = be->zeros({kN, kN}), r = be->to_device(random_host({kN, kN}, 5)), w = be->empty({kN, kN});
    CArray p = be->zeros({kN, kN}), s = be->zeros({kN, kN}), scalars = be->zeros({4});
    CArray rr = scalars.view(0, {1});
    auto update = [&] { be->cg_update(w, scalars, p, s, x, r); };
    auto normal = [&] { pr.fused->forward(r, w); };
    auto coefficients = [&] { be->cg_coefficients(r, w, scalars); };
    auto normal_cg = [&] { pr.fused->forward_cg(r, w, scalars); };
    auto all = [&] {
        update();
        normal_cg();
    };
    normal();
    coefficients();
    all();
    be->synchronize();
    std::unique_ptr<larmor::Recording> rec = be->record(all);
    std::vector<std::unique_ptr<Backend::PendingRead>> reads;
    std::function<void()> call;
    switch (part) {
        case 0: call = update; break;
        case 1: call = normal; break;
        case 2: call = coefficients; break;
        case 7: call = normal_cg; break;
        case 3: call = all; break;
        case 4: call = [&] { rec->replay(); }; break;
        case 5: call = [&] { rec->replay(); reads.push_back(be->read_async(rr)); }; break;
        default: break;
    }
    if (part == 6) {
        for (auto _ : state) {
            const auto t0 = std::chrono::steady_clock::now();
            auto again = be->record(all);
            benchmark::DoNotOptimize(again.get());
            state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
    } else {
        const double host = larmor::bench::device_timed(state, larmor::cuda::backend_stream(*be), [&] { call(); });
        state.counters["host_us_per_call"] = host * 1e6;
    }
    be->synchronize();
    reads.clear();
    state.counters["graph"] = rec->captured() ? 1 : 0;
}
void BM_CgSenseIterationPartsGPU(benchmark::State& s) { iteration_parts(s); }
#endif

// A recon buffer as the accumulator leaves it: k-space of a smooth object seen through the coil maps,
// imaging lines every kAccel-th line, the kAcs centre lines as calibration (ref), on the backend.
larmor::ReconBuffer recon_buffer(Backend& be, size_t coils) {
    const Shape ks{kN, kN, 1, coils};
    CArray object = CArray::host({kN, kN, 1});
    for (size_t y = 0; y < kN; ++y)
        for (size_t x = 0; x < kN; ++x) {
            const double u = (double(x) - kN / 2.0) / (kN * 0.4), v = (double(y) - kN / 2.0) / (kN * 0.3);
            object.data()[y * kN + x] = u * u + v * v < 1.0 ? cfloat(1.f + 0.3f * float(u), 0.2f) : cfloat(0.f, 0.f);
        }
    CArray coil_images = be.empty(ks), k = be.empty(ks);
    be.mul(be.to_device(coil_maps(coils).reshaped(ks)), be.to_device(object), coil_images);
    be.fft(coil_images, k, 3u, larmor::FFTDirection::Forward);
    RArray lattice = RArray::host({kN, kN, 1}), acs = RArray::host({kN, kN, 1});
    larmor::ReconBuffer rb;
    rb.data.sampled.assign(kN, 0);
    rb.ref.sampled.assign(kN, 0);
    for (size_t y = 0; y < kN; ++y) {
        const bool imaging = y % kAccel == 0, cal = y >= kN / 2 - kAcs / 2 && y < kN / 2 + kAcs / 2;
        rb.data.sampled[y] = imaging;
        rb.ref.sampled[y] = cal;
        for (size_t x = 0; x < kN; ++x) {
            lattice.data()[y * kN + x] = imaging ? 1.f : 0.f;
            acs.data()[y * kN + x] = cal ? 1.f : 0.f;
        }
    }
    rb.data.data = be.empty(ks);
    rb.ref.data = be.empty(ks);
    be.mul(k, be.to_device(lattice), rb.data.data);
    be.mul(k, be.to_device(acs), rb.ref.data);
    rb.data.reference.idx.kspace_encode_step_1 = kN / 2;
    for (int a = 0; a < 3; ++a) {
        rb.geometry.encoded_matrix[a] = rb.geometry.recon_matrix[a] = a < 2 ? kN : 1;
        rb.geometry.encoded_fov[a] = rb.geometry.recon_fov[a] = a < 2 ? 240.f : 5.f;
    }
    be.synchronize();
    return rb;
}

// Collects what a gadget emits.
struct Collect final : larmor::Emitter {
    std::vector<larmor::Message> out;
    void emit(larmor::Message m) override { out.push_back(std::move(m)); }
};

void recon(benchmark::State& state, bool gpu) {
    auto be = backend(gpu, state);
    if (!be) return;
    const size_t coils = static_cast<size_t>(state.range(0));
    const larmor::ReconBuffer rb = recon_buffer(*be, coils);
    larmor::config::CgSense cfg;
    cfg.mutable_solver()->set_iterations(30);
    cfg.mutable_solver()->set_tolerance(0.f);  // all 30 iterations, whatever the residual
    cfg.mutable_solver()->set_lambda(kLambda);
    cfg.mutable_solver()->set_progress_interval(-1);
    // Second argument: 0 = the gadget's default maps (ESPIRiT for Cartesian data), 1 = Walsh.
    if (state.range(1) == 1) cfg.set_maps(larmor::config::CgSense::MAPS_WALSH);
    auto cg = larmor::make_cg_sense(cfg);
    auto finish = larmor::make_image_finish(larmor::config::ImageFinish{});
    larmor::SessionContext ctx;
    ctx.backend = be;
    cg->start(ctx);
    finish->start(ctx);
    auto once = [&] {
        Collect images, wire_images;
        cg->process(larmor::ReconBuffer(rb), images);
        for (auto& m : images.out) finish->process(std::move(m), wire_images);
        benchmark::DoNotOptimize(wire_images.out.data());
    };
    for (int i = 0; i < 2; ++i) once();  // plans, pools
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        once();
        state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    state.SetLabel(be->describe());
}

// The gadget's steps before the iterations, each alone.
void maps_and_setup(benchmark::State& state, bool gpu, bool setup) {
    auto be = backend(gpu, state);
    if (!be) return;
    const size_t coils = static_cast<size_t>(state.range(0));
    const larmor::ReconBuffer rb = recon_buffer(*be, coils);
    auto maps = [&] {
        const larmor::coils::CalibrationRegion r = larmor::coils::fully_sampled_centre(rb.ref.sampled, kN, 1, 8);
        return larmor::coils::sense_maps(*be, larmor::coils::calibration_images(*be, rb.ref.data, r), 7, 7);
    };
    const CArray m = maps();
    auto once = [&] {
        if (setup) {
            auto p = larmor::cartesian_sense(be, rb.data.data, rb.data.sampled, m, kLambda, {30, 0.0});
            benchmark::DoNotOptimize(p.image.data());
        } else {
            benchmark::DoNotOptimize(maps().data());
        }
        be->synchronize();
    };
    for (int i = 0; i < 2; ++i) once();
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        once();
        state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    state.SetLabel(be->describe());
}

void BM_CgSenseMapsGPU(benchmark::State& s) { maps_and_setup(s, true, false); }
void BM_CgSenseSetupGPU(benchmark::State& s) { maps_and_setup(s, true, true); }
void BM_CgSenseMapsCPU(benchmark::State& s) { maps_and_setup(s, false, false); }
void BM_CgSenseSetupCPU(benchmark::State& s) { maps_and_setup(s, false, true); }

void BM_CgSenseReconGPU(benchmark::State& s) { recon(s, true); }
void BM_CgSenseReconCPU(benchmark::State& s) { recon(s, false); }

void BM_CgSenseNormalGPU(benchmark::State& s) { normal_op(s, true); }
void BM_CgSenseNormalCPU(benchmark::State& s) { normal_op(s, false); }
void BM_CgSenseIterationGPU(benchmark::State& s) { iteration(s, true); }
void BM_CgSenseIterationCPU(benchmark::State& s) { iteration(s, false); }

// Second argument: 0 the composed normal operator, 1 the fused one (side by side in one run).
BENCHMARK(BM_CgSenseNormalGPU)->ArgsProduct({{8, 32}, {0, 1}})->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
// A fixed count of runs: each run restarts the solver untimed, so a minimum time (which counts only the
// timed part, one iteration's share of each run) made these rows take minutes.
BENCHMARK(BM_CgSenseIterationGPU)->ArgsProduct({{8, 32}, {0, 1}, {0, 1}})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(200);
#ifdef LARMOR_WITH_CUDA
BENCHMARK(BM_CgSenseIterationPartsGPU)->ArgsProduct({{8, 32}, {0, 1, 2, 7, 3, 4, 5, 6}})->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.1);
#endif
BENCHMARK(BM_CgSenseMapsGPU)->Arg(8)->Arg(32)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
BENCHMARK(BM_CgSenseSetupGPU)->Arg(8)->Arg(32)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
BENCHMARK(BM_CgSenseReconGPU)->ArgsProduct({{8, 32}, {0, 1}})->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.3);
BENCHMARK(BM_CgSenseReconCPU)->Args({8, 0})->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_CgSenseMapsCPU)->Arg(8)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_CgSenseSetupCPU)->Arg(8)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_CgSenseNormalCPU)->ArgsProduct({{8, 32}, {0, 1}})->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_CgSenseIterationCPU)->ArgsProduct({{8, 32}, {0, 1}, {1}})->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.5);

}  // namespace
