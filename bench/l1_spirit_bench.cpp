// One POCS iteration of 3D l1-SPIRiT (core/recon/l1_spirit.h) at the size, on the CPU and a GPU:
// 256 (readout, transformed: 256 independent slices) x 256 x 64, 8 and 32 coils, and its steps apart:
//   part 0  the whole iteration (residual tracking off, as a timed reconstruction runs it)
//   part 1  SPIRiT, x <- G x (the per-voxel C x C product, in place)
//   part 2  the joint wavelet threshold: W, shrink, W^H (Daubechies-4 over E1 and E2 to a 16-sample band, shifted)
//   part 3  data consistency: FFT over E1 and E2, the projection, inverse FFT
//   part 4  the FFT pair alone (forward and inverse), to split part 3 into FFT and projection.
// G is filled with one constant (1 / 2C, a contraction): the time does not depend on its values, and at
// 32 coils G is 34 GB, too much to calibrate and upload for a benchmark. Calibration is not in here.
//
// Floor, HBM bytes per iteration with A = N C 8 bytes (N = 4.19 M voxels; A = 268 MB at 8 coils,
// 1.07 GB at 32) and G = C^2 N 8 bytes (2.15 GB, 34.4 GB): a fused iteration must read G once and read
// and write x about three times (G x, the wavelet, the projection): G + 6A, 3.8 GB at 8 coils (0.92 ms
// at 4.13 TB/s) and 40.8 GB at 32 (9.9 ms). The counter `floor_bytes` holds it for the table.
// A second floor holds the iteration to the operators it is made of, each streaming its input and output
// once: G x (G + 2A), W, the shrinkage and W^H (2A each), F, the projection (3A) and F^H (2A each): G + 15A,
// 6.2 GB (1.49 ms) at 8 coils and 50.5 GB (12.2 ms) at 32.
// What the steps move today, counted from the code: SPIRiT G + 2A (in place); the wavelet prox about
// 12.4A with its 16-sample low band (level 0 passes over E1 and E2, then ever smaller blocks, each way, and
// the threshold); data consistency two FFTs (about 4A each) and the projection's blend, 2A / R and the mask
// (about 0.6A at R = 4 with 8 coils).
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bench/wall_timing.h"
#include "core/backend.h"
#include "core/coils/spirit.h"
#include "core/iter/alg.h"
#include "core/linops/fft_op.h"
#include "core/recon/l1_spirit.h"
#include "core/recon/l1_spirit_fista.h"
#include "core/recon/l1_spirit_slabs.h"
#include "tools/phantom/phantom.h"
#ifdef LARMOR_WITH_CUDA
#include "bench/gpu_timing.h"
#include "cuda/cuda_backend.h"
#endif

