// Centred orthonormal FFT (FFTOperator, in place) on the CPU and GPU backends, and on the GPU a bare
// cuFFT plan execution of the same transform side by side: the centring must cost (almost) nothing
// on top of cuFFT (target: <= 1.3x). Sizes: 256^2 x 8 and x 32 coils (batched 2D), 256^3.
// GPU variants (cuda/fft_plans.h): BM_FftGpu (the default centring, cuFFT LTO callbacks),
// BM_FftGpuSwap (a signed half-swap pass after cuFFT), BM_FftGpuKernels (modulation passes before
// and after). Run with --benchmark_filter=Gpu|Bare to skip the slow CPU cases.
// bench/FLOORS-fft.md gives the bounds these numbers should be read against.
//
// GPU timing: CUDA events on the backend's stream around kBatch back-to-back transforms after a
// warm-up, so launch latency is amortised and the time is the device's; reported per transform
// (UseManualTime). Counters: bytes = data read + written once per transform, GB/s = bytes / time.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/backend.h"
#include "core/fft_operator.h"

#ifdef LARMOR_WITH_CUDA
#include <cuda_runtime.h>
#include <cufft.h>

#include "cuda/cuda_backend.h"
#include "cuda/fft_plans.h"
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

void fill(CArray& h) {
    for (size_t i = 0; i < h.size(); ++i) h.data()[i] = larmor::cfloat(static_cast<float>(i % 17) - 8.f, 0.5f);
}

void BM_FftCpu(benchmark::State& state) {
    const Shape s = shape_of(state);
    auto cpu = larmor::make_cpu_backend();
    larmor::FFTOperator op(cpu, s, axes_of(state));
    CArray x = cpu->empty(s);
    fill(x);
    op.forward(x, x);  // plan
    double seconds = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        op.forward(x, x);
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        benchmark::DoNotOptimize(x.data());
    }
    set_counters(state, s, seconds, state.iterations());
    state.SetLabel(cpu->describe());
}

#ifdef LARMOR_WITH_CUDA

#define BENCH_CUDA(call)                                                                        \
    do {                                                                                        \
        const cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) throw std::runtime_error(std::string(#call) + ": " + cudaGetErrorString(e_)); \
    } while (0)

struct Events {
    cudaEvent_t start = nullptr, stop = nullptr;
    Events() {
        BENCH_CUDA(cudaEventCreate(&start));
        BENCH_CUDA(cudaEventCreate(&stop));
    }
    ~Events() {
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
    }
    // Seconds per transform of `run` (which queues kBatch transforms on `stream`).
    // host_seconds (optional) accumulates the time the host spends queueing the batch: when it
    // exceeds the device time the GPU starves and the benchmark measures the host.
    template <typename F>
    double time(cudaStream_t stream, F&& run, double* host_seconds = nullptr) {
        BENCH_CUDA(cudaEventRecord(start, stream));
        const auto h0 = std::chrono::steady_clock::now();
        run();
        if (host_seconds) *host_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - h0).count();
        BENCH_CUDA(cudaEventRecord(stop, stream));
        BENCH_CUDA(cudaEventSynchronize(stop));
        float ms = 0;
        BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
        return ms * 1e-3 / kBatch;
    }
};

