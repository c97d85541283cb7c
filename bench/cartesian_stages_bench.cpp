// Cost of each backend operation the Cartesian chain performs per 256x256x32-coil frame (2x readout
// oversampling), on the shapes the chain uses: where the frame latency of cartesian_chain_bench goes.
// Each iteration queues the operation and synchronises, so the time includes launch and host costs.
#include <benchmark/benchmark.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/frame_source.h"
#include "core/backend.h"
#include "core/coils/coil_combination.h"
#include "gadgets/kernels/line_placement.h"

namespace {

using namespace larmor;

// Walsh: per-pixel maps (stride 1), a grid of spacing 4 and the default spacing (= the 7x7 window),
// side by side; WalshCombine7: what CoilCombine runs (default grid, maps interpolated inside the
// combination and never stored).
// LineBatch: what AccumulateTrigger does per 16 readouts (readout IFFT, crop, FFT, whitening folded
// into the placement into the buffer); DownloadMagnitude: ImageFinish's magnitude taken on the device.
enum class Op {
    UploadLine, LineBatch, FftReadout, CropReadout, Whiten, Fft2d, Rss, Walsh, WalshStride4, WalshStride7, Combine,
    WalshCombine7, Download,
    DownloadMagnitude, Alloc
};

void stage(benchmark::State& state, bool gpu, Op op) {
    if (gpu && !cuda_available()) {
        state.SkipWithError("no CUDA device");
        return;
    }
    auto be = gpu ? make_cuda_backend() : make_cpu_backend();
    const size_t ro = bench::kReadout, ny = bench::kLines, nc = bench::kCoils;
    const Acquisition line = bench::frame_readout(0, 7);
    CArray raw = be->zeros({ro, ny, 1, nc});
    for (size_t y = 0; y < ny; ++y)
        be->upload_rows(line.data.data(), ro, ro, nc, raw, y * ro, ro * ny);
    CArray half = be->empty({ro / 2, ny, 1, nc});
    be->crop_pad_centred(raw, half);
    CArray one = be->empty({ro / 2, ny, 1});
    CArray maps = be->empty(half.shape());
    std::vector<cfloat> w(nc * nc);
    for (size_t i = 0; i < w.size(); ++i) w[i] = cfloat(i % (nc + 1) == 0 ? 1.f : 0.01f, 0.f);
    CArray wh = CArray::host({w.size()});
    std::copy(w.begin(), w.end(), wh.data());
    const CArray wd = be->to_device(wh);
    const size_t kb = 16;
    CArray batch = be->zeros({ro, kb, nc});
    // Workspaces, as the accumulator and the FFT gadget keep them.
    CArray batch_image = be->empty(batch.shape()), batch_half = be->empty({ro / 2, kb, nc});
    CArray batch_half_k = be->empty({ro / 2, kb, nc});
    CArray raw_image = be->empty(raw.shape()), half_image = be->empty(half.shape());
    std::vector<kernels::LinePlacement> where;
    for (size_t k = 0; k < kb; ++k) where.push_back({k * 9, 0.f, 1.f});
    std::vector<float> magnitude(ny * ro / 2);
    be->synchronize();
    std::function<void()> run;
    switch (op) {
    case Op::UploadLine: run = [&] { be->upload_rows(line.data.data(), ro, ro, nc, raw, 5 * ro, ro * ny); }; break;
    case Op::LineBatch:
        run = [&] {
            be->fft(batch, batch_image, 1u, FFTDirection::Inverse);
            be->crop_pad_centred(batch_image, batch_half);
            be->fft(batch_half, batch_half_k, 1u, FFTDirection::Forward);
            kernels::mix_place_lines(*be, batch_half_k, wd, where, half);
        };
        break;
    case Op::FftReadout: run = [&] { be->fft(raw, raw_image, 1u, FFTDirection::Inverse); }; break;
    case Op::CropReadout: run = [&] { be->crop_pad_centred(raw, half); }; break;
    case Op::Whiten: run = [&] { CArray y = be->empty(half.shape()); kernels::mix_last_axis(*be, half, w, y); }; break;
    case Op::Fft2d: run = [&] { be->fft(half, half_image, 3u, FFTDirection::Inverse); }; break;
    case Op::Rss: run = [&] { coils::rss_last_axis(*be, half, one); }; break;
    case Op::Walsh: run = [&] { coils::walsh_sensitivities(*be, half, 7, 1, maps); }; break;
    case Op::WalshStride4: run = [&] { coils::walsh_sensitivities(*be, half, 7, 4, maps); }; break;
    case Op::WalshStride7: run = [&] { coils::walsh_sensitivities(*be, half, 7, 7, maps); }; break;
    case Op::Combine: run = [&] { coils::combine_last_axis(*be, half, maps, one); }; break;
    case Op::WalshCombine7: run = [&] { coils::walsh_combine(*be, half, 7, 7, one); }; break;
    case Op::Download: run = [&] { CArray h = be->to_host(one); benchmark::DoNotOptimize(h.data()); }; break;
    case Op::DownloadMagnitude: run = [&] { be->download_part(one, ComplexPart::Magnitude, magnitude.data()); }; break;
    case Op::Alloc: run = [&] { CArray a = be->empty(raw.shape()); benchmark::DoNotOptimize(a.data()); }; break;
    }
    for (int i = 0; i < 3; ++i) run();
    be->synchronize();
    // Host time to queue the operation, apart from the wait: on the GPU it is what the frame latency
    // pays for the operation while the device idles, when nothing queued before it is still running.
    double enqueue_us = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        run();
        enqueue_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        be->synchronize();
    }
    state.counters["host_enqueue_us"] = enqueue_us / double(state.iterations());
}

#define LARMOR_STAGE(name)                                                                                  \
    BENCHMARK_CAPTURE(stage, name##_GPU, true, Op::name)->Unit(benchmark::kMicrosecond)->UseRealTime();     \
    BENCHMARK_CAPTURE(stage, name##_CPU, false, Op::name)->Unit(benchmark::kMicrosecond)->UseRealTime()

LARMOR_STAGE(UploadLine);
LARMOR_STAGE(LineBatch);
LARMOR_STAGE(FftReadout);
LARMOR_STAGE(CropReadout);
LARMOR_STAGE(Whiten);
LARMOR_STAGE(Fft2d);
LARMOR_STAGE(Rss);
LARMOR_STAGE(Walsh);
LARMOR_STAGE(WalshStride4);
LARMOR_STAGE(WalshStride7);
LARMOR_STAGE(Combine);
LARMOR_STAGE(WalshCombine7);
LARMOR_STAGE(Download);
LARMOR_STAGE(DownloadMagnitude);
LARMOR_STAGE(Alloc);

}  // namespace
