// FHd (the exact NUDFT adjoint, core/linops/nudft.h), the Toeplitz kernel Q and one CG iteration with
// the Toeplitz normal operator (core/linops/toeplitz.h), on the seeds' problem: 128^3 voxels from
// 284,592 samples (Stone et al., J. Parallel Distrib. Comput. 68:1307, 2008), here a kooshball of
// 1,617 spokes x 176 samples, spokes on a Fibonacci spiral over the sphere. Smaller 2D and 3D cases
// run on the CPU.
//
// Counters: pairs = voxels x samples x batch (one complex exponential and one complex multiply-add
// each in the direct formulation), Gpairs/s, and GFLOPS counted at 16 flops per pair (the direct
// formulation: phase 2 pi k.x with 4 multiplies and 2 adds, sine and cosine as one flop each, complex
// multiply-add of the datum 8 more), so the number can be set beside published direct-DFT kernels;
// this kernel does fewer operations per pair (see cuda/nudft.cu), so its GFLOPS is a rate of pairs,
// not of its own instructions. The bound the times are read against is in bench/FLOORS-fhd.md.
// GPU times: CUDA events around back-to-back calls after warm-up (bench/gpu_timing.h); Q is timed by
// the wall clock (it is computed once per trajectory and includes its host-side set-up).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "core/backend.h"
#include "core/iter/cg.h"
#include "core/linops/algebra.h"
#include "core/linops/diag.h"
#include "core/linops/nudft.h"
#include "core/linops/nudft_kernels.h"
#include "core/linops/nufft.h"
#include "core/linops/sense.h"
#include "core/linops/toeplitz.h"

#ifdef LARMOR_WITH_CUDA
#include "bench/gpu_timing.h"
#include "cuda/cuda_backend.h"
#endif

