// The Cartesian chain (noise prewhitening -> RO oversampling removal -> accumulate -> FFT ->
// combine -> finish) per 256x256 frame with 32 coils and 2x readout oversampling, on the real
// gadgets built from config/, without the socket.
//   BM_CartesianFrameLatency_<backend>/<combine>: from the arrival of the frame's last readout to
//     the finished image (the earlier 255 readouts were fed untimed, as they arrive during the scan);
//     this is what the patient-table latency is made of.
//   BM_CartesianFrameTimeline_GPU_rss: the latency row with the timeline counters below.
//   BM_CartesianFrameTotal_<backend>/<combine>: all 256 readouts in, image out (host-inclusive).
//   BM_SessionFirstFrame_<backend>_rss: the same frame as the first of a new session (backend and
//     gadgets made, header read), for a shape the process has reconstructed before.
//   BM_GrappaFrameLatency_<backend>: the grappa chain (config/grappa.pbtxt) on R=3 frames (86 lattice
//     lines) after a first frame that carried 48 calibration lines: the frames reuse its unmixing
//     weights, so the latency after the last readout is one inverse FFT and a weighted coil sum, the
//     same work as the Cartesian chain's FFT + combination (the issue asks for at most 2x its latency).
// Each iteration is timed with a host clock around work that ends in a device->host copy of the
// image (a synchronisation), so the host clock measures the device work too.
// The latency rows' timeline counters (GPU): for gadget i, host_at_us_i is when the host entered it and
// dev_at_us_i when the device had finished everything queued before it, both since the last readout
// was handed in (a CUDA event on the session's stream at each gadget's entry). Where dev_at follows
// host_at closely the device was waiting for the host; where it lags, for its own work.
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ismrmrd/xml.h>

#include "bench/frame_source.h"
#include "core/backend.h"
#include "gadgets/chain_config.h"
#include "gadgets/factories.h"

#ifdef LARMOR_WITH_CUDA
#include "bench/gpu_timing.h"
#include "cuda/cuda_backend.h"
#endif

