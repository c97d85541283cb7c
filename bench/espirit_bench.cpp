// ESPIRiT coil maps (core/coils/espirit.h) on a 256 x 256 phantom with 8, 14 and 32 coils, 24 x 24
// calibration block, 6 x 6 kernel, 30 power iterations: the two steps apart, on the CPU and on a GPU.
// Wall time per call after warm-up (the steps read results back to the host between their parts, so
// this is what a reconstruction waits for), median of the repetitions.
//
// Floors. Kernels: the Gram matrix of the 361 x 36C calibration matrix (8 * 361 * (36C)^2 flops) and
// its Hermitian eigendecomposition (about 9 (36C)^3 real flops for the reduction, back-transformation
// included): for C = 32 that is 3.8 + 13 GFLOP. Maps: per pixel 8 D C^2 flops for G (D = 11) and
// 8 C^2 (iterations + 1) for the power iteration, plus 8 D^2 C^2 N1 for the column tables: for 256^2
// and C = 32, 5.9 + 16.6 + 0.25 = 22.8 GFLOP (the counter below). At an H200's 67 TFLOP/s of FP32 that is
// 0.34 ms; every multiply-add also reads one complex entry of G from shared memory (8 bytes per 8
// flops), so shared-memory bandwidth (~33 TB/s over 132 SMs) bounds it at 0.7 ms. On the 2-core CI
// machine (AVX2 + FMA, ~190 GFLOP/s peak) 0.12 s.
#include <benchmark/benchmark.h>

#include <vector>

#include "bench/phantom_kspace.h"
#include "bench/wall_timing.h"
#include "core/backend.h"
#include "core/coils/calibration_matrix.h"
#include "core/coils/espirit.h"

namespace {

using larmor::CArray;

void BM_EspiritKernels(benchmark::State& state) {
    const bool gpu = state.range(0) != 0;
    const int coils = int(state.range(1));
    auto be = larmor::bench::calibration_backend(gpu);
    if (!be) return state.SkipWithError("no usable CUDA device");
    const CArray block = larmor::coils::calibration_block(larmor::bench::phantom_kspace(256, 256, coils), 128 - 12, 128 + 12, 24, 24);
    const larmor::coils::EspiritSettings s;
    size_t kept = 0;
    larmor::bench::wall_timed(state, *be, [&] { kept = larmor::coils::espirit_kernels(*be, block, s).kept; });
    state.counters["kept"] = double(kept);
}

// Step 2: the per-pixel eigenvectors on the 256 x 256 grid; with two sets the power iteration runs a
// second time on G deflated by the first eigenvector (8 C^2 more flops per pixel for the deflation).
void BM_EspiritMaps(benchmark::State& state) {
    const bool gpu = state.range(0) != 0;
    const int coils = int(state.range(1));
    const int sets = int(state.range(2));
    auto be = larmor::bench::calibration_backend(gpu);
    if (!be) return state.SkipWithError("no usable CUDA device");
    const CArray block = larmor::coils::calibration_block(larmor::bench::phantom_kspace(256, 256, coils), 128 - 12, 128 + 12, 24, 24);
    larmor::coils::EspiritSettings s;
    s.sets = sets;
    const larmor::coils::EspiritKernels kern = larmor::coils::espirit_kernels(*be, block, s);
    larmor::bench::wall_timed(state, *be, [&] { benchmark::DoNotOptimize(larmor::coils::espirit_maps(*be, kern, 256, 256, s)); });
    const double c = coils, d = 2 * s.kernel - 1;
    const double flops =
        256.0 * 256.0 * (8 * d * c * c + sets * 8 * c * c * (s.iterations + 1) + (sets - 1) * 8 * c * c) +
        8 * d * d * c * c * 256;
    state.counters["GFLOP"] = flops * 1e-9;
    state.counters["GFLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK(BM_EspiritKernels)->ArgsProduct({{0, 1}, {8, 14, 32}})->ArgNames({"gpu", "coils"})->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_EspiritMaps)
    ->ArgsProduct({{0, 1}, {8, 14, 32}, {1, 2}})
    ->ArgNames({"gpu", "coils", "sets"})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