namespace {

using larmor::CArray;
using larmor::RArray;
using larmor::Shape;

constexpr double kPi = 3.14159265358979323846;
constexpr double kFlopsPerPair = 16.0;

// Kooshball (dims 3) or 2D radial (dims 2): `spokes` x `samples`, the readout spanning [-N/2, N/2).
RArray kooshball(int dims, size_t n, size_t spokes, size_t samples) {
    RArray k = RArray::host({size_t(dims), samples * spokes});
    for (size_t s = 0; s < spokes; ++s) {
        double dir[3] = {1, 0, 0};
        if (dims == 2) {
            dir[0] = std::cos(kPi * double(s) / double(spokes));
            dir[1] = std::sin(kPi * double(s) / double(spokes));
        } else {
            const double z = 1.0 - 2.0 * (double(s) + 0.5) / double(spokes), r = std::sqrt(1 - z * z);
            const double ph = double(s) * kPi * (3.0 - std::sqrt(5.0));
            dir[0] = r * std::cos(ph);
            dir[1] = r * std::sin(ph);
            dir[2] = z;
        }
        for (size_t i = 0; i < samples; ++i) {
            const double rad = (double(i) - double(samples / 2)) * double(n) / double(samples);
            for (int a = 0; a < dims; ++a) k.data()[(s * samples + i) * size_t(dims) + size_t(a)] = float(rad * dir[a]);
        }
    }
    return k;
}

Shape cube(int dims, size_t n) { return dims == 2 ? Shape{n, n} : Shape{n, n, n}; }

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

struct Case {
    int dims;
    size_t n, spokes, samples;
    bool accurate;
};

Case case_of(const benchmark::State& s) {
    return {int(s.range(0)), size_t(s.range(1)), size_t(s.range(2)), size_t(s.range(3)), s.range(4) != 0};
}

void set_counters(benchmark::State& state, const Case& c, double seconds_per_call) {
    const double pairs = std::pow(double(c.n), c.dims) * double(c.spokes * c.samples);
    state.counters["pairs"] = pairs;
    if (seconds_per_call > 0) {
        state.counters["Gpairs/s"] = pairs / seconds_per_call / 1e9;
        state.counters["GFLOPS"] = pairs * kFlopsPerPair / seconds_per_call / 1e9;
    }
}

void BM_FhdCpu(benchmark::State& state) {
    const Case c = case_of(state);
    auto cpu = larmor::make_cpu_backend();
    auto op = larmor::nudft(cpu, cube(c.dims, c.n), 1, kooshball(c.dims, c.n, c.spokes, c.samples), {});
    CArray d = cpu->empty(op->oshape()), x = cpu->empty(op->ishape());
    fill(d.data(), d.size());
    double seconds = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        op->adjoint(d, x);
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    set_counters(state, c, seconds / double(state.iterations()));
    state.SetLabel(cpu->describe());
}
BENCHMARK(BM_FhdCpu)
    ->ArgNames({"dims", "n", "spokes", "samples", "accurate"})
    ->Args({2, 128, 128, 256, 0})
    ->Args({3, 32, 402, 64, 0})
    ->Unit(benchmark::kMillisecond);

#ifdef LARMOR_WITH_CUDA
constexpr int kBatch = 3;

template <class Body>
void gpu_case(benchmark::State& state, Body body) {
    if (!larmor::cuda_available()) {
        state.SkipWithError("no CUDA device");
        return;
    }
    try {
        body();
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
    }
}

// Seconds per call of `run` (kBatch calls back to back), by CUDA events after two warm-ups; each
// benchmark iteration's time is reported as manual time.
template <class Run>
double seconds_per_call(benchmark::State& state, larmor::Backend& gpu, Run run) {
    larmor::bench::Events ev;
    const cudaStream_t stream = larmor::cuda::backend_stream(gpu);
    ev.time(stream, run, nullptr, false, kBatch);
    ev.time(stream, run, nullptr, true, kBatch);
    double seconds = 0;
    for (auto _ : state) {
        const double t = ev.time(stream, run, nullptr, true, kBatch);
        state.SetIterationTime(t);
        seconds += t;
    }
    return seconds / double(state.iterations());
}

void BM_FhdGpu(benchmark::State& state) {
    gpu_case(state, [&] {
        const Case c = case_of(state);
        auto gpu = larmor::make_cuda_backend();
        larmor::NudftOptions o;
        o.accurate_sincos = c.accurate;
        auto op = larmor::nudft(gpu, cube(c.dims, c.n), 1, kooshball(c.dims, c.n, c.spokes, c.samples), o);
        CArray h = gpu->host_staging(op->oshape());
        fill(h.data(), h.size());
        CArray d = gpu->to_device(h), x = gpu->empty(op->ishape());
        const double seconds = seconds_per_call(state, *gpu, [&] {
            for (int i = 0; i < kBatch; ++i) op->adjoint(d, x);
        });
        set_counters(state, c, seconds);
        state.SetLabel(gpu->describe());
    });
}
BENCHMARK(BM_FhdGpu)
    ->ArgNames({"dims", "n", "spokes", "samples", "accurate"})
    ->Args({3, 128, 1617, 176, 0})
    ->Args({3, 128, 1617, 176, 1})
    ->Args({2, 256, 402, 512, 0})
    ->UseManualTime()
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond);

