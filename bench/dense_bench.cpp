// The dense layer (core/dense/dense.h) at the sizes coil calibration meets, on the CPU backend and
// (when a device exists; the GPU benchmarks skip themselves otherwise) on CUDA:
//   BM_DenseEig{Cpu,Gpu}/n/batch       hermitian_eig: n = 504, batch 1 (ESPIRiT's Gram matrix of 14
//                                       coils and a 6 x 6 kernel: n = 6 * 6 * 14); n = 8, 14, 32 with
//                                       batch 65536 (per-pixel coil matrices of a 256^2 image); n = 128
//                                       and 504 with batch 2 (where OpenMP over the batch and OpenBLAS's
//                                       threads inside each matrix compete: core/dense/dense_cpu.cpp).
//   BM_DenseCholesky{Cpu,Gpu}/n/nrhs    cholesky_solve, batch 1: n = 504, nrhs = 14 (GRAPPA/SPIRiT
//                                       weights of 14 coils from a 6 x 6 kernel's normal equations).
//   BM_DenseGram{Cpu,Gpu}/m/n           gram, batch 1: the calibration matrix of a 24 x 24 ACS block,
//                                       6 x 6 kernel, 14 coils: m = 19^2 = 361 rows, n = 504 columns.
// CPU: wall clock per call (UseRealTime). GPU: CUDA events around kBatch back-to-back calls after a
// warm-up (bench/gpu_timing.h), per call; not gated, since hermitian_eig and cholesky_solve wait for
// their info flags at the end of each call, so the time includes those round trips (tens of
// microseconds, what a caller pays).
//
// Counters: GFLOP/s against nominal LAPACK counts in real flops (a complex multiply-add is 8), from
// which a fraction of peak follows (the H200's FP32 peak without tensor cores: 67 TFLOP/s, NVIDIA's
// datasheet; this CPU's: cores x FMA units x 8 lanes x 2 x clock):
//   hermitian_eig with vectors (heevd)  44/3 n^3 per matrix: tridiagonal reduction 16/3 n^3 (4 x the
//                                       real 4/3 n^3), back-transformation of the eigenvectors 8 n^3
//                                       (4 x 2 n^3), divide and conquer on the real tridiagonal ~4/3 n^3
//                                       (its bound without deflation). The Jacobi routine of the CUDA
//                                       twin (n <= 32) does several times more arithmetic; the nominal
//                                       count is still what "useful" means.
//   cholesky_solve                      4/3 n^3 (cpotrf: n^3 / 6 complex multiply-adds) + 8 n^2 nrhs
//                                       (two triangular solves of n^2 / 2 complex multiply-adds per
//                                       right-hand side). n = 504, nrhs = 14: 0.199 GFLOP.
//   gram (herk)                         4 n (n + 1) m (n (n + 1) / 2 entries of m complex multiply-adds).
//   hermitian_eig n = 504: 1.88 GFLOP; n = 8, 14, 32 x 65536: 0.49, 2.64, 31.5 GFLOP.
#include <benchmark/benchmark.h>

#include <complex>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>

#include "core/backend.h"
#include "core/dense/dense.h"

#ifdef LARMOR_WITH_CUDA
#include <cuda_runtime.h>

#include "bench/gpu_timing.h"
#include "cuda/cuda_backend.h"
#endif

