// Centred orthonormal FFT (the FFT operator, core/linops/fft_op.h) on the CPU and GPU backends,
// and on the GPU a bare cuFFT plan execution of the same transform side by side, in place and out
// of place: the centring must cost (almost) nothing on top of cuFFT (target: <= 1.3x the faster
// bare variant). Sizes: 256^2 x 8 and x 32 coils (batched 2D), 256^3.
// GPU variants (cuda/fft_plans.h), all out of place (x -> y, the operator's form):
// BM_FftGpuStrided (`strided`: Larmor's own kernel along the strided axes with the centring folded
// into its first read, then bare cuFFT along x), BM_FftGpuLoad (one shifted cuFFT LTO
// load callback), BM_FftGpu (the default centring, whichever it is: its label says), BM_FftGpuCallbacks
// (LTO load + store modulation callbacks), BM_FftGpuSwap (a signed half-swap pass after cuFFT),
// BM_FftGpuKernels (copy, then modulation passes before and after). Floors: BM_CufftBare (in place)
// and BM_CufftBareOutOfPlace. Run with --benchmark_filter=Gpu|Bare to skip the slow CPU cases (add
// --benchmark_repetitions=5 --benchmark_report_aggregates_only=true for medians, ~1 min in all); the
// last lines printed are a table of the GPU cases with the ratios.
// bench/FLOORS-fft.md gives the bounds these numbers should be read against.
//
// GPU timing: CUDA events on the stream around kBatch back-to-back transforms after a warm-up. The
// stream is held by a host function until all kBatch transforms are queued, so the events measure
// the device alone even where queueing a call takes the host longer than the GPU needs for it
// (reported separately: host_us_per_call; above the device time the pipeline would be host-bound).
// Reported per transform (UseManualTime). Counters: bytes = data read + written once per transform,
// GB/s = bytes / time. Data: pseudo-random, never zeros. An in-place bare cuFFT grows the data by
// sqrt(N) per transform (unnormalised), so its buffer is reset from a pristine copy (outside the
// timed region) before each batch, starting small enough that kBatch transforms stay finite.
// Note: 256^2 x 8 (4 MB) and x 32 (17 MB, 34 MB in + out) fit in the H100's 50 MB L2, for the
// floors and the centred variants alike.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/linops/fft_op.h"

#ifdef LARMOR_WITH_CUDA
#include <cuda_runtime.h>
#include <cufft.h>

#include "cuda/cuda_backend.h"
#include "cuda/fft_plans.h"
#include "bench/gpu_timing.h"
#endif

namespace {

using larmor::AxisMask;
using larmor::CArray;
using larmor::Shape;

constexpr int kBatch = 20;

Shape shape_of(const benchmark::State& state) {
    return {static_cast<size_t>(state.range(0)), static_cast<size_t>(state.range(1)), static_cast<size_t>(state.range(2))};
}
AxisMask axes_of(const benchmark::State& state) { return static_cast<AxisMask>(state.range(3)); }

void set_counters(benchmark::State& state, const Shape& s, double seconds, long long transforms) {
    const double bytes = 2.0 * static_cast<double>(s.size()) * sizeof(larmor::cfloat);
    state.counters["bytes"] = bytes;
    if (seconds > 0) state.counters["GB/s"] = bytes * static_cast<double>(transforms) / seconds / 1e9;
}

// Pseudo-random values in [-scale, scale) (real and imaginary parts), never zeros.
void fill(larmor::cfloat* p, size_t n, float scale = 1.f) {
    uint32_t s = 12345u;
    auto next = [&s] {
        s = s * 1664525u + 1013904223u;
        return static_cast<float>(s >> 8) / static_cast<float>(1u << 24) * 2.f - 1.f;
    };
    for (size_t i = 0; i < n; ++i) {
        const float re = next(), im = next();
        p[i] = larmor::cfloat(scale * re, scale * im);
    }
}

void BM_FftCpu(benchmark::State& state) {
    const Shape s = shape_of(state);
    auto cpu = larmor::make_cpu_backend();
    larmor::LinOp op = larmor::fft_op(cpu, s, axes_of(state));
    CArray x = cpu->empty(s), y = cpu->empty(s);
    fill(x.data(), x.size());
    op->forward(x, y);  // plan
    double seconds = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        op->forward(x, y);
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        benchmark::DoNotOptimize(y.data());
    }
    set_counters(state, s, seconds, state.iterations());
    state.SetLabel(cpu->describe());
}

#ifdef LARMOR_WITH_CUDA