void gpu_operator(benchmark::State& state, const char* centring) {
    if (!larmor::cuda_available()) {
        state.SkipWithError("no CUDA device");
        return;
    }
    const Shape s = shape_of(state);
    if (centring) setenv("LARMOR_CUDA_CENTRING", centring, 1);
    auto gpu = larmor::make_cuda_backend();
    larmor::FFTOperator op(gpu, s, axes_of(state));
    CArray h = larmor::CArray::host(s);
    fill(h);
    CArray x = gpu->to_device(h);
    const auto t0 = std::chrono::steady_clock::now();
    op.forward(x, x);  // plan (+ NVRTC and cuFFT's JIT link on first use)
    gpu->synchronize();
    const double plan_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    unsetenv("LARMOR_CUDA_CENTRING");
    const char* used = larmor::cuda::centring_name(larmor::cuda::last_planned_centring());
    const cudaStream_t stream = larmor::cuda::backend_stream(*gpu);
    Events ev;
    auto run = [&] {
        for (int i = 0; i < kBatch; ++i) op.forward(x, x);
    };
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

void BM_FftGpu(benchmark::State& state) { gpu_operator(state, nullptr); }  // the default: LTO callbacks
void BM_FftGpuSwap(benchmark::State& state) { gpu_operator(state, "swap"); }
void BM_FftGpuKernels(benchmark::State& state) { gpu_operator(state, "kernels"); }

// The same batched transform as a bare cuFFT plan (not centred, not normalised): the floor the
// centred FFT is held to.
void BM_CufftBare(benchmark::State& state) {
    if (!larmor::cuda_available()) {
        state.SkipWithError("no CUDA device");
        return;
    }
    const Shape s = shape_of(state);
    const AxisMask axes = axes_of(state);
    int n[3];
    int rank = 0;
    for (int a = 2; a >= 0; --a)
        if (axes & (1u << a)) n[rank++] = static_cast<int>(s[a]);
    if (axes != 3u && axes != 7u) {
        state.SkipWithError("bare cuFFT comparison covers axes {0,1} and {0,1,2}");
        return;
    }
    const int dist = rank == 2 ? n[0] * n[1] : n[0] * n[1] * n[2];
    const int batch = static_cast<int>(s.size()) / dist;
    cudaStream_t stream = nullptr;
    BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cufftHandle plan = 0;
    if (cufftPlanMany(&plan, rank, n, nullptr, 1, dist, nullptr, 1, dist, CUFFT_C2C, batch) != CUFFT_SUCCESS) {
        state.SkipWithError("cufftPlanMany failed");
        return;
    }
    cufftSetStream(plan, stream);
    void* d = nullptr;
    BENCH_CUDA(cudaMalloc(&d, s.size() * sizeof(cufftComplex)));
    BENCH_CUDA(cudaMemset(d, 0, s.size() * sizeof(cufftComplex)));
    auto* p = static_cast<cufftComplex*>(d);
    Events ev;
    auto run = [&] {
        for (int i = 0; i < kBatch; ++i) cufftExecC2C(plan, p, p, CUFFT_FORWARD);
    };
    for (int i = 0; i < 3; ++i) ev.time(stream, run);
    double seconds = 0;
    for (auto _ : state) {
        const double t = ev.time(stream, run);
        state.SetIterationTime(t);
        seconds += t;
    }
    set_counters(state, s, seconds, state.iterations());
    state.SetLabel("bare cuFFT C2C");
    cufftDestroy(plan);
    cudaFree(d);
    cudaStreamDestroy(stream);
}

#else

void BM_FftGpu(benchmark::State& state) { state.SkipWithError("built without CUDA"); }
void BM_FftGpuSwap(benchmark::State& state) { state.SkipWithError("built without CUDA"); }
void BM_FftGpuKernels(benchmark::State& state) { state.SkipWithError("built without CUDA"); }
void BM_CufftBare(benchmark::State& state) { state.SkipWithError("built without CUDA"); }

#endif

// {nx, ny, nz, axes}
void sizes(benchmark::internal::Benchmark* b) {
    b->Args({256, 256, 8, 3})->Args({256, 256, 32, 3})->Args({256, 256, 256, 7});
}

}  // namespace

BENCHMARK(BM_FftCpu)->Apply(sizes)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_CufftBare)->Apply(sizes)->Unit(benchmark::kMicrosecond)->UseManualTime();
BENCHMARK(BM_FftGpu)->Apply(sizes)->Unit(benchmark::kMicrosecond)->UseManualTime();
BENCHMARK(BM_FftGpuSwap)->Apply(sizes)->Unit(benchmark::kMicrosecond)->UseManualTime();
BENCHMARK(BM_FftGpuKernels)->Apply(sizes)->Unit(benchmark::kMicrosecond)->UseManualTime();

BENCHMARK_MAIN();
