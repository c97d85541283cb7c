// GRAPPA (core/coils/grappa.h) in its three steps, on the CPU and on a GPU, at the real R=3 scan's size
// (192 x 144 after readout oversampling removal, 14 coils, 48 calibration lines, R=3) and at 256 x 256
// with 32 coils (48 lines, R=3); 5 x 4 kernels. Wall time per call after warm-up, median of the
// repetitions (each step ends with its results where the next step needs them).
//   BM_GrappaKernels: calibration matrix, its Gram matrix and the Cholesky solve (once per calibration).
//   BM_GrappaUnmixing: the image-space weights from the kernels and the maps (once per calibration).
//   BM_GrappaApply: one frame, the inverse FFT of the coils and the weighted coil sum (every frame).
//
// Floors. Kernels: the Gram matrix of the rows x n matrix M = [A B] (n = 20 C + 2 C) is
// 4 rows n (n + 1) real flops (one triangle, 8 flops per complex multiply-add), the Cholesky solve
// (4/3 n_s^3 + 8 n_s^2 n_t): for the real scan (rows 7332, n = 308) 2.8 GFLOP; on the 2-core CI machine
// (~190 GFLOP/s FP32 peak with AVX2 + FMA) 15 ms. Unmixing: C inverse FFTs of C images (5 N log2 N
// flops each) and C weighted sums (8 N C flops each): for 192 x 144 x 14, 1.5 GFLOP. Apply: the bytes
// through memory, coil images written and read by the FFT (2 N C 8 B, one pass each way) and the weights
// and coil images read by the sum (2 N C 8 B) plus the image written: 256^2 x 32 coils is 67 MB, 14 us at an
// H200's 4.8 TB/s.
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "bench/phantom_kspace.h"
#include "bench/wall_timing.h"
#include "core/backend.h"
#include "core/coils/calibration.h"
#include "core/coils/grappa.h"

namespace {

using larmor::CArray;
namespace coils = larmor::coils;

struct Problem {
    CArray kspace;  // fully sampled, host
    coils::CalibrationRegion region;
    coils::GrappaLattice lattice;
};

Problem problem(int nx, int ny, int c) {
    Problem p;
    p.kspace = larmor::bench::phantom_kspace(nx, ny, c);
    p.region = coils::CalibrationRegion{size_t(ny / 2 - 24), size_t(ny / 2 + 24), 0, 1};
    p.lattice.r1 = 3;
    return p;
}

void BM_GrappaKernels(benchmark::State& state) {
    auto be = larmor::bench::calibration_backend(state.range(0) != 0);
    if (!be) return state.SkipWithError("no usable CUDA device");
    const Problem p = problem(int(state.range(1)), int(state.range(2)), int(state.range(3)));
    const CArray k = be->to_device(p.kspace);
    size_t rows = 0;
    larmor::bench::wall_timed(state, *be, [&] { rows = coils::grappa_kernels(*be, k, p.region, p.lattice, {}).rows; });
    const double c = double(state.range(3)), n = 22 * c, ns = 20 * c, nt = 2 * c;
    const double flops = 4 * double(rows) * n * (n + 1) + 4.0 / 3 * ns * ns * ns + 8 * ns * ns * nt;
    state.counters["rows"] = double(rows);
    state.counters["GFLOP"] = flops * 1e-9;
    state.counters["GFLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_GrappaUnmixing(benchmark::State& state) {
    auto be = larmor::bench::calibration_backend(state.range(0) != 0);
    if (!be) return state.SkipWithError("no usable CUDA device");
    const Problem p = problem(int(state.range(1)), int(state.range(2)), int(state.range(3)));
    const CArray k = be->to_device(p.kspace);
    const coils::GrappaKernels kern = coils::grappa_kernels(*be, k, p.region, p.lattice, {});
    const CArray maps = coils::sense_maps(*be, coils::calibration_images(*be, k, p.region), 7, 7);
    larmor::bench::wall_timed(state, *be, [&] { benchmark::DoNotOptimize(coils::grappa_unmixing(*be, kern, maps)); });
    const double c = double(state.range(3)), n = double(state.range(1) * state.range(2));
    const double flops = c * c * 5 * n * std::log2(n) + 8 * n * c * c;
    state.counters["GFLOP"] = flops * 1e-9;
}

void BM_GrappaApply(benchmark::State& state) {
    auto be = larmor::bench::calibration_backend(state.range(0) != 0);
    if (!be) return state.SkipWithError("no usable CUDA device");
    const Problem p = problem(int(state.range(1)), int(state.range(2)), int(state.range(3)));
    const CArray k = be->to_device(p.kspace);
    const coils::GrappaKernels kern = coils::grappa_kernels(*be, k, p.region, p.lattice, {});
    const CArray unmix =
        coils::grappa_unmixing(*be, kern, coils::sense_maps(*be, coils::calibration_images(*be, k, p.region), 7, 7));
    CArray scratch = be->empty(k.shape()), image = be->empty({k.shape()[0], k.shape()[1], 1});
    larmor::bench::wall_timed(state, *be, [&] { coils::grappa_apply(*be, unmix, k, scratch, image); });
    const double bytes = 4.0 * double(k.size()) * 8 + double(image.size()) * 8;
    state.counters["bytes"] = bytes;
    state.counters["GB/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
}

void sizes(benchmark::internal::Benchmark* b) {
    for (int gpu : {0, 1}) {
        b->Args({gpu, 192, 144, 14});
        b->Args({gpu, 256, 256, 32});
    }
    b->ArgNames({"gpu", "nx", "ny", "coils"})->Unit(benchmark::kMillisecond)->UseManualTime();
}

}  // namespace

BENCHMARK(BM_GrappaKernels)->Apply(sizes);
BENCHMARK(BM_GrappaUnmixing)->Apply(sizes);
BENCHMARK(BM_GrappaApply)->Apply(sizes);