void gpu_operator(benchmark::State& state, const char* centring) {
    if (!larmor::cuda_available()) {
        state.SkipWithError("no CUDA device");
        return;
    }
    const Shape s = shape_of(state);
    if (centring) setenv("LARMOR_CUDA_CENTRING", centring, 1);
    auto gpu = larmor::make_cuda_backend();
    larmor::LinOp op = larmor::fft_op(gpu, s, axes_of(state));
    CArray h = gpu->host_staging(s);
    fill(h.data(), h.size());
    CArray x = gpu->to_device(h), y = gpu->empty(s);
    const auto t0 = std::chrono::steady_clock::now();
    op->forward(x, y);  // plan (+ NVRTC and cuFFT's JIT link on first use)
    gpu->synchronize();
    const double plan_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    unsetenv("LARMOR_CUDA_CENTRING");
    const char* used = larmor::cuda::centring_name(larmor::cuda::last_planned_centring());
    const cudaStream_t stream = larmor::cuda::backend_stream(*gpu);
    larmor::bench::Events ev;
    auto run = [&] {
        for (int i = 0; i < kBatch; ++i) op->forward(x, y);
    };
    ev.time(stream, run, nullptr, false);
    for (int i = 0; i < 3; ++i) ev.time(stream, run);  // warm-up
    double seconds = 0, host_seconds = 0;
    for (auto _ : state) {
        const double t = ev.time(stream, run, &host_seconds);
        state.SetIterationTime(t);
        seconds += t;
    }
    set_counters(state, s, seconds, state.iterations());
    state.counters["first_call_ms"] = plan_ms;
    state.counters["host_us_per_call"] = host_seconds / (static_cast<double>(state.iterations()) * kBatch) * 1e6;
    state.SetLabel(std::string("centred, ") + used);
}

// A failure (CUDA error, gate timeout) skips that benchmark with its message instead of aborting.
template <typename F>
void guarded(benchmark::State& state, F&& f) {
    try {
        f();
    } catch (const std::exception& e) {
        unsetenv("LARMOR_CUDA_CENTRING");
        state.SkipWithError(e.what());
    }
}

void BM_FftGpu(benchmark::State& state) {  // the default centring
    guarded(state, [&] { gpu_operator(state, nullptr); });
}
void BM_FftGpuStrided(benchmark::State& state) {
    guarded(state, [&] { gpu_operator(state, "strided"); });
}
void BM_FftGpuLoad(benchmark::State& state) {
    guarded(state, [&] { gpu_operator(state, "load"); });
}
void BM_FftGpuCallbacks(benchmark::State& state) {
    guarded(state, [&] { gpu_operator(state, "callbacks"); });
}
void BM_FftGpuSwap(benchmark::State& state) {
    guarded(state, [&] { gpu_operator(state, "swap"); });
}
void BM_FftGpuKernels(benchmark::State& state) {
    guarded(state, [&] { gpu_operator(state, "kernels"); });
}

