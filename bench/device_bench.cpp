// Measures the ceilings the other GPU benchmarks are judged against (METHOD.md: measure the
// device's copy bandwidth once, in the same run, rather than trusting a datasheet).
#include <benchmark/benchmark.h>

#include <stdexcept>
#include <string>

#ifdef LARMOR_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include "core/backend.h"

namespace {

#ifdef LARMOR_WITH_CUDA
void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Device-to-device copy of 2 GiB: bytes read + bytes written over time = usable HBM bandwidth.
void BM_DeviceCopyBandwidth(benchmark::State& state) {
    if (!larmor::cuda_available()) {
        state.SkipWithError("no CUDA device");
        return;
    }
    const size_t bytes = size_t{2} << 30;
    void *src = nullptr, *dst = nullptr;
    check(cudaMalloc(&src, bytes), "cudaMalloc");
    check(cudaMalloc(&dst, bytes), "cudaMalloc");
    check(cudaMemset(src, 1, bytes), "cudaMemset");
    cudaEvent_t start, stop;
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
    for (int i = 0; i < 3; ++i) check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "warm-up copy");
    for (auto _ : state) {
        check(cudaEventRecord(start), "cudaEventRecord");
        check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
        check(cudaEventRecord(stop), "cudaEventRecord");
        check(cudaEventSynchronize(stop), "cudaEventSynchronize");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        state.SetIterationTime(ms * 1e-3);
    }
    state.counters["bytes"] = double(2 * bytes);
    state.counters["GBps"] = benchmark::Counter(double(2 * bytes) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaFree(src);
    cudaFree(dst);
}
BENCHMARK(BM_DeviceCopyBandwidth)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(20);

// Host pinned -> device upload of 64 MiB: the PCIe cost a frame pays when it is not already on the GPU.
void BM_PinnedUploadBandwidth(benchmark::State& state) {
    if (!larmor::cuda_available()) {
        state.SkipWithError("no CUDA device");
        return;
    }
    const size_t bytes = size_t{64} << 20;
    void *host = nullptr, *dev = nullptr;
    check(cudaHostAlloc(&host, bytes, cudaHostAllocDefault), "cudaHostAlloc");
    check(cudaMalloc(&dev, bytes), "cudaMalloc");
    cudaEvent_t start, stop;
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
    check(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice), "warm-up");
    for (auto _ : state) {
        check(cudaEventRecord(start), "cudaEventRecord");
        check(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpyAsync");
        check(cudaEventRecord(stop), "cudaEventRecord");
        check(cudaEventSynchronize(stop), "cudaEventSynchronize");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        state.SetIterationTime(ms * 1e-3);
    }
    state.counters["bytes"] = double(bytes);
    state.counters["GBps"] = benchmark::Counter(double(bytes) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaFreeHost(host);
    cudaFree(dev);
}
BENCHMARK(BM_PinnedUploadBandwidth)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(50);
#endif

}  // namespace
