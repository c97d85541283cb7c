// The NUFFT operator (core/linops/nufft.h): adjoint (gridding), forward and set_points, on the CPU
// backend and (when a device exists) on CUDA. Cases (first argument):
//   0  2D 256^2, 504 spokes x 512 samples (258,048 points) x 3 coils: the radial case of Schiwietz et
//      al. (equally spaced angles), k in [-128, 128)
//   1  2D 256^2, golden-angle radial, 402 spokes x 512 samples (205,824 points) x 32 coils
//   2  3D 128^3, kooshball: 4096 spokes (a Fibonacci spiral of directions) x 512 samples (2,097,152
//      points) x 8 coils, k in [-64, 64)
//   3, 4, 5  the same sizes, points and coils as 0, 1, 2 with the points uniform random over the whole
//      k-space box, as cuFINUFFT's cuperftest draws them (the side-by-side comparison in one call,
//      scripts/gpu-check.sh nufft)
// BM_NufftStagesGpu: each stage of the forward and adjoint alone (cases 4 and 5), to say where the time goes.
// BM_NufftCreate{Cpu,Gpu}: what a session's first buffer pays for its plan (wall clock, synchronised),
// its points binned by the plan (cached 0) or taken from the server's precompute cache where another
// session left them (cached 1; gadgets/noncart/nufft_bins.h).
// BM_GriddingReconGpu: the whole gridding reconstruction of case 0 as the gridding gadget runs it,
// density weights already cached: weighting, adjoint NUFFT, root-sum-of-squares over the coils.
// Second argument: the tolerance's exponent (3: 1e-3, 5: 1e-5); sigma = 2.
// CPU: wall clock per call (the plan made once). GPU: CUDA events around kBatch back-to-back calls
// after a warm-up, the stream gated until all are queued (bench/gpu_timing.h); reported per call.
// Counters: points/s = M x coils / time (M / time for set_points). Run with --benchmark_filter=Cpu/[01] to skip the 3D CPU case
// (a 256^3 x 8 grid: 1 GiB, seconds per call on a laptop).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "core/backend.h"
#include "core/coils/coil_combination.h"
#include "core/linops/nufft.h"
#include "gadgets/noncart/nufft_bins.h"
#include "gadgets/precompute_cache.h"

#ifdef LARMOR_WITH_CUDA
#include <cuda_runtime.h>

#include "bench/gpu_timing.h"
#include "core/linops/nufft_kernels.h"
#include "cuda/cuda_backend.h"
#endif

namespace {

using larmor::CArray;
using larmor::RArray;
using larmor::Shape;

constexpr int kBatch = 10;

struct Case {
    Shape image;
    size_t coils;
    RArray k;
};

// Samples along a spoke: k = -N/2 .. N/2 - N/512 (512 samples, BART's half-open range).
double radius(size_t i, size_t samples, double n) { return (double(i) - double(samples) / 2) * n / double(samples); }

// Uniform random points of case `id - 3`'s sizes over [-N/2, N/2)^d.
Case random_case(int id) {
    Case c;
    const Case like = [&] {
        Case l;
        l.image = id == 5 ? Shape{128, 128, 128} : Shape{256, 256};
        l.coils = id == 3 ? 3 : id == 4 ? 32 : 8;
        return l;
    }();
    c.image = like.image;
    c.coils = like.coils;
    const size_t m = id == 3 ? 504 * 512 : id == 4 ? 402 * 512 : 4096 * 512;
    const size_t d = size_t(c.image.rank());
    c.k = RArray::host({d, m});
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < d * m; ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const double u = double(s >> 11) / double(1ull << 53);
        c.k.data()[i] = float((u - 0.5) * double(c.image[int(i % d)]));
    }
    return c;
}

