#pragma once
// Wall-clock timing of calibration steps for the benchmarks (ESPIRiT, GRAPPA): steps that read results
// back to the host between their parts, so what a reconstruction waits for is the wall time of the call
// with the backend's queue drained. Two untimed warm-up calls first (plans, handles, block cache).
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>

#include "core/backend.h"

namespace larmor::bench {

// The CPU backend, or a CUDA backend on device 0 (nullptr when no device is usable).
inline std::shared_ptr<Backend> calibration_backend(bool gpu) {
    if (!gpu) return make_cpu_backend();
    return cuda_available() ? make_cuda_backend(0) : nullptr;
}

template <class F>
void wall_timed(benchmark::State& state, Backend& be, F&& call) {
    for (int i = 0; i < 2; ++i) call();
    be.synchronize();
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        call();
        be.synchronize();
        state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    state.SetLabel(be.describe());
}

}  // namespace larmor::bench