namespace {

using namespace larmor;

using bench::kCoils;
using bench::kLines;
using bench::kReadout;

// Runs gadgets synchronously: each emit calls the next gadget's process() on the same thread.
class Pipeline {
public:
    Pipeline(const std::string& chain_name, std::shared_ptr<Backend> backend) {
        config::Chain chain = load_chain_file(std::string(LARMOR_SOURCE_DIR) + "/config", chain_name);
        for (const auto& g : chain.gadget()) {
            gadgets_.push_back(make_gadget(g));
            names_.push_back(gadget_name(g));
        }
        host_us_.assign(gadgets_.size(), 0.0);
        for (size_t i = 0; i < gadgets_.size(); ++i) emitters_.push_back(std::make_unique<Link>(*this, i));
        SessionContext ctx;
        ctx.header_xml = bench::frame_header_xml();
        ISMRMRD::deserialize(ctx.header_xml.c_str(), ctx.header);
        ctx.backend = backend_ = std::move(backend);
        ctx.session_id = "bench";
        for (auto& g : gadgets_) g->start(ctx);
    }
    void feed(Message m) { deliver(0, std::move(m)); }
    // Waits for queued device work (the streamed uploads of readouts fed so far).
    void settle() { backend_->synchronize(); }
    size_t images() const { return images_; }
    // Host time spent inside each gadget's process() (exclusive of the gadgets it emits to) while
    // `timed` is set: where the latency goes on the host side; device work shows up in the gadget
    // that waits for it (ImageFinish, which downloads the image).
    bool timed = false;
    const std::vector<double>& host_us() const { return host_us_; }
    const std::vector<std::string>& names() const { return names_; }
    // The timeline of timed feeds (GPU only; see the top): sums over the feeds, per gadget.
    bool timeline = false;
    const std::vector<double>& host_at_us() const { return host_at_us_; }
    const std::vector<double>& dev_at_us() const { return dev_at_us_; }
    double dev_end_us() const { return dev_end_us_; }
    void feed_timed(Message m) {
#ifdef LARMOR_WITH_CUDA
        if (timeline && backend_->device() == Device::Cuda) {
            if (events_.empty()) {
                events_.resize(gadgets_.size() + 1);
                for (auto& e : events_) BENCH_CUDA(cudaEventCreate(&e));
                host_at_us_.assign(gadgets_.size(), 0.0);
                dev_at_us_.assign(gadgets_.size(), 0.0);
            }
            t_feed_ = std::chrono::steady_clock::now();
            timed = true;
            feed(std::move(m));
            timed = false;
            BENCH_CUDA(cudaEventRecord(events_.back(), cuda::backend_stream(*backend_)));
            pending_timeline_ = true;
            return;
        }
#endif
        timed = true;
        feed(std::move(m));
        timed = false;
    }
    // Adds the last timed feed's device timeline to the sums (outside the timed region).
    void collect_timeline() {
#ifdef LARMOR_WITH_CUDA
        if (!pending_timeline_) return;
        pending_timeline_ = false;
        BENCH_CUDA(cudaEventSynchronize(events_.back()));
        for (size_t i = 0; i < gadgets_.size(); ++i) {
            float ms = 0;
            BENCH_CUDA(cudaEventElapsedTime(&ms, events_[0], events_[i]));
            dev_at_us_[i] += 1e3 * ms;
        }
        float ms = 0;
        BENCH_CUDA(cudaEventElapsedTime(&ms, events_[0], events_.back()));
        dev_end_us_ += 1e3 * ms;
#endif
    }
    ~Pipeline() {
#ifdef LARMOR_WITH_CUDA
        for (auto& e : events_) cudaEventDestroy(e);
#endif
    }

private:
    struct Link final : Emitter {
        Link(Pipeline& p, size_t i) : p(p), i(i) {}
        void emit(Message m) override { p.deliver(i + 1, std::move(m)); }
        Pipeline& p;
        size_t i;
    };
    void deliver(size_t i, Message m) {
        if (i == gadgets_.size()) {
            if (std::holds_alternative<Image>(m)) ++images_;
            return;
        }
        if (!timed) return gadgets_[i]->process(std::move(m), *emitters_[i]);
        const auto t0 = std::chrono::steady_clock::now();
#ifdef LARMOR_WITH_CUDA
        if (!events_.empty() && timeline) {
            host_at_us_[i] += std::chrono::duration<double, std::micro>(t0 - t_feed_).count();
            BENCH_CUDA(cudaEventRecord(events_[i], cuda::backend_stream(*backend_)));
        }
#endif
        const double child_before = child_us_;
        child_us_ = 0;
        gadgets_[i]->process(std::move(m), *emitters_[i]);
        const double total = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        host_us_[i] += total - child_us_;
        child_us_ = child_before + total;
    }
    static std::string gadget_name(const config::Gadget& g) {
        const auto* field = g.GetReflection()->GetOneofFieldDescriptor(g, g.GetDescriptor()->oneof_decl(0));
        return field ? field->name() : "gadget";
    }
    std::shared_ptr<Backend> backend_;
    std::vector<std::unique_ptr<Gadget>> gadgets_;
    std::vector<std::unique_ptr<Link>> emitters_;
    size_t images_ = 0;
    std::vector<std::string> names_;
    std::vector<double> host_us_;
    double child_us_ = 0;
    std::vector<double> host_at_us_, dev_at_us_;
    double dev_end_us_ = 0;
    bool pending_timeline_ = false;
    std::chrono::steady_clock::time_point t_feed_;
#ifdef LARMOR_WITH_CUDA
    std::vector<cudaEvent_t> events_;  // one per gadget's entry, and one after the feed
#endif
};

std::shared_ptr<Backend> backend_for(bool gpu) { return gpu ? make_cuda_backend() : make_cpu_backend(); }

// accel > 1: the frame holds the lines y = 0 (mod accel) only (255 is one of them for 3), and the first
// warm-up frame also carries the 48 central lines as calibration lines (flags 20 and 21).
// timeline: the latency row with the timeline counters (its event records add a little host time).
void frame_bench(benchmark::State& state, bool gpu, const std::string& chain, bool latency_only, int accel = 1,
                 bool timeline = false) {
    if (gpu && !cuda_available()) {
        state.SkipWithError("no CUDA device");
        return;
    }
    std::vector<Acquisition> frame;
    for (int y = 0; y < kLines; ++y)
        if (y % accel == 0) frame.push_back(bench::frame_readout(0, y));
    std::vector<Acquisition> calibration_frame;
    if (accel > 1)
        for (int y = 0; y < kLines; ++y) {
            const bool acs = y >= kLines / 2 - 24 && y < kLines / 2 + 24;
            if (!acs && y % accel != 0) continue;
            Acquisition a = bench::frame_readout(0, y);
            if (acs) a.head.flags |= uint64_t{1} << ((y % accel == 0 ? 21 : 20) - 1);
            calibration_frame.push_back(std::move(a));
        }
    const int lines = int(frame.size());
    try {
        Pipeline p(chain, backend_for(gpu));
        for (int n = 0; n < 8; ++n) p.feed(bench::frame_readout(0, n, true));  // noise scans
        uint16_t rep = 0;
        auto line = [&](int y) {
            Acquisition a = frame[size_t(y)];
            a.head.idx.repetition = rep;
            a.head.scan_counter = uint32_t(rep) * kLines + uint32_t(y);
            return a;
        };
        if (!calibration_frame.empty()) {
            for (Acquisition& a : calibration_frame) p.feed(std::move(a));
            ++rep;
        }
        auto run_frame = [&](bool timed_part_only, benchmark::State* st) {
            if (timed_part_only && st) st->PauseTiming();
            p.collect_timeline();
            for (int y = 0; y < lines - 1; ++y) p.feed(line(y));
            // The last readout as the server would have decoded it: its copy from the template is not
            // part of the latency.
            Acquisition last = line(lines - 1);
            if (timed_part_only && st) {
                // During a scan the earlier readouts arrive over seconds and their uploads finish
                // long before the last one; here they were fed back to back, so wait for them.
                p.settle();
                st->ResumeTiming();
            }
            if (timed_part_only && st) {
                p.timeline = timeline;
                p.feed_timed(std::move(last));
                p.timeline = false;
            } else {
                p.feed(std::move(last));
            }
            ++rep;
        };
        for (int w = 0; w < 3; ++w) run_frame(false, nullptr);  // plans, pools, first touch
        const size_t before = p.images();
        for (auto _ : state) run_frame(latency_only, &state);
        p.collect_timeline();
        if (p.images() - before != size_t(state.iterations()))
            throw std::runtime_error("expected one image per frame, got " + std::to_string(p.images() - before));
        if (latency_only) {
            const double n = double(state.iterations());
            for (size_t i = 0; i < p.names().size(); ++i)
                state.counters["host_us_" + std::to_string(i) + "_" + p.names()[i]] = p.host_us()[i] / n;
            for (size_t i = 0; i < p.dev_at_us().size(); ++i) {
                state.counters["host_at_us_" + std::to_string(i)] = p.host_at_us()[i] / n;
                state.counters["dev_at_us_" + std::to_string(i)] = p.dev_at_us()[i] / n;
            }
            if (!p.dev_at_us().empty()) state.counters["dev_end_us"] = p.dev_end_us() / n;
        }
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
        return;
    }
    // Fewest bytes through device memory for what is left after the last readout (latency) or for
    // the whole frame (total), for the bound column (bench_table.py: bytes / measured copy bandwidth).
    // Line operations act on batches of 16 readouts (AccumulateTrigger): per batch B = 512 x 16 x 32
    // samples, readout IFFT read+write 2B, crop B + B/2, FFT back B, whitening and placement in one
    // pass B.
    const double sample = 8;
    const double batch = double(kReadout) * 16 * kCoils * sample;
    const double per_batch = 5.5 * batch;
    const double image = double(kReadout / 2) * kLines * kCoils * sample;  // coil images after ROOS
    // GRAPPA's combination reads the unmixing weights beside the coil images: one more image.
    const double tail = 2 * image                                          // 2D inverse FFT read+write
                        + (accel > 1 ? 2 : 1) * image + double(kLines) * kLines * sample  // combine
                        + double(kLines) * kLines * (sample + 4);           // magnitude: read, write
    const double batches = latency_only ? 1.0 : double(lines) / 16;
    state.counters["bytes"] = batches * per_batch + tail;
    state.counters["frames_per_s"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
}

// A new session's first frame: backend, gadgets and header set up, 8 noise readouts and the 256 readouts
// of one frame in, the image out, all timed; the process has seen the shape before (one untimed session
// first), as a server has after its first scan of a protocol. Against CartesianFrameTotal (the same
// frame in a session already running) it is what a session's set-up costs: plans, pools, first touch.
void first_frame_bench(benchmark::State& state, bool gpu, const std::string& chain) {
    if (gpu && !cuda_available()) {
        state.SkipWithError("no CUDA device");
        return;
    }
    // Where a session's time goes: backend, gadgets' start, noise readouts, the frame.
    double phase_us[4] = {0, 0, 0, 0};
    std::vector<std::string> names;
    std::vector<double> gadget_us;
    // The readouts as the server would have decoded them, made once: their copies are fed, as in
    // frame_bench.
    std::vector<Acquisition> noise, frame;
    for (int n = 0; n < 8; ++n) noise.push_back(bench::frame_readout(0, n, true));
    for (int y = 0; y < kLines; ++y) frame.push_back(bench::frame_readout(0, y));
    auto one_session = [&] {
        using clock = std::chrono::steady_clock;
        auto us = [](clock::time_point a, clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); };
        const auto t0 = clock::now();
        std::shared_ptr<Backend> be = backend_for(gpu);
        const auto t1 = clock::now();
        Pipeline p(chain, std::move(be));
        const auto t2 = clock::now();
        for (const Acquisition& a : noise) p.feed(a);
        p.settle();
        const auto t3 = clock::now();
        p.timed = true;
        for (const Acquisition& a : frame) p.feed(a);
        p.timed = false;
        const auto t4 = clock::now();
        if (p.images() != 1) throw std::runtime_error("expected one image, got " + std::to_string(p.images()));
        phase_us[0] += us(t0, t1), phase_us[1] += us(t1, t2), phase_us[2] += us(t2, t3), phase_us[3] += us(t3, t4);
        names = p.names();
        gadget_us.resize(names.size(), 0.0);
        for (size_t i = 0; i < names.size(); ++i) gadget_us[i] += p.host_us()[i];
    };
    try {
        one_session();  // the process's first session of the shape
        for (double& v : phase_us) v = 0;
        for (double& v : gadget_us) v = 0;
        for (auto _ : state) one_session();
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
        return;
    }
    const double n = double(state.iterations());
    state.counters["backend_us"] = phase_us[0] / n;
    state.counters["start_us"] = phase_us[1] / n;
    state.counters["noise_us"] = phase_us[2] / n;
    state.counters["frame_us"] = phase_us[3] / n;
    // The frame's host time per gadget (exclusive), as the latency rows report it.
    for (size_t i = 0; i < names.size(); ++i) state.counters["host_us_" + std::to_string(i) + "_" + names[i]] = gadget_us[i] / n;
}

}  // namespace