Case make_case(int id) {
    if (id >= 3) return random_case(id);
    const double pi = std::acos(-1.0);
    Case c;
    const size_t samples = 512;
    if (id == 0 || id == 1) {
        const size_t spokes = id == 0 ? 504 : 402;
        c.image = {256, 256};
        c.coils = id == 0 ? 3 : 32;
        c.k = RArray::host({2, spokes * samples});
        const double golden = pi * (std::sqrt(5.0) - 1.0) / 2.0;
        for (size_t s = 0; s < spokes; ++s) {
            const double th = id == 0 ? pi * double(s) / double(spokes) : golden * double(s);
            for (size_t i = 0; i < samples; ++i) {
                const double r = radius(i, samples, 256);
                c.k.data()[2 * (s * samples + i)] = float(r * std::cos(th));
                c.k.data()[2 * (s * samples + i) + 1] = float(r * std::sin(th));
            }
        }
    } else {
        const size_t spokes = 4096;
        c.image = {128, 128, 128};
        c.coils = 8;
        c.k = RArray::host({3, spokes * samples});
        for (size_t s = 0; s < spokes; ++s) {
            const double z = 1.0 - 2.0 * (double(s) + 0.5) / double(spokes), rr = std::sqrt(1 - z * z);
            const double ph = double(s) * pi * (3.0 - std::sqrt(5.0));
            const double d[3] = {rr * std::cos(ph), rr * std::sin(ph), z};
            for (size_t i = 0; i < samples; ++i)
                for (int a = 0; a < 3; ++a)
                    c.k.data()[3 * (s * samples + i) + size_t(a)] = float(radius(i, samples, 128) * d[a]);
        }
    }
    return c;
}

void fill(CArray& h) {
    uint32_t s = 12345u;
    for (size_t i = 0; i < h.size(); ++i) {
        s = s * 1664525u + 1013904223u;
        const float re = float(s >> 8) / float(1u << 24) - 0.5f;
        s = s * 1664525u + 1013904223u;
        h.data()[i] = larmor::cfloat(re, float(s >> 8) / float(1u << 24) - 0.5f);
    }
}

enum class Op { Adjoint, Forward, SetPoints };

template <class F>
void guarded(benchmark::State& state, F&& f) {
    try {
        f();
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
    }
}

void run_cpu(benchmark::State& state, Op what) {
    const Case c = make_case(int(state.range(0)));
    const larmor::NufftOptions opts{std::pow(10.0, -double(state.range(1))), 2.0};
    auto be = larmor::make_cpu_backend();
    auto op = larmor::Nufft::create(be, c.image, c.coils, c.k, opts);
    CArray x = be->empty(op->ishape()), y = be->empty(op->oshape());
    fill(x);
    fill(y);
    auto call = [&] {
        if (what == Op::Adjoint) op->adjoint(y, x);
        else if (what == Op::Forward) op->forward(x, y);
        else op->set_points(c.k);
    };
    call();  // FFTW plans, scratch
    for (auto _ : state) {
        call();
        benchmark::DoNotOptimize(x.data());
    }
    // Points x coils per second (set_points: points per second; the coils do not enter).
    const double per_call = double(op->points() * (what == Op::SetPoints ? 1 : c.coils));
    state.counters["points/s"] = benchmark::Counter(per_call, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["width"] = op->grid().width;
    state.SetLabel(be->describe());
}

// Plan creation, with the bins from a cache that already holds them (cached = 1) or binned by the plan.
void run_create(benchmark::State& state, bool gpu) {
    const Case c = make_case(int(state.range(0)));
    const bool cached = state.range(1) != 0;
    auto be = gpu ? larmor::make_cuda_backend() : larmor::make_cpu_backend();
    const RArray k = be->to_device(c.k);
    larmor::PrecomputeCache cache(larmor::PrecomputeCache::Options{});
    larmor::CachedNufftBins bins(cache);
    auto create = [&] {
        auto op = larmor::Nufft::create(be, c.image, c.coils, k, {}, cached ? &bins : nullptr);
        be->synchronize();
        return op;
    };
    create();  // FFT plans made once per process, the cache filled
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        auto op = create();
        state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        op.reset();
        be->synchronize();
    }
    state.counters["points"] = double(c.k.size() / c.k.shape()[0]);
    state.SetLabel(be->describe() + (cached ? ", bins cached" : ", bins computed"));
}

