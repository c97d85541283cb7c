#pragma once
// Device timing of queued GPU work for the benchmarks: CUDA events around a batch of calls, with the
// stream held at a gate until the whole batch is queued, so the events measure the device alone
// even where queueing a call takes the host longer than the GPU needs for it (the host's queueing
// time is reported separately).
#include <cuda_runtime.h>

#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#define BENCH_CUDA(call)                                                                        \
    do {                                                                                        \
        const cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) throw std::runtime_error(std::string(#call) + ": " + cudaGetErrorString(e_)); \
    } while (0)

namespace larmor::bench {

// Holds a stream at a host function until opened, so that work queued behind it runs back to back.
// Opens itself after a second (and says so) should the host ever wait on the stream while queueing,
// which would otherwise deadlock.
struct Gate {
    std::atomic<bool> open{false};
    std::atomic<bool> timed_out{false};
    static void CUDART_CB wait(void* p) {
        auto* g = static_cast<Gate*>(p);
        const auto t0 = std::chrono::steady_clock::now();
        while (!g->open.load(std::memory_order_acquire)) {
            if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(1)) {
                g->timed_out = true;
                return;
            }
            std::this_thread::yield();
        }
    }
};

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
    // Seconds per call of `run` (which queues `batch` calls on `stream`), device time:
    // the stream waits at a gate until everything is queued (gated = false for a first, plain
    // warm-up, where lazy module loading may still synchronise). host_seconds (optional)
    // accumulates the time the host spends queueing the batch.
    template <typename F>
    double time(cudaStream_t stream, F&& run, double* host_seconds = nullptr, bool gated = true, int batch = 20) {
        Gate gate;
        if (gated) BENCH_CUDA(cudaLaunchHostFunc(stream, &Gate::wait, &gate));
        struct Opener {  // on every exit, an exception's too: open, and outlive the host function
            Gate& g;
            cudaStream_t s;
            ~Opener() {
                g.open.store(true, std::memory_order_release);
                if (cudaStreamSynchronize(s) != cudaSuccess) cudaGetLastError();
            }
        } opener{gate, stream};
        BENCH_CUDA(cudaEventRecord(start, stream));
        const auto h0 = std::chrono::steady_clock::now();
        run();
        if (host_seconds) *host_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - h0).count();
        BENCH_CUDA(cudaEventRecord(stop, stream));
        gate.open.store(true, std::memory_order_release);
        BENCH_CUDA(cudaEventSynchronize(stop));
        if (gate.timed_out) throw std::runtime_error("the host waited on the gated stream while queueing");
        float ms = 0;
        BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
        return ms * 1e-3 / batch;
    }
};

// Times `call` (which queues work on `stream`) in batches of 20 by CUDA events, after three untimed
// batches; each benchmark iteration is one batch's device time per call. Returns the host's queueing
// time per call.
template <typename F>
double device_timed(benchmark::State& state, cudaStream_t stream, F&& call) {
    Events ev;
    auto run = [&] {
        for (int i = 0; i < 20; ++i) call();
    };
    for (int i = 0; i < 3; ++i) ev.time(stream, run);
    double host = 0;
    for (auto _ : state) state.SetIterationTime(ev.time(stream, run, &host));
    return state.iterations() > 0 ? host / (double(state.iterations()) * 20) : 0.0;
}

}  // namespace larmor::bench