namespace {

using larmor::CArray;
using larmor::cfloat;
using larmor::RArray;
using larmor::Shape;

constexpr size_t kRo = 256, kE1 = 256, kE2 = 64;

// larmor-phantom's Poisson disc, R = 4 with a 24 x 24 calibration block, repeated along the readout.
RArray poisson_mask() {
    larmor::phantom::PhantomSpec p;
    p.dims = 3;
    p.nx = int(kRo);
    p.ny = int(kE1);
    p.nz = int(kE2);
    p.fov_mm[2] = 120.0;
    p.sampling = larmor::phantom::Sampling::poisson;
    p.accel_y = p.accel_z = 2;
    p.acs_lines = 24;
    RArray m = RArray::host({kRo, kE1, kE2});
    for (const auto& e : larmor::phantom::sampling_pattern(p))
        if (e.imaging || e.calibration)
            for (size_t x = 0; x < kRo; ++x) m.data()[x + kRo * (size_t(e.e1) + kE1 * size_t(e.e2))] = 1.f;
    return m;
}

// One warm-up call, then the timed ones: CUDA events on the backend's stream on a GPU (bench/gpu_timing.h),
// wall clock with a synchronise on the CPU.
template <class F>
void timed(benchmark::State& state, bool gpu, larmor::Backend& be, F& call) {
    call();
    be.synchronize();
#ifdef LARMOR_WITH_CUDA
    if (gpu) larmor::bench::device_timed(state, larmor::cuda::backend_stream(be), call);
#endif
    if (!gpu)
        for (auto _ : state) {
            const auto t0 = std::chrono::steady_clock::now();
            call();
            be.synchronize();
            state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
}

void BM_L1SpiritIteration(benchmark::State& state) {
    const bool gpu = state.range(0) != 0;
    const size_t coils = size_t(state.range(1));
    const int part = int(state.range(2));
    if (!gpu && coils > 8) return state.SkipWithError("CPU: 8 coils only (G alone is 34 GB at 32)");
    auto be = larmor::bench::calibration_backend(gpu);
    if (!be) return state.SkipWithError("no usable CUDA device");
    const Shape s{kRo, kE1, kE2, coils};
    const RArray mask = poisson_mask();
    CArray kspace = be->empty(s);
    be->fill(kspace, cfloat(1.f, 0.f));
    be->mul(kspace, be->to_device(mask), kspace);
    CArray g = be->empty({kRo, kE1, kE2, coils, coils});
    be->fill(g, cfloat(0.5f / float(coils), 0.f));
    larmor::L1SpiritSettings settings;
    settings.track_residuals = false;
    settings.iterations = 1 << 30;
    larmor::L1Spirit p = larmor::l1_spirit(be, kspace, mask, g, settings);
    const larmor::LinOp fft = larmor::fft_op(be, s, 0b110u);
    CArray k = be->empty(s);
    auto call = [&] {
        if (part == 0) p.solver->update();
        else if (part <= 3) p.solver->apply_step(size_t(part - 1));
        else {
            fft->forward(p.images, k);
            fft->adjoint(k, p.images);
        }
    };
    timed(state, gpu, *be, call);
    const double n = double(kRo * kE1 * kE2), c = double(coils), a = n * c * 8, gb = n * c * c * 8;
    state.counters["floor_bytes"] = part == 0 ? gb + 6 * a : 0;
    state.SetLabel(be->describe());
}

// The whole 3D reconstruction the issue times: k-space [256, 256, 64, C] (random samples: the time
// depends on the sizes, not the values), 3D SPIRiT calibration on the 24^3 centre (5^3 kernels, one
// Cholesky), the readout's inverse FFT, G slab by slab and 50 POCS iterations (core/recon/
// l1_spirit_slabs.h), the images gathered onto the first backend; wall time with every device
// synchronised. `devices` backends: on a multi-GPU host one per device (device i % count), so on one GPU
// devices = 2 is the forced count (two streams sharing it). Memory: G alone is C^2 N 8 bytes (2.1 GB at
// 8 coils, 34 GB at 32), split over the devices.
void BM_L1Spirit3dTotal(benchmark::State& state) {
    const bool gpu = state.range(0) != 0;
    const size_t coils = size_t(state.range(1));
    const size_t devices = size_t(state.range(2));
    if (!gpu && coils > 8) return state.SkipWithError("CPU: 8 coils only (G alone is 34 GB at 32)");
    if (!gpu && devices > 1) return state.SkipWithError("CPU: one backend uses every core already");
    auto be = larmor::bench::calibration_backend(gpu);
    if (!be) return state.SkipWithError("no usable CUDA device");
    std::vector<std::shared_ptr<larmor::Backend>> backends{be};
    const size_t count = gpu ? larmor::cuda_devices().size() : 1;
    for (size_t i = 1; i < devices; ++i) backends.push_back(larmor::make_cuda_backend(int(i % count)));
    const Shape s{kRo, kE1, kE2, coils};
    const RArray mask = poisson_mask();
    CArray host = CArray::host(s);
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    auto next = [&seed] {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        return float(int64_t(seed % 2001) - 1000) * 1e-3f;
    };
    for (size_t i = 0; i < host.size(); ++i) host.data()[i] = cfloat(next(), next()) * mask.data()[i % mask.size()];
    const CArray kspace = be->to_device(host);
    larmor::coils::SpiritSettings ks;
    ks.lambda = 3e-4f;
    larmor::L1SpiritSettings settings;
    settings.track_residuals = false;
    settings.iterations = 50;
    const size_t c0 = kE1 / 2 - 12, c1 = kE1 / 2 + 12, z0 = kE2 / 2 - 12, z1 = kE2 / 2 + 12;
    auto call = [&] {
        const larmor::coils::SpiritKernels k = larmor::coils::spirit_kernels_3d(*be, kspace, c0, c1, z0, z1, 24, ks);
        CArray hybrid = be->empty(s);
        be->fft(kspace, hybrid, 0b001u, larmor::FFTDirection::Inverse);
        larmor::L1SpiritSlabs split(backends, hybrid, mask, k, settings);
        hybrid = CArray{};
        larmor::run(split);
        const CArray images = split.images(*be);
        for (auto& b : backends) b->synchronize();
    };
    if (gpu) call();  // warm-up: plans and the block caches (the CPU run is 4 minutes as it is)
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        call();
        state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    state.counters["devices"] = double(count);
    state.SetLabel(be->describe() + ", " + std::to_string(devices) + " backend(s)");
}

// One FISTA iteration of l1-SPIRiT's penalised form (core/recon/l1_spirit_fista.h) on the same problem:
// the normal operator of [M F; sqrt(beta) (G - I)] at the extrapolated point (F, the mask, F^H; G - I and
// its adjoint), the gradient step, the joint wavelet threshold and the momentum update. Floor: G is read
// twice (G and G^H; 2G) and a fused iteration reads and writes x about 8 times (z in and the FFT pair's
// 2A, the normal sum, the wavelet prox 2A, the momentum 2A): 2G + 8A, 6.4 GB at 8 coils (1.55 ms at
// 4.13 TB/s), 77 GB at 32 (18.7 ms). `floor_bytes` holds it.
void BM_L1SpiritFistaIteration(benchmark::State& state) {
    const bool gpu = state.range(0) != 0;
    const size_t coils = size_t(state.range(1));
    if (!gpu && coils > 8) return state.SkipWithError("CPU: 8 coils only (G alone is 34 GB at 32)");
    auto be = larmor::bench::calibration_backend(gpu);
    if (!be) return state.SkipWithError("no usable CUDA device");
    const Shape s{kRo, kE1, kE2, coils};
    const RArray mask = poisson_mask();
    CArray kspace = be->empty(s);
    be->fill(kspace, cfloat(1.f, 0.f));
    be->mul(kspace, be->to_device(mask), kspace);
    CArray g = be->empty({kRo, kE1, kE2, coils, coils});
    be->fill(g, cfloat(0.5f / float(coils), 0.f));
    larmor::L1SpiritFistaSettings settings;
    settings.iterations = 1 << 30;
    settings.power_iterations = 3;  // the step does not change the time
    settings.track_residuals = false;
    larmor::L1SpiritFista p = larmor::l1_spirit_fista(be, kspace, mask, g, settings);
    auto call = [&] { p.solver->update(); };
    timed(state, gpu, *be, call);
    const double n = double(kRo * kE1 * kE2), c = double(coils), a = n * c * 8, gb = n * c * c * 8;
    state.counters["floor_bytes"] = 2 * gb + 8 * a;
    state.SetLabel(be->describe());
}

}  // namespace

BENCHMARK(BM_L1SpiritFistaIteration)
    ->ArgsProduct({{1, 0}, {8, 32}})
    ->ArgNames({"gpu", "coils"})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(3);
BENCHMARK(BM_L1Spirit3dTotal)
    ->ArgsProduct({{1}, {8, 32}, {1, 2}})
    ->ArgNames({"gpu", "coils", "devices"})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(3);
BENCHMARK(BM_L1Spirit3dTotal)
    ->Args({0, 8, 1})
    ->ArgNames({"gpu", "coils", "devices"})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(1);
BENCHMARK(BM_L1SpiritIteration)
    ->ArgsProduct({{1, 0}, {8, 32}, {0, 1, 2, 3, 4}})
    ->ArgNames({"gpu", "coils", "part"})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(3);