// The tuning run of the adjoint kernel's launch shape (cuda/nudft.cu): every compiled shape, threads per
// block x voxels per thread, on the seeds' 3D problem and on 2D multi-coil data, the raw kernel (the
// operator adds only per-sample weights). The fastest across cases is NudftAdjointLaunch's default.
void BM_FhdGpuLaunch(benchmark::State& state) {
    gpu_case(state, [&] {
        const int dims = int(state.range(0));
        const size_t n = size_t(state.range(1)), spokes = size_t(state.range(2)), samples = size_t(state.range(3));
        const size_t batch = size_t(state.range(4));
        const larmor::cuda::NudftAdjointLaunch launch{int(state.range(5)), int(state.range(6))};
        auto gpu = larmor::make_cuda_backend();
        larmor::NudftGeometry g;
        g.dims = dims;
        for (int a = 0; a < dims; ++a) g.extent[a] = g.image[a] = n;
        g.batch = batch;
        g.points = spokes * samples;
        const RArray k = gpu->to_device(kooshball(dims, n, spokes, samples));
        CArray h = gpu->host_staging({g.points, batch});
        fill(h.data(), h.size());
        CArray d = gpu->to_device(h), x = gpu->empty({g.voxels(), batch});
        const double seconds = seconds_per_call(state, *gpu, [&] {
            for (int i = 0; i < kBatch; ++i) larmor::cuda::nudft_adjoint(*gpu, k, d, x, g, launch);
        });
        set_counters(state, Case{dims, n, spokes, samples * batch, false}, seconds);
        state.SetLabel(std::to_string(launch.rows) + " threads x " + std::to_string(launch.voxels) + " voxels");
    });
}
void launch_shapes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"dims", "n", "spokes", "samples", "batch", "rows", "voxels"});
    for (const auto& l : larmor::cuda::nudft_adjoint_launches()) {
        b->Args({3, 128, 1617, 176, 1, l.rows, l.voxels});
        b->Args({2, 256, 402, 512, 8, l.rows, l.voxels});
        b->Args({2, 128, 128, 256, 1, l.rows, l.voxels});
    }
}
BENCHMARK(BM_FhdGpuLaunch)->Apply(launch_shapes)->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);

// Q on the 2N grid (8x the voxels of FHd in 3D), exact and by NUFFT at 1e-6, wall clock per call.
void BM_ToeplitzKernelGpu(benchmark::State& state) {
    gpu_case(state, [&] {
        const Case c = case_of(state);
        auto gpu = larmor::make_cuda_backend();
        const RArray k = kooshball(c.dims, c.n, c.spokes, c.samples);
        larmor::ToeplitzOptions o;
        o.method = state.range(5) ? larmor::ToeplitzOptions::Method::Nufft : larmor::ToeplitzOptions::Method::Exact;
        o.accurate_sincos = c.accurate;
        CArray q = larmor::toeplitz_spectrum(gpu, cube(c.dims, c.n), k, RArray(), o);  // warm-up
        gpu->synchronize();
        double seconds = 0;
        for (auto _ : state) {
            const auto t0 = std::chrono::steady_clock::now();
            q = larmor::toeplitz_spectrum(gpu, cube(c.dims, c.n), k, RArray(), o);
            gpu->synchronize();
            const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            state.SetIterationTime(t);
            seconds += t;
        }
        Case c8 = c;
        c8.n *= 2;  // the 2N grid
        set_counters(state, c8, seconds / double(state.iterations()));
    });
}
BENCHMARK(BM_ToeplitzKernelGpu)
    ->ArgNames({"dims", "n", "spokes", "samples", "accurate", "nufft"})
    ->Args({3, 128, 1617, 176, 0, 0})
    ->Args({3, 128, 1617, 176, 0, 1})
    ->UseManualTime()
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);

// One CG iteration on (F^H F + lambda I) x = F^H d with the Toeplitz normal operator: 2 FFTs of the 2N
// grid, one product with K, the pad and crop, and CG's vector updates. Timed over 20 iterations.
void BM_ToeplitzCgIterationGpu(benchmark::State& state) {
    gpu_case(state, [&] {
        const Case c = case_of(state);
        auto gpu = larmor::make_cuda_backend();
        const Shape image = cube(c.dims, c.n);
        const RArray k = kooshball(c.dims, c.n, c.spokes, c.samples);
        auto t = larmor::toeplitz_normal(gpu, image, 1, larmor::toeplitz_spectrum(gpu, image, k, RArray()));
        auto n = larmor::sum(t, larmor::scale(0.01f, larmor::identity(gpu, t->ishape())));
        CArray h = gpu->host_staging(t->ishape());
        fill(h.data(), h.size());
        const CArray b = gpu->to_device(h);
        constexpr int kIters = 20;
        auto solve = [&] {
            larmor::ConjugateGradient cg(n, b, gpu->zeros(t->ishape()), {kIters, 0.0});
            while (!cg.done()) cg.update();
        };
        solve();  // plans, workspaces
        gpu->synchronize();
        for (auto _ : state) {
            const auto t0 = std::chrono::steady_clock::now();
            solve();
            gpu->synchronize();
            state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kIters);
        }
        state.counters["iterations"] = kIters;
    });
}
BENCHMARK(BM_ToeplitzCgIterationGpu)
    ->ArgNames({"dims", "n", "spokes", "samples", "accurate"})
    ->Args({3, 128, 1617, 176, 0})
    ->Args({2, 256, 402, 512, 0})
    ->UseManualTime()
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond);