BENCHMARK_CAPTURE(first_frame_bench, SessionFirstFrame_GPU_rss, true, std::string("cartesian-rss"))->Unit(benchmark::kMicrosecond)->MinTime(1.0);
BENCHMARK_CAPTURE(first_frame_bench, SessionFirstFrame_CPU_rss, false, std::string("cartesian-rss"))->Unit(benchmark::kMicrosecond)->MinTime(1.0);

// Latency rows run a fixed number of frames: each timed iteration first feeds 255 untimed readouts.
BENCHMARK_CAPTURE(frame_bench, CartesianFrameLatency_GPU_rss, true, std::string("cartesian-rss"), true)->Unit(benchmark::kMicrosecond)->Iterations(200);
BENCHMARK_CAPTURE(frame_bench, CartesianFrameLatency_GPU_walsh, true, std::string("cartesian"), true)->Unit(benchmark::kMicrosecond)->Iterations(200);
BENCHMARK_CAPTURE(frame_bench, CartesianFrameTimeline_GPU_rss, true, std::string("cartesian-rss"), true, 1, true)->Unit(benchmark::kMicrosecond)->Iterations(200);
BENCHMARK_CAPTURE(frame_bench, CartesianFrameTotal_GPU_rss, true, std::string("cartesian-rss"), false)->Unit(benchmark::kMicrosecond)->MinTime(1.0);
BENCHMARK_CAPTURE(frame_bench, CartesianFrameLatency_CPU_rss, false, std::string("cartesian-rss"), true)->Unit(benchmark::kMicrosecond)->Iterations(20);
BENCHMARK_CAPTURE(frame_bench, CartesianFrameTotal_CPU_rss, false, std::string("cartesian-rss"), false)->Unit(benchmark::kMicrosecond)->MinTime(1.0);
BENCHMARK_CAPTURE(frame_bench, CartesianFrameLatency_CPU_walsh, false, std::string("cartesian"), true)->Unit(benchmark::kMicrosecond)->Iterations(5);
BENCHMARK_CAPTURE(frame_bench, GrappaFrameLatency_GPU, true, std::string("grappa"), true, 3)->Unit(benchmark::kMicrosecond)->Iterations(200);
BENCHMARK_CAPTURE(frame_bench, GrappaFrameLatency_CPU, false, std::string("grappa"), true, 3)->Unit(benchmark::kMicrosecond)->Iterations(20);
