// The CUDA NUFFT's convolution kernels alone (core/linops/nufft_kernels.h, cuda/nufft_*.cu): binning
// (set points), spreading (type 1 / adjoint) and interpolation (type 2 / forward), at the sizes
// cuFINUFFT v2.5.1 was measured at on an H100 (fp32, execute = spread/interp + FFT + deapodisation):
//   case 0: 2D grid 512^2, 258,048 radial points (504 spokes x 512 samples, k in [-128, 128),
//           u = 2k + 256) x 3 transforms   cuFINUFFT 1e-3 / 1e-5: type 1 0.23 / 0.44 ms, type 2 0.11 / 0.12 ms
//   case 1: 2D grid 512^2, 205,824 radial points (402 spokes) x 32
//                                          type 1 1.96 / 4.01 ms, type 2 0.67 / 0.90 ms
//   case 2: 3D grid 256^3, 2,097,152 uniformly random points x 8
//                                          type 1 17.9 / 50.0 ms, type 2 5.8 / 8.3 ms
//   set points: 0.14-0.56 ms.
// Widths 4 (~1e-3) and 7 (~1e-5), beta = 2.30 width (sigma 2). cuFINUFFT's figures include the FFT
// and deapodisation, so the kernels here must come in below them by the FFT's time (bench/fft_bench:
// 512^2 x 32 and 256^3 x 8 batched transforms). Spread runs with the automatic method choice and with
// each method forced (Args' third value: 0 auto, 1 shared-memory tiles, 2 GM-sort, 3 owned planes,
// the atomic-free 3D tile of cuda/nufft_spread_planes.cu, also at width 5 where 1e-3 lands).
// bench/FLOORS-nufft.md gives the work per point and the bounds to read these numbers against.
//
// GPU timing: CUDA events around kBatch back-to-back calls on the backend's stream after a warm-up,
// the stream held at a gate until all are queued (bench/gpu_timing.h); reported per call
// (UseManualTime). Counters: points, transforms, ns per point and transform. Skipped without a device.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/linops/nufft_kernels.h"

#ifdef LARMOR_WITH_CUDA
#include "bench/gpu_timing.h"
#include "cuda/cuda_backend.h"
#include "cuda/nufft_points.h"
#endif

namespace {

using larmor::CArray;
using larmor::NufftGrid;
using larmor::RArray;
using larmor::Shape;

constexpr int kBatch = 20;

struct Problem {
    NufftGrid grid;
    std::vector<float> u;  // [dims, M]
    const char* name;
};

// Radial spokes through the centre of a 512^2 grid: spoke s at angle pi s / spokes, 512 samples with
// k = -128 + i / 2 cycles per FOV (256^2 image), u = 2 k + 256 grid points (oversampling 2).
std::vector<float> radial(int spokes) {
    constexpr double kPi = 3.14159265358979323846;
    std::vector<float> u;
    u.reserve(static_cast<size_t>(spokes) * 512 * 2);
    for (int s = 0; s < spokes; ++s) {
        const double a = kPi * s / spokes;
        for (int i = 0; i < 512; ++i) {
            const double k = -128.0 + 0.5 * i;
            for (double c : {std::cos(a), std::sin(a)}) {
                double v = 2.0 * k * c + 256.0;
                v -= 512.0 * std::floor(v / 512.0);
                u.push_back(static_cast<float>(v));
            }
        }
    }
    return u;
}

std::vector<float> uniform(long long points, int dims, double n) {
    uint64_t s = 0x9e3779b97f4a7c15ull;
    std::vector<float> u(static_cast<size_t>(points * dims));
    for (auto& v : u) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v = static_cast<float>(static_cast<double>(s >> 11) / 9007199254740992.0 * n);
        if (!(v < n)) v = 0.f;
    }
    return u;
}