// The radial CG-SENSE iteration of cg_sense_radial (E = W^1/2 F_nu S, NUFFT at 1e-3, sigma 2) with F^H W F
// by the NUFFT pair (toeplitz 0) or the Toeplitz embedding (toeplitz 1), side by side in one run: CG on
// (E^H E + lambda I) x = E^H y, timed over 20 iterations (the normal, S and S^H, the vector updates).
void BM_RadialSenseIterationGpu(benchmark::State& state) {
    gpu_case(state, [&] {
        const int dims = int(state.range(0));
        const size_t n = size_t(state.range(1)), coils = size_t(state.range(2)), spokes = size_t(state.range(3)),
                     samples = size_t(state.range(4));
        const bool toeplitz = state.range(5) != 0;
        auto gpu = larmor::make_cuda_backend();
        const Shape image = cube(dims, n);
        const RArray k = kooshball(dims, n, spokes, samples);
        const size_t m = k.shape()[1];
        auto plan = larmor::Nufft::create(gpu, image, coils, k, {});
        Shape ms = image;
        ms.push_back(coils);
        CArray maps = gpu->host_staging(ms);
        fill(maps.data(), maps.size());
        RArray w = RArray::host({m});
        for (size_t i = 0; i < m; ++i) w.data()[i] = 1.f + float(i % 7) * 0.1f;  // density-like, not uniform
        larmor::LinOp wf = larmor::compose(larmor::diag(gpu, Shape{m, coils}, gpu->to_device(w)), plan);
        if (toeplitz) {
            RArray w2 = RArray::host({m});  // w is W^1/2 in E; Q's spectrum takes W = w^2
            for (size_t i = 0; i < m; ++i) w2.data()[i] = w.data()[i] * w.data()[i];
            wf = larmor::with_normal(wf, larmor::toeplitz_normal(gpu, image, coils, larmor::toeplitz_spectrum(gpu, image, k, w2)));
        }
        larmor::LinOp e = larmor::compose(wf, larmor::sense(gpu, gpu->to_device(maps)));
        auto nrm = larmor::sum(larmor::normal(e), larmor::scale(0.01f, larmor::identity(gpu, image)));
        CArray h = gpu->host_staging(image);
        fill(h.data(), h.size());
        const CArray b = gpu->to_device(h);
        constexpr int kIters = 20;
        auto solve = [&] {
            larmor::ConjugateGradient cg(nrm, b, gpu->zeros(image), {kIters, 0.0});
            while (!cg.done()) cg.update();
        };
        solve();
        gpu->synchronize();
        for (auto _ : state) {
            const auto t0 = std::chrono::steady_clock::now();
            solve();
            gpu->synchronize();
            state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kIters);
        }
        state.SetLabel(toeplitz ? "Toeplitz" : "NUFFT pair");
    });
}
BENCHMARK(BM_RadialSenseIterationGpu)
    ->ArgNames({"dims", "n", "coils", "spokes", "samples", "toeplitz"})
    ->Args({2, 256, 8, 402, 512, 0})
    ->Args({2, 256, 8, 402, 512, 1})
    ->Args({2, 256, 32, 402, 512, 0})
    ->Args({2, 256, 32, 402, 512, 1})
    ->Args({3, 64, 8, 2000, 128, 0})
    ->Args({3, 64, 8, 2000, 128, 1})
    ->UseManualTime()
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond);
#endif

}  // namespace