void BM_NufftCreateCpu(benchmark::State& s) { guarded(s, [&] { run_create(s, false); }); }

void BM_NufftAdjointCpu(benchmark::State& s) { guarded(s, [&] { run_cpu(s, Op::Adjoint); }); }
void BM_NufftForwardCpu(benchmark::State& s) { guarded(s, [&] { run_cpu(s, Op::Forward); }); }
void BM_NufftSetPointsCpu(benchmark::State& s) { guarded(s, [&] { run_cpu(s, Op::SetPoints); }); }

#ifdef LARMOR_WITH_CUDA
void run_gpu(benchmark::State& state, Op what) {
    if (!larmor::cuda_available()) {
        state.SkipWithError("no CUDA device");
        return;
    }
    const Case c = make_case(int(state.range(0)));
    const larmor::NufftOptions opts{std::pow(10.0, -double(state.range(1))), 2.0};
    auto be = larmor::make_cuda_backend();
    const RArray kd = be->to_device(c.k);
    auto op = larmor::Nufft::create(be, c.image, c.coils, kd, opts);
    CArray hx = be->host_staging(op->ishape()), hy = be->host_staging(op->oshape());
    fill(hx);
    fill(hy);
    CArray x = be->to_device(hx), y = be->to_device(hy);
    auto call = [&] {
        if (what == Op::Adjoint) op->adjoint(y, x);
        else if (what == Op::Forward) op->forward(x, y);
        else op->set_points(kd);
    };
    if (what == Op::SetPoints) {
        // set_points validates on the host (a download, then an upload): wall clock, synchronised.
        call();
        be->synchronize();
        for (auto _ : state) {
            const auto t0 = std::chrono::steady_clock::now();
            call();
            be->synchronize();
            state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
    } else {
        const cudaStream_t stream = larmor::cuda::backend_stream(*be);
        larmor::bench::Events ev;
        auto run = [&] {
            for (int i = 0; i < kBatch; ++i) call();
        };
        ev.time(stream, run, nullptr, false, kBatch);
        for (int i = 0; i < 3; ++i) ev.time(stream, run, nullptr, true, kBatch);  // warm-up
        double host_seconds = 0;
        for (auto _ : state) state.SetIterationTime(ev.time(stream, run, &host_seconds, true, kBatch));
        state.counters["host_us_per_call"] = host_seconds / (double(state.iterations()) * kBatch) * 1e6;
    }
    // Points x coils per second (set_points: points per second; the coils do not enter).
    const double per_call = double(op->points() * (what == Op::SetPoints ? 1 : c.coils));
    state.counters["points/s"] = benchmark::Counter(per_call, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["width"] = op->grid().width;
    state.SetLabel(be->describe());
}

// Weighting by cached density weights, adjoint NUFFT, RSS: what the gridding gadget queues per frame.
void run_gridding_gpu(benchmark::State& state) {
    if (!larmor::cuda_available()) {
        state.SkipWithError("no CUDA device");
        return;
    }
    const Case c = make_case(int(state.range(0)));
    const larmor::NufftOptions opts{std::pow(10.0, -double(state.range(1))), 2.0};
    auto be = larmor::make_cuda_backend();
    auto op = larmor::Nufft::create(be, c.image, c.coils, be->to_device(c.k), opts);
    const size_t m = op->points();
    RArray wh = RArray::host({m});
    for (size_t i = 0; i < m; ++i) wh.data()[i] = 1.f + float(i % 7);  // any cached weights
    const RArray w = be->to_device(wh);
    CArray hy = be->host_staging(op->oshape());
    fill(hy);
    const CArray y = be->to_device(hy);
    CArray yw = be->empty(op->oshape()), coil_images = be->empty(op->ishape()), image = be->empty(c.image);
    auto call = [&] {
        be->mul(y, w, yw);
        op->adjoint(yw, coil_images);
        larmor::coils::rss_last_axis(*be, coil_images, image);
    };
    const cudaStream_t stream = larmor::cuda::backend_stream(*be);
    larmor::bench::Events ev;
    auto run = [&] {
        for (int i = 0; i < kBatch; ++i) call();
    };
    ev.time(stream, run, nullptr, false, kBatch);
    for (int i = 0; i < 3; ++i) ev.time(stream, run, nullptr, true, kBatch);
    for (auto _ : state) state.SetIterationTime(ev.time(stream, run, nullptr, true, kBatch));
    state.counters["width"] = op->grid().width;
    state.SetLabel(be->describe());
}

// One stage of the NUFFT alone, on the operator's own grid and points (core/linops/nufft_kernels.h):
// where the time of a forward (pad, FFT, interp) or an adjoint (spread, inverse FFT, crop) goes.
// FftFull*: the unpruned plan (no image given) beside the operator's, which prunes in 3D.
enum class Stage { Pad, FftForward, Interp, Spread, FftInverse, Crop, FftFullForward, FftFullInverse };
const char* stage_name(Stage s) {
    switch (s) {
        case Stage::Pad: return "pad (deapodise + zero-pad)";
        case Stage::FftForward: return "grid FFT forward";
        case Stage::Interp: return "interp";
        case Stage::Spread: return "spread";
        case Stage::FftInverse: return "grid FFT inverse";
        case Stage::Crop: return "crop (+ deapodise)";
        case Stage::FftFullForward: return "grid FFT forward, unpruned";
        case Stage::FftFullInverse: return "grid FFT inverse, unpruned";
    }
    return "?";
}

void run_stage_gpu(benchmark::State& state) {
    if (!larmor::cuda_available()) {
        state.SkipWithError("no CUDA device");
        return;
    }
    const Case c = make_case(int(state.range(0)));
    const larmor::NufftOptions opts{std::pow(10.0, -double(state.range(1))), 2.0};
    const Stage stage = static_cast<Stage>(state.range(2));
    auto be = larmor::make_cuda_backend();
    auto op = larmor::Nufft::create(be, c.image, c.coils, be->to_device(c.k), opts);
    const larmor::NufftGrid g = op->grid();
    // The points in grid units, as the operator places them (u = sigma k + n/2, wrapped).
    const size_t d = size_t(g.dims), m = op->points();
    RArray uh = RArray::host({d, m});
    for (size_t i = 0; i < d * m; ++i) {
        const int a = int(i % d);
        const double n = double(g.n[a]);
        double u = double(c.k.data()[i]) * n / double(c.image[a]) + n / 2;
        if (u >= n) u -= n;
        uh.data()[i] = float(u < 0 ? u + n : u);
    }
    auto points = larmor::cuda::nufft_bin_points(*be, g, be->to_device(uh));
    auto fft = larmor::cuda::nufft_grid_fft(*be, g, c.image);
    auto full = larmor::cuda::nufft_grid_fft(*be, g, Shape{});
    RArray wh = be->host_real(c.image);
    for (size_t i = 0; i < wh.size(); ++i) wh.data()[i] = 1.f + float(i % 5) * 0.1f;
    const RArray w = be->to_device(wh);
    CArray hx = be->host_staging(op->ishape()), hy = be->host_staging(op->oshape());
    fill(hx);
    fill(hy);
    CArray x = be->to_device(hx), y = be->to_device(hy);
    Shape gs;
    for (int a = 0; a < g.dims; ++a) gs.push_back(size_t(g.n[a]));
    gs.push_back(c.coils);
    CArray grid = be->zeros(gs);
    auto call = [&] {
        switch (stage) {
            case Stage::Pad: larmor::cuda::nufft_pad(*be, g, c.image, w, x, grid); break;
            case Stage::FftForward: fft->from_image(grid, larmor::FFTDirection::Forward); break;
            case Stage::FftFullForward: full->from_image(grid, larmor::FFTDirection::Forward); break;
            case Stage::FftFullInverse: full->to_image(grid, larmor::FFTDirection::Inverse); break;
            case Stage::Interp: larmor::cuda::nufft_interp(*be, g, *points, grid, y); break;
            case Stage::Spread: larmor::cuda::nufft_spread(*be, g, *points, y, grid); break;
            case Stage::FftInverse: fft->to_image(grid, larmor::FFTDirection::Inverse); break;
            case Stage::Crop: larmor::cuda::nufft_crop(*be, g, c.image, w, grid, x); break;
        }
    };
    const cudaStream_t stream = larmor::cuda::backend_stream(*be);
    larmor::bench::Events ev;
    auto run = [&] {
        for (int i = 0; i < kBatch; ++i) call();
    };
    ev.time(stream, run, nullptr, false, kBatch);
    for (int i = 0; i < 3; ++i) ev.time(stream, run, nullptr, true, kBatch);
    for (auto _ : state) state.SetIterationTime(ev.time(stream, run, nullptr, true, kBatch));
    state.counters["width"] = g.width;
    state.SetLabel(stage_name(stage));
}

void BM_GriddingReconGpu(benchmark::State& s) { guarded(s, [&] { run_gridding_gpu(s); }); }
void BM_NufftCreateGpu(benchmark::State& s) {
    if (!larmor::cuda_available()) return s.SkipWithError("no CUDA device");
    guarded(s, [&] { run_create(s, true); });
}
void BM_NufftStagesGpu(benchmark::State& s) { guarded(s, [&] { run_stage_gpu(s); }); }
void BM_NufftAdjointGpu(benchmark::State& s) { guarded(s, [&] { run_gpu(s, Op::Adjoint); }); }
void BM_NufftForwardGpu(benchmark::State& s) { guarded(s, [&] { run_gpu(s, Op::Forward); }); }
void BM_NufftSetPointsGpu(benchmark::State& s) { guarded(s, [&] { run_gpu(s, Op::SetPoints); }); }
#endif

void cases(benchmark::internal::Benchmark* b) {
    for (int id : {0, 1, 2, 3, 4, 5})
        for (int tol : {3, 5}) b->Args({id, tol});
    b->ArgNames({"case", "tol_exp"});
}
void point_cases(benchmark::internal::Benchmark* b) {
    for (int id : {0, 1, 2}) b->Args({id, 3});
    b->ArgNames({"case", "tol_exp"});
}

}  // namespace

BENCHMARK(BM_NufftAdjointCpu)->Apply(cases)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_NufftForwardCpu)->Apply(cases)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_NufftSetPointsCpu)->Apply(point_cases)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_NufftCreateCpu)->ArgsProduct({{0, 1}, {0, 1}})->ArgNames({"case", "cached"})->Unit(benchmark::kMillisecond)->UseManualTime();
#ifdef LARMOR_WITH_CUDA
BENCHMARK(BM_GriddingReconGpu)->Args({0, 3})->Args({0, 5})->ArgNames({"case", "tol_exp"})->Unit(benchmark::kMicrosecond)->UseManualTime();
BENCHMARK(BM_NufftAdjointGpu)->Apply(cases)->Unit(benchmark::kMicrosecond)->UseManualTime();
BENCHMARK(BM_NufftForwardGpu)->Apply(cases)->Unit(benchmark::kMicrosecond)->UseManualTime();
BENCHMARK(BM_NufftSetPointsGpu)->Apply(point_cases)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_NufftCreateGpu)->ArgsProduct({{1, 2}, {0, 1}})->ArgNames({"case", "cached"})->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_NufftStagesGpu)
    ->ArgsProduct({{4, 5}, {3, 5}, {0, 1, 2, 3, 4, 5, 6, 7}})
    ->ArgNames({"case", "tol_exp", "stage"})
    ->Unit(benchmark::kMicrosecond)
    ->UseManualTime();
#endif