namespace {

using larmor::Backend;
using larmor::CArray;
using larmor::cfloat;
using larmor::RArray;

constexpr int kBatch = 3;

double eig_flops(double n) { return 44.0 / 3.0 * n * n * n; }
double cholesky_flops(double n, double nrhs) { return 4.0 / 3.0 * n * n * n + 8.0 * n * n * nrhs; }
double gram_flops(double m, double n) { return 4.0 * n * (n + 1) * m; }

// Pseudo-random entries in [-0.5, 0.5) (a linear congruential generator: the same matrices every run).
void fill_random(CArray& h, uint32_t seed) {
    uint32_t s = seed;
    auto next = [&] {
        s = s * 1664525u + 1013904223u;
        return float(s >> 8) / float(1u << 24) - 0.5f;
    };
    for (size_t i = 0; i < h.size(); ++i) {
        const float re = next();
        h.data()[i] = cfloat(re, next());
    }
}

// Hermitian positive definite matrices [n, n, batch]: random entries below 1/sqrt(2) in magnitude off
// the diagonal, n on it, so positive definite by Gershgorin's theorem.
CArray hpd_batch(Backend& be, size_t n, size_t batch) {
    CArray h = be.host_staging({n, n, batch});
    fill_random(h, 7);
    for (size_t b = 0; b < batch; ++b) {
        cfloat* a = h.data() + b * n * n;
        for (size_t j = 0; j < n; ++j) {
            a[j + j * n] = cfloat(float(n), 0.f);
            for (size_t i = j + 1; i < n; ++i) a[j + i * n] = std::conj(a[i + j * n]);
        }
    }
    return be.to_device(h);
}

CArray general(Backend& be, size_t m, size_t n) {
    CArray h = be.host_staging({m, n, 1});
    fill_random(h, 11);
    return be.to_device(h);
}

template <class F>
void guarded(benchmark::State& state, F&& f) {
    try {
        f();
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
    }
}

enum class Op { Eig, Cholesky, Gram };

// The case's inputs and one call of it, on `be`. Filled in place: `call` refers to the members.
struct Work {
    CArray a, b, rhs;
    RArray values;
    CArray vectors;
    double flops = 0;
    std::function<void()> call;
    Work() = default;
    Work(const Work&) = delete;
    Work& operator=(const Work&) = delete;
};

void make_work(Backend& be, Op op, size_t x, size_t y, Work& w) {
    if (op == Op::Eig) {
        w.a = hpd_batch(be, x, y);
        w.values = be.empty_real({x, y});
        w.vectors = be.empty({x, x, y});
        w.flops = eig_flops(double(x)) * double(y);
        w.call = [&be, &w] { larmor::dense::hermitian_eig(be, w.a, w.values, w.vectors); };
    } else if (op == Op::Cholesky) {
        w.a = hpd_batch(be, x, 1);
        w.rhs = general(be, x, y);
        w.b = be.empty({x, y, 1});
        w.flops = cholesky_flops(double(x), double(y));
        // The solve overwrites b: each call starts from the same right-hand sides (a copy of n x nrhs,
        // negligible beside the factorisation).
        w.call = [&be, &w] {
            be.copy(w.rhs, w.b);
            larmor::dense::cholesky_solve(be, w.a, w.b);
        };
    } else {
        w.a = general(be, x, y);
        w.vectors = be.empty({y, y, 1});
        w.flops = gram_flops(double(x), double(y));
        w.call = [&be, &w] { larmor::dense::gram(be, w.a, w.vectors); };
    }
}

void run_cpu(benchmark::State& state, Op op) {
    auto be = larmor::make_cpu_backend();
    Work w;
    make_work(*be, op, size_t(state.range(0)), size_t(state.range(1)), w);
    w.call();  // workspaces, OpenBLAS's buffers
    for (auto _ : state) w.call();
    state.counters["GFLOP/s"] = benchmark::Counter(w.flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    state.SetLabel(be->describe());
}

void BM_DenseEigCpu(benchmark::State& s) { guarded(s, [&] { run_cpu(s, Op::Eig); }); }
void BM_DenseCholeskyCpu(benchmark::State& s) { guarded(s, [&] { run_cpu(s, Op::Cholesky); }); }
void BM_DenseGramCpu(benchmark::State& s) { guarded(s, [&] { run_cpu(s, Op::Gram); }); }

#ifdef LARMOR_WITH_CUDA
void run_gpu(benchmark::State& state, Op op) {
    if (!larmor::cuda_available()) {
        state.SkipWithError("no CUDA device");
        return;
    }
    auto be = larmor::make_cuda_backend();
    Work w;
    make_work(*be, op, size_t(state.range(0)), size_t(state.range(1)), w);
    const cudaStream_t stream = larmor::cuda::backend_stream(*be);
    larmor::bench::Events ev;
    auto run = [&] {
        for (int i = 0; i < kBatch; ++i) w.call();
    };
    ev.time(stream, run, nullptr, false, kBatch);  // handles, libraries, workspaces
    ev.time(stream, run, nullptr, false, kBatch);
    for (auto _ : state) state.SetIterationTime(ev.time(stream, run, nullptr, false, kBatch));
    state.counters["GFLOP/s"] = benchmark::Counter(w.flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    state.SetLabel(be->describe());
}

void BM_DenseEigGpu(benchmark::State& s) { guarded(s, [&] { run_gpu(s, Op::Eig); }); }
void BM_DenseCholeskyGpu(benchmark::State& s) { guarded(s, [&] { run_gpu(s, Op::Cholesky); }); }
void BM_DenseGramGpu(benchmark::State& s) { guarded(s, [&] { run_gpu(s, Op::Gram); }); }
#endif

void eig_cases(benchmark::internal::Benchmark* b) {
    b->ArgNames({"n", "batch"});
    b->Args({504, 1})->Args({8, 65536})->Args({14, 65536})->Args({32, 65536})->Args({128, 2})->Args({504, 2});
}

}  // namespace

BENCHMARK(BM_DenseEigCpu)->Apply(eig_cases)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DenseCholeskyCpu)->Args({504, 14})->ArgNames({"n", "nrhs"})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DenseGramCpu)->Args({361, 504})->ArgNames({"m", "n"})->Unit(benchmark::kMillisecond)->UseRealTime();
#ifdef LARMOR_WITH_CUDA
BENCHMARK(BM_DenseEigGpu)->Apply(eig_cases)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_DenseCholeskyGpu)
    ->Args({504, 14})
    ->ArgNames({"n", "nrhs"})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
BENCHMARK(BM_DenseGramGpu)->Args({361, 504})->ArgNames({"m", "n"})->Unit(benchmark::kMillisecond)->UseManualTime();
#endif
