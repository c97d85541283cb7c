// SPIRiT (core/coils/spirit.h, core/linops/spirit.h) on the CPU and a GPU:
//  * BM_SpiritCalibration: the kernels of a 24 x 24 calibration block with a 7 x 7 kernel at 8 and 32
//    coils, by the shared factorisation (one Cholesky, Murphy et al. 2012, Appendix A) and by the
//    per-coil factorisations it replaces. Wall time per call after warm-up (both read results back).
//  * BM_SpiritConsistency: (G - I) x then its adjoint on 256 x 256 coil images (one CG-SPIRiT
//    iteration's SPIRiT part), device time by CUDA events on the GPU.
//
// Floors. Calibration: the Gram matrix of the 324 x 49C matrix (8 * 324 * (49C)^2 flops: 0.4 GFLOP at 8
// coils, 6.4 at 32) and the factorisation of the n = 49C system (8 n^3 / 3 flops: 0.16 and 10.3 GFLOP)
// plus C solves (8 n^2 C each way: 0.2 GFLOP at 32); the per-coil way factorises C systems (C times the
// one). On an H200 (67 TFLOP/s FP32) the shared way at 32 coils is bound by ~0.25 ms of arithmetic; at
// these sizes cuSOLVER's launch and pivot latency dominates instead.
// Consistency: per pixel C^2 complex multiply-adds each way, reading G (C^2 x 8 bytes) and x, writing y
// (core/linops/spirit_kernels.h reads each once):
// for 256^2 and C = 32, 2 x (67 + 17 + 17) MB = 0.2 GB per forward + adjoint pair, 49 us at 4.13 TB/s
// (the counter `bytes`); the arithmetic (2 x 8 C^2 flops per pixel, 1.1 GFLOP) is 16 us at 67 TFLOP/s,
// so the pair is memory-bound.
#include <benchmark/benchmark.h>

#include <chrono>
#include <random>

#include "bench/phantom_kspace.h"
#include "bench/wall_timing.h"
#include "core/backend.h"
#include "core/coils/calibration_matrix.h"
#include "core/coils/spirit.h"
#include "core/linops/spirit.h"
#ifdef LARMOR_WITH_CUDA
#include "bench/gpu_timing.h"
#include "cuda/cuda_backend.h"
#endif

namespace {

using larmor::CArray;
using larmor::cfloat;

CArray calibration(int coils) {
    return larmor::coils::calibration_block(larmor::bench::phantom_kspace(128, 128, coils), 64 - 12, 64 + 12, 24, 24);
}

void BM_SpiritCalibration(benchmark::State& state) {
    const bool gpu = state.range(0) != 0;
    const int coils = int(state.range(1));
    const bool shared = state.range(2) != 0;
    auto be = larmor::bench::calibration_backend(gpu);
    if (!be) return state.SkipWithError("no usable CUDA device");
    const CArray block = calibration(coils);
    larmor::coils::SpiritSettings s;
    s.kernel = 7;
    larmor::bench::wall_timed(state, *be, [&] {
        benchmark::DoNotOptimize(shared ? larmor::coils::spirit_kernels(*be, block, s)
                                        : larmor::coils::spirit_kernels_per_coil(*be, block, s));
    });
    const double n = 49.0 * coils, rows = 18.0 * 18.0;
    const double factorisations = shared ? 1.0 : double(coils);
    state.counters["GFLOP"] = (8 * rows * n * n + factorisations * 8 * n * n * n / 3 + 16 * n * n * coils) * 1e-9;
}

void BM_SpiritConsistency(benchmark::State& state) {
    const bool gpu = state.range(0) != 0;
    const size_t coils = size_t(state.range(1)), n = 256;
    auto be = larmor::bench::calibration_backend(gpu);
    if (!be) return state.SkipWithError("no usable CUDA device");
    std::mt19937 gen(1);
    std::normal_distribution<float> nd;
    CArray g = CArray::host({n, n, coils, coils}), xh = CArray::host({n, n, coils});
    for (size_t i = 0; i < g.size(); ++i) g.data()[i] = cfloat(nd(gen), nd(gen));
    for (size_t i = 0; i < xh.size(); ++i) xh.data()[i] = cfloat(nd(gen), nd(gen));
    const larmor::LinOp op = larmor::spirit_consistency(be, g);
    const CArray x = be->to_device(xh);
    CArray y = be->empty(x.shape()), z = be->empty(x.shape());
    auto pair = [&] {
        op->forward(x, y);
        op->adjoint(y, z);
    };
    pair();
    be->synchronize();
#ifdef LARMOR_WITH_CUDA
    if (gpu) {
        larmor::bench::device_timed(state, larmor::cuda::backend_stream(*be), pair);
    }
#endif
    if (!gpu)
        for (auto _ : state) {
            const auto t0 = std::chrono::steady_clock::now();
            pair();
            state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
    const double pixels = double(n * n), c = double(coils);
    state.counters["bytes"] = 2 * pixels * (c * c + 2 * c) * sizeof(cfloat);
    state.SetLabel(be->describe());
}

}  // namespace

BENCHMARK(BM_SpiritCalibration)
    ->ArgsProduct({{0, 1}, {8, 32}, {1, 0}})
    ->ArgNames({"gpu", "coils", "shared"})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
BENCHMARK(BM_SpiritConsistency)
    ->ArgsProduct({{0, 1}, {8, 32}})
    ->ArgNames({"gpu", "coils"})
    ->Unit(benchmark::kMicrosecond)
    ->UseManualTime();