// The same batched transform as a bare cuFFT plan (not centred, not normalised): the floor the
// centred FFT is held to, in place (one buffer) or out of place (input left as it is).
void cufft_bare(benchmark::State& state, bool out_of_place) {
    if (!larmor::cuda_available()) {
        state.SkipWithError("no CUDA device");
        return;
    }
    const Shape s = shape_of(state);
    const AxisMask axes = axes_of(state);
    if (axes != 3u && axes != 7u) {
        state.SkipWithError("bare cuFFT comparison covers axes {0,1} and {0,1,2}");
        return;
    }
    int n[3];
    int rank = 0;
    for (int a = 2; a >= 0; --a)
        if (axes & (1u << a)) n[rank++] = static_cast<int>(s[a]);
    const int dist = rank == 2 ? n[0] * n[1] : n[0] * n[1] * n[2];
    const int batch = static_cast<int>(s.size()) / dist;
    const size_t bytes = s.size() * sizeof(cufftComplex);
    cudaStream_t stream = nullptr;
    BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cufftHandle plan = 0;
    if (cufftPlanMany(&plan, rank, n, nullptr, 1, dist, nullptr, 1, dist, CUFFT_C2C, batch) != CUFFT_SUCCESS) {
        state.SkipWithError("cufftPlanMany failed");
        cudaStreamDestroy(stream);
        return;
    }
    cufftSetStream(plan, stream);
    // In place, kBatch unnormalised transforms grow the data by sqrt(N) each: start at
    // sqrt(N)^(-kBatch/2) so that the batch ends near sqrt(N)^(kBatch/2), finite.
    const float start = out_of_place ? 1.f : static_cast<float>(std::pow(static_cast<double>(dist), -0.25 * kBatch));
    std::vector<larmor::cfloat> h(s.size());
    fill(h.data(), h.size(), start);
    void *pristine = nullptr, *a = nullptr, *b = nullptr;
    BENCH_CUDA(cudaMalloc(&pristine, bytes));
    BENCH_CUDA(cudaMalloc(&a, bytes));
    if (out_of_place) BENCH_CUDA(cudaMalloc(&b, bytes));
    BENCH_CUDA(cudaMemcpy(pristine, h.data(), bytes, cudaMemcpyHostToDevice));
    BENCH_CUDA(cudaMemcpy(a, h.data(), bytes, cudaMemcpyHostToDevice));
    auto* in = static_cast<cufftComplex*>(a);
    auto* out = static_cast<cufftComplex*>(out_of_place ? b : a);
    larmor::bench::Events ev;
    bool exec_ok = true;
    auto run = [&] {
        for (int i = 0; i < kBatch; ++i) exec_ok = exec_ok && cufftExecC2C(plan, in, out, CUFFT_FORWARD) == CUFFT_SUCCESS;
    };
    auto reset = [&] {
        if (!out_of_place) BENCH_CUDA(cudaMemcpyAsync(a, pristine, bytes, cudaMemcpyDeviceToDevice, stream));
    };
    reset();
    ev.time(stream, run, nullptr, false);
    for (int i = 0; i < 3; ++i) {
        reset();
        ev.time(stream, run);
    }
    double seconds = 0, host_seconds = 0;
    for (auto _ : state) {
        reset();
        const double t = ev.time(stream, run, &host_seconds);
        state.SetIterationTime(t);
        seconds += t;
    }
    if (!exec_ok) state.SkipWithError("cufftExecC2C failed");
    set_counters(state, s, seconds, state.iterations());
    state.counters["host_us_per_call"] = host_seconds / (static_cast<double>(state.iterations()) * kBatch) * 1e6;
    state.SetLabel(out_of_place ? "bare cuFFT C2C, out of place" : "bare cuFFT C2C, in place");
    cufftDestroy(plan);
    cudaFree(pristine);
    cudaFree(a);
    if (b) cudaFree(b);
    cudaStreamDestroy(stream);
}

void BM_CufftBare(benchmark::State& state) {
    guarded(state, [&] { cufft_bare(state, false); });
}
void BM_CufftBareOutOfPlace(benchmark::State& state) {
    guarded(state, [&] { cufft_bare(state, true); });
}

#else

void BM_FftGpu(benchmark::State& state) { state.SkipWithError("built without CUDA"); }
void BM_FftGpuLoad(benchmark::State& state) { state.SkipWithError("built without CUDA"); }
void BM_FftGpuStrided(benchmark::State& state) { state.SkipWithError("built without CUDA"); }
void BM_FftGpuCallbacks(benchmark::State& state) { state.SkipWithError("built without CUDA"); }
void BM_FftGpuSwap(benchmark::State& state) { state.SkipWithError("built without CUDA"); }
void BM_FftGpuKernels(benchmark::State& state) { state.SkipWithError("built without CUDA"); }
void BM_CufftBare(benchmark::State& state) { state.SkipWithError("built without CUDA"); }
void BM_CufftBareOutOfPlace(benchmark::State& state) { state.SkipWithError("built without CUDA"); }

#endif

// {nx, ny, nz, axes}
void sizes(benchmark::internal::Benchmark* b) {
    b->Args({256, 256, 8, 3})->Args({256, 256, 32, 3})->Args({256, 256, 256, 7});
}

// Console output as usual, plus the GPU times per (variant, case) for the closing table: the median
// over repetitions where there are some, else the single run.

// Google Benchmark 1.7 (Debian 12) flags a failed run with `error_occurred`, 1.8 with `skipped`.
template <typename R>
auto run_failed_impl(const R& r, int) -> decltype(bool(r.error_occurred)) { return r.error_occurred; }
template <typename R>
auto run_failed_impl(const R& r, long) -> decltype(bool(r.skipped)) { return bool(r.skipped); }
template <typename R>
bool run_failed(const R& r) { return run_failed_impl(r, 0); }

class TableReporter : public benchmark::ConsoleReporter {
public:
    struct Entry {
        double us = 0;
        double host_us = 0;
        std::string label;
        bool median = false;
    };
    std::map<std::string, std::map<std::string, Entry>> times;  // case -> variant -> entry

