// Radial filtered backprojection (core/recon/radial_fbp.h), filter + 1D FFT + backprojection + RSS,
// on the CPU and GPU backends. Cases (samples, spokes, coils -> image):
//   the Schiwietz et al. case (SPIE 6142, 2006): 512 x 504 x 3 -> 256^2 (their GPU FBP: 130 ms;
//   target here on an H100: <= 2 ms), and a 32-coil case at the angular Nyquist rate of 256^2
//   (pi/2 * 256 ~ 402 spokes): 512 x 402 x 32 -> 256^2.
// GPU timing: CUDA events around kBatch back-to-back reconstructions after a warm-up, the stream
// held at a gate until all are queued (bench/gpu_timing.h), reported per reconstruction
// (UseManualTime). Counters: interp = pixel x spoke x coil linear interpolations, Ginterp/s; the
// bound they are read against is in bench/FLOORS-fbp.md.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/backend.h"
#include "core/recon/radial_fbp.h"

#ifdef LARMOR_WITH_CUDA
#include "bench/gpu_timing.h"
#include "cuda/cuda_backend.h"
#endif

namespace {

using larmor::CArray;
using larmor::RArray;

constexpr int kBatch = 20;
constexpr double kPi = 3.14159265358979323846;

struct Case {
    size_t n = 0, samples = 0, spokes = 0, coils = 0;
};

Case case_of(const benchmark::State& state) {
    return {size_t(state.range(0)), size_t(state.range(1)), size_t(state.range(2)), size_t(state.range(3))};
}

RArray coords(const Case& c) {
    RArray k = RArray::host({2, c.samples, c.spokes});
    const double dk = double(c.n) / double(c.samples);  // the readout spans [-N/2, N/2)
    for (size_t j = 0; j < c.spokes; ++j)
        for (size_t m = 0; m < c.samples; ++m) {
            const double r = (double(m) - double(c.samples / 2)) * dk, t = kPi * double(j) / double(c.spokes);
            k.data()[2 * (j * c.samples + m)] = float(r * std::cos(t));
            k.data()[2 * (j * c.samples + m) + 1] = float(r * std::sin(t));
        }
    return k;
}

// Pseudo-random values in [-1, 1) (real and imaginary parts).
void fill(larmor::cfloat* p, size_t n) {
    uint32_t s = 12345u;
    auto next = [&s] {
        s = s * 1664525u + 1013904223u;
        return static_cast<float>(s >> 8) / static_cast<float>(1u << 24) * 2.f - 1.f;
    };
    for (size_t i = 0; i < n; ++i) {
        const float re = next(), im = next();
        p[i] = larmor::cfloat(re, im);
    }
}

void set_counters(benchmark::State& state, const Case& c, double seconds, long long runs) {
    const double interp = double(c.n) * double(c.n) * double(c.spokes) * double(c.coils);
    state.counters["interp"] = interp;
    if (seconds > 0) state.counters["Ginterp/s"] = interp * double(runs) / seconds / 1e9;
}

void BM_RadialFbpCpu(benchmark::State& state) {
    const Case c = case_of(state);
    auto cpu = larmor::make_cpu_backend();
    auto fbp = larmor::RadialFbp::create(cpu, {c.n, c.n}, c.samples, c.spokes, c.coils, coords(c));
    CArray data = cpu->empty({c.samples, c.spokes, c.coils}), img = cpu->empty({c.n, c.n});
    fill(data.data(), data.size());
    fbp->reconstruct_rss(data, img);  // FFTW plans
    double seconds = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        fbp->reconstruct_rss(data, img);
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        benchmark::DoNotOptimize(img.data());
    }
    set_counters(state, c, seconds, state.iterations());
    state.SetLabel(cpu->describe());
}

#ifdef LARMOR_WITH_CUDA
void BM_RadialFbpGpu(benchmark::State& state) {
    if (!larmor::cuda_available()) {
        state.SkipWithError("no CUDA device");
        return;
    }
    try {
        const Case c = case_of(state);
        auto gpu = larmor::make_cuda_backend();
        auto fbp = larmor::RadialFbp::create(gpu, {c.n, c.n}, c.samples, c.spokes, c.coils, coords(c));
        CArray h = gpu->host_staging({c.samples, c.spokes, c.coils});
        fill(h.data(), h.size());
        CArray data = gpu->to_device(h), img = gpu->empty({c.n, c.n});
        const auto t0 = std::chrono::steady_clock::now();
        fbp->reconstruct_rss(data, img);  // cuFFT plan
        gpu->synchronize();
        const double first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        const cudaStream_t stream = larmor::cuda::backend_stream(*gpu);
        larmor::bench::Events ev;
        auto run = [&] {
            for (int i = 0; i < kBatch; ++i) fbp->reconstruct_rss(data, img);
        };
        ev.time(stream, run, nullptr, false);
        for (int i = 0; i < 3; ++i) ev.time(stream, run);  // warm-up
        double seconds = 0, host_seconds = 0;
        for (auto _ : state) {
            const double t = ev.time(stream, run, &host_seconds, true, kBatch);
            state.SetIterationTime(t);
            seconds += t;
        }
        set_counters(state, c, seconds, state.iterations());
        state.counters["first_call_ms"] = first_ms;
        state.counters["host_us_per_call"] = host_seconds / (double(state.iterations()) * kBatch) * 1e6;
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
    }
}
BENCHMARK(BM_RadialFbpGpu)
    ->ArgNames({"n", "samples", "spokes", "coils"})
    ->Args({256, 512, 504, 3})
    ->Args({256, 512, 402, 32})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
#endif

BENCHMARK(BM_RadialFbpCpu)
    ->ArgNames({"n", "samples", "spokes", "coils"})
    ->Args({256, 512, 504, 3})
    ->Args({256, 512, 402, 32})
    ->Unit(benchmark::kMillisecond);

}  // namespace