Problem problem(int index, int width) {
    Problem p;
    NufftGrid& g = p.grid;
    g.width = width;
    g.beta = 2.30f * static_cast<float>(width);
    if (index == 0 || index == 1) {
        const int spokes = index == 0 ? 504 : 402;
        g.dims = 2;
        g.n[0] = g.n[1] = 512;
        g.batch = index == 0 ? 3 : 32;
        p.u = radial(spokes);
        p.name = index == 0 ? "2D 512^2 radial 258048 pts x3" : "2D 512^2 radial 205824 pts x32";
    } else {
        g.dims = 3;
        g.n[0] = g.n[1] = g.n[2] = 256;
        g.batch = 8;
        p.u = uniform(2097152, 3, 256.0);
        p.name = "3D 256^3 random 2097152 pts x8";
    }
    g.points = static_cast<long long>(p.u.size()) / g.dims;
    return p;
}

#ifdef LARMOR_WITH_CUDA

enum class Op { Bin, Spread, Interp };

struct Setup {
    std::shared_ptr<larmor::Backend> be;
    Problem p;
    RArray u;
    CArray samples, grid;
    std::unique_ptr<larmor::NufftPointSet> points;
};

Setup setup(int index, int width) {
    Setup s;
    s.be = larmor::make_cuda_backend();
    s.p = problem(index, width);
    const NufftGrid& g = s.p.grid;
    RArray hu = s.be->host_real(Shape{static_cast<size_t>(g.dims), static_cast<size_t>(g.points)});
    for (size_t i = 0; i < hu.size(); ++i) hu.data()[i] = s.p.u[i];
    s.u = s.be->to_device(hu);
    CArray hs = s.be->host_staging(Shape{static_cast<size_t>(g.points), static_cast<size_t>(g.batch)});
    uint32_t r = 12345u;
    for (size_t i = 0; i < hs.size(); ++i) {
        r = r * 1664525u + 1013904223u;
        const float re = static_cast<float>(r >> 8) / 16777216.f - 0.5f;
        r = r * 1664525u + 1013904223u;
        hs.data()[i] = larmor::cfloat(re, static_cast<float>(r >> 8) / 16777216.f - 0.5f);
    }
    s.samples = s.be->to_device(hs);
    s.grid = s.be->empty(Shape{static_cast<size_t>(g.grid_size()), static_cast<size_t>(g.batch)});
    s.points = larmor::cuda::nufft_bin_points(*s.be, g, s.u);
    larmor::cuda::nufft_spread(*s.be, g, *s.points, s.samples, s.grid);  // a grid with data, for interp
    s.be->synchronize();
    return s;
}