    void ReportRuns(const std::vector<Run>& reports) override {
        ConsoleReporter::ReportRuns(reports);
        for (const Run& r : reports) {
            if (run_failed(r)) continue;
            const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
            if (r.run_type == Run::RT_Aggregate && !median) continue;
            // "BM_Name/256/256/32/3[/manual_time][_median]" -> variant, case
            const std::string name = r.run_name.function_name;
            std::string args = r.run_name.args;
            Entry& e = times[args][name];
            if (e.median && !median) continue;
            e.us = r.GetAdjustedRealTime();  // in the benchmark's unit: microseconds
            auto it = r.counters.find("host_us_per_call");
            e.host_us = it != r.counters.end() ? static_cast<double>(it->second) : 0;
            e.label = r.report_label;
            e.median = median;
        }
    }

    void print_table() const {
        if (times.empty()) return;
        auto cell = [](double t, const char* suffix = "") {
            if (t < 0) return std::string("-");
            char b[32];
            std::snprintf(b, sizeof b, suffix[0] ? "%.2f%s" : "%.1f%s", t, suffix);
            return std::string(b);
        };
        std::printf("\nGPU, us per transform (device time; median of repetitions where run):\n");
        std::printf("%-14s %9s %9s %9s %7s %9s %7s %10s %9s %9s %8s\n", "case", "bare ip", "bare oop", "strided",
                    "ratio", "load", "ratio", "callbacks", "swap", "kernels", "host us");
        for (const auto& [args, v] : times) {
            auto get = [&v](const char* k) {
                auto it = v.find(k);
                return it == v.end() ? -1.0 : it->second.us;
            };
            const double ip = get("BM_CufftBare"), oop = get("BM_CufftBareOutOfPlace"), c = get("BM_FftGpuStrided");
            if (ip < 0 && oop < 0 && c < 0) continue;
            const double floor = ip > 0 && oop > 0 ? std::min(ip, oop) : std::max(ip, oop);
            const auto it = v.find("BM_FftGpu");
            const double host = it == v.end() ? -1 : it->second.host_us;
            double ld = get("BM_FftGpuLoad");
            if (ld < 0 && v.count("BM_FftGpu") && v.at("BM_FftGpu").label.find("load") != std::string::npos)
                ld = get("BM_FftGpu");  // the default is load
            std::printf("%-14s %9s %9s %9s %7s %9s %7s %10s %9s %9s %8s\n", args.c_str(), cell(ip).c_str(),
                        cell(oop).c_str(), cell(c).c_str(), cell(c > 0 && floor > 0 ? c / floor : -1, "x").c_str(),
                        cell(ld).c_str(), cell(ld > 0 && floor > 0 ? ld / floor : -1, "x").c_str(),
                        cell(get("BM_FftGpuCallbacks")).c_str(), cell(get("BM_FftGpuSwap")).c_str(),
                        cell(get("BM_FftGpuKernels")).c_str(), cell(host).c_str());
        }
        std::printf("ratio = centred / the faster bare cuFFT (in or out of place); host us = host time to queue\n"
                    "one default centred call (above the device time the pipeline is host-bound)\n");
    }
};

}  // namespace

// The GPU benchmarks report the time per transform while each iteration runs kBatch of them (plus
// the host's share), so a benchmark takes over kBatch x its min time of wall time: they fix their own
// min time, 0.01 s (~0.3 s of wall time per repetition; --benchmark_min_time does not apply).
constexpr double kGpuMinTime = 0.01;
BENCHMARK(BM_FftCpu)->Apply(sizes)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_CufftBare)->Apply(sizes)->Unit(benchmark::kMicrosecond)->UseManualTime()->MinTime(kGpuMinTime);
BENCHMARK(BM_CufftBareOutOfPlace)->Apply(sizes)->Unit(benchmark::kMicrosecond)->UseManualTime()->MinTime(kGpuMinTime);
BENCHMARK(BM_FftGpu)->Apply(sizes)->Unit(benchmark::kMicrosecond)->UseManualTime()->MinTime(kGpuMinTime);
BENCHMARK(BM_FftGpuStrided)->Apply(sizes)->Unit(benchmark::kMicrosecond)->UseManualTime()->MinTime(kGpuMinTime);
BENCHMARK(BM_FftGpuLoad)->Apply(sizes)->Unit(benchmark::kMicrosecond)->UseManualTime()->MinTime(kGpuMinTime);
BENCHMARK(BM_FftGpuCallbacks)->Apply(sizes)->Unit(benchmark::kMicrosecond)->UseManualTime()->MinTime(kGpuMinTime);
BENCHMARK(BM_FftGpuSwap)->Apply(sizes)->Unit(benchmark::kMicrosecond)->UseManualTime()->MinTime(kGpuMinTime);
BENCHMARK(BM_FftGpuKernels)->Apply(sizes)->Unit(benchmark::kMicrosecond)->UseManualTime()->MinTime(kGpuMinTime);

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    TableReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    reporter.print_table();
    benchmark::Shutdown();
    return 0;
}