void run_gpu(benchmark::State& state, Op op) {
    if (!larmor::cuda_available()) {
        state.SkipWithError("no CUDA device");
        return;
    }
    const int index = static_cast<int>(state.range(0)), width = static_cast<int>(state.range(1));
    const auto method = static_cast<larmor::cuda::SpreadMethod>(state.range(2));
    Setup s = setup(index, width);
    const NufftGrid& g = s.p.grid;
    larmor::Backend& be = *s.be;
    // Set points as a sliding window does it: the previous set goes first, so its blocks come back
    // from the backend's cache (no cudaMalloc per call).
    std::unique_ptr<larmor::NufftPointSet> set;
    auto run = [&] {
        for (int i = 0; i < kBatch; ++i) {
            switch (op) {
                case Op::Bin:
                    set.reset();
                    set = larmor::cuda::nufft_bin_points(be, g, s.u);
                    break;
                case Op::Spread: larmor::cuda::nufft_spread_with(be, g, *s.points, s.samples, s.grid, method); break;
                case Op::Interp:
                    larmor::cuda::nufft_interp_with(be, g, *s.points, s.grid, s.samples,
                                                    static_cast<larmor::cuda::InterpMethod>(state.range(2)));
                    break;
            }
        }
    };
    const cudaStream_t stream = larmor::cuda::backend_stream(be);
    larmor::bench::Events ev;
    ev.time(stream, run, nullptr, false, kBatch);
    for (int i = 0; i < 2; ++i) ev.time(stream, run, nullptr, true, kBatch);
    double seconds = 0, host_seconds = 0;
    for (auto _ : state) {
        const double t = ev.time(stream, run, &host_seconds, true, kBatch);
        state.SetIterationTime(t);
        seconds += t;
    }
    const double calls = static_cast<double>(state.iterations());
    const double transforms = op == Op::Bin ? 1.0 : static_cast<double>(g.batch);
    state.counters["points"] = static_cast<double>(g.points);
    state.counters["transforms"] = transforms;
    state.counters["ns_per_point_transform"] = seconds / calls / (static_cast<double>(g.points) * transforms) * 1e9;
    state.counters["host_us_per_call"] = host_seconds / (calls * kBatch) * 1e6;
    std::string label = s.p.name;
    if (op == Op::Spread) {
        const auto used = method == larmor::cuda::SpreadMethod::Auto ? larmor::cuda::nufft_spread_choice(g, *s.points) : method;
        label += used == larmor::cuda::SpreadMethod::SharedTiles   ? ", shared tiles"
                 : used == larmor::cuda::SpreadMethod::OwnedPlanes ? ", owned planes"
                                                                   : ", GM-sort";
        if (method == larmor::cuda::SpreadMethod::Auto) label += " (auto)";
    }
    if (op == Op::Interp) {
        const auto asked = static_cast<larmor::cuda::InterpMethod>(state.range(2));
        const auto used = asked == larmor::cuda::InterpMethod::Auto ? larmor::cuda::nufft_interp_choice(g, *s.points) : asked;
        label += used == larmor::cuda::InterpMethod::SharedTiles ? ", shared tiles"
                 : used == larmor::cuda::InterpMethod::TileRows  ? ", tile rows"
                                                                 : ", GM-sort";
        if (asked == larmor::cuda::InterpMethod::Auto) label += " (auto)";
    }
    state.SetLabel(label);
}

template <typename F>
void guarded(benchmark::State& state, F&& f) {
    try {
        f();
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
    }
}

void BM_NufftBinPoints(benchmark::State& state) {
    guarded(state, [&] { run_gpu(state, Op::Bin); });
}
void BM_NufftSpread(benchmark::State& state) {
    guarded(state, [&] { run_gpu(state, Op::Spread); });
}
void BM_NufftInterp(benchmark::State& state) {
    guarded(state, [&] { run_gpu(state, Op::Interp); });
}

#else

void BM_NufftBinPoints(benchmark::State& state) { state.SkipWithError("built without CUDA"); }
void BM_NufftSpread(benchmark::State& state) { state.SkipWithError("built without CUDA"); }
void BM_NufftInterp(benchmark::State& state) { state.SkipWithError("built without CUDA"); }

#endif

// {case, width, spread or interpolation method (0 auto, 1 shared tiles, 2 GM-sort; 3 owned planes for
// spreading, tile rows for interpolation)}
void cases(benchmark::internal::Benchmark* b) {
    for (int c = 0; c < 3; ++c)
        for (int w : {4, 7}) b->Args({c, w, 0});
}
void spread_cases(benchmark::internal::Benchmark* b) {
    for (int c = 0; c < 3; ++c)
        for (int w : {4, 7})
            for (int m : {0, 1, 2}) b->Args({c, w, m});
}
// Interpolation also by tile rows (3D only): {case, width, 3}, at width 5 too.
void interp_all_cases(benchmark::internal::Benchmark* b) {
    spread_cases(b);
    for (int w : {4, 5, 7}) b->Args({2, w, 3});
    b->Args({2, 5, 1});
}
// Spreading also with the owned planes (3D only): {case, width, 3}.
void spread_all_cases(benchmark::internal::Benchmark* b) {
    spread_cases(b);
    for (int w : {4, 5, 7}) b->Args({2, w, 3});
    b->Args({2, 5, 1});
}

BENCHMARK(BM_NufftBinPoints)->Apply(cases)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NufftSpread)->Apply(spread_all_cases)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NufftInterp)->Apply(interp_all_cases)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
