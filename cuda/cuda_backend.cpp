// CUDA backend: one per session, with its own stream, cuFFT plan cache and cuBLAS handle
// (device_context.h), so concurrent sessions overlap on the GPU without sharing mutable state.
// Arrays come from the device's stream-ordered pool; everything is queued on the session stream and
// only to_host() and synchronize() wait.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/backend.h"
#include "core/cpu/backend_checks.h"
#include "cuda/cuda_backend.h"
#include "cuda/complex_part.h"
#include "cuda/cuda_check.h"
#include "cuda/device_context.h"
#include "cuda/fft_plans.h"
#include "cuda/kernels.h"
#include "cuda/line_kernels.h"
#include "cuda/upload_ring.h"

namespace larmor {
namespace {

using cuda::DeviceGuard;

float2* dev(CArray& a) { return reinterpret_cast<float2*>(a.data()); }
const float2* dev(const CArray& a) { return reinterpret_cast<const float2*>(a.data()); }

cuda::Dims dims_of(const Shape& s) {
    cuda::Dims d;
    d.rank = s.rank();
    for (int a = 0; a < s.rank(); ++a) d.n[a] = static_cast<long long>(s[a]);
    return d;
}

// An event destroyed with its scope.
class Event {
public:
    explicit Event(const std::string& ctx) { LARMOR_CUDA_CHECK(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming), ctx); }
    ~Event() {
        if (cudaEventDestroy(e_) != cudaSuccess) cudaGetLastError();
    }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    cudaEvent_t get() const { return e_; }

private:
    cudaEvent_t e_ = nullptr;
};

class CudaBackend final : public Backend {
public:
    explicit CudaBackend(int device)
        : ctx_(std::make_shared<cuda::DeviceContext>(device)),
          plans_(ctx_),
          downloads_(std::make_shared<cuda::PinnedCache>(device)),
          uploads_(device) {}

    Device device() const override { return Device::Cuda; }
    cudaStream_t stream() const { return ctx_->stream(); }

    std::string describe() const override {
        const cudaDeviceProp& p = ctx_->props();
        return "cuda:" + std::to_string(ctx_->device()) + " " + p.name + " (sm_" + std::to_string(p.major) +
               std::to_string(p.minor) + ", " + std::to_string(p.multiProcessorCount) + " SMs, " +
               std::to_string(p.totalGlobalMem >> 20) + " MiB)";
    }

    CArray empty(const Shape& shape) override {
        DeviceGuard g(ctx_->device());
        return CArray(shape, cuda::make_device_storage(ctx_, shape.size() * sizeof(cfloat), "array " + shape.str()));
    }

    CArray zeros(const Shape& shape) override {
        CArray a = empty(shape);
        DeviceGuard g(ctx_->device());
        if (a.bytes())
            LARMOR_CUDA_CHECK(cudaMemsetAsync(a.data(), 0, a.bytes(), ctx_->stream()), "zeros " + shape.str());
        return a;
    }

    CArray host_staging(const Shape& shape) override {
        return CArray(shape, cuda::make_pinned_storage(ctx_, shape.size() * sizeof(cfloat), "staging " + shape.str()));
    }

    CArray to_device(const CArray& a) override {
        if (a.device() == Device::Cuda) {
            check_ours(a, "to_device", "a");
            return a;
        }
        DeviceGuard g(ctx_->device());
        const std::string ctx = "upload of " + a.shape().str();
        // Allocated and filled on the upload stream so the copy overlaps kernels already queued; the
        // compute stream waits for it through an event, and the host waits only for the copy, after
        // which the caller may refill its (pinned) buffer.
        CArray d(a.shape(), cuda::make_device_storage(ctx_, a.bytes(), "array " + a.shape().str(), ctx_->upload_stream()));
        if (a.bytes() == 0) return d;
        Event done(ctx);
        LARMOR_CUDA_CHECK(cudaMemcpyAsync(d.data(), a.data(), a.bytes(), cudaMemcpyHostToDevice, ctx_->upload_stream()), ctx);
        LARMOR_CUDA_CHECK(cudaEventRecord(done.get(), ctx_->upload_stream()), ctx);
        LARMOR_CUDA_CHECK(cudaStreamWaitEvent(ctx_->stream(), done.get(), 0), ctx);
        LARMOR_CUDA_CHECK(cudaEventSynchronize(done.get()), ctx);
        return d;
    }

    CArray to_host(const CArray& a) override {
        if (a.device() == Device::Cpu) return a;
        check_ours(a, "to_host", "a");
        DeviceGuard g(ctx_->device());
        const std::string ctx = "download of " + a.shape().str();
        // Into page-locked memory from the backend's cache (not zeroed: the copy overwrites it); the
        // block returns to the cache when the result's last handle goes.
        CArray h(a.shape(), downloads_->take(a.bytes(), ctx));
        if (a.bytes())
            LARMOR_CUDA_CHECK(cudaMemcpyAsync(h.data(), a.data(), a.bytes(), cudaMemcpyDeviceToHost, ctx_->stream()), ctx);
        LARMOR_CUDA_CHECK(cudaStreamSynchronize(ctx_->stream()), ctx);
        return h;
    }

    void download_part(const CArray& x, ComplexPart part, float* out) override {
        check_ours(x, "download_part", "x");
        if (x.size() == 0) return;
        DeviceGuard g(ctx_->device());
        const size_t bytes = x.size() * sizeof(float);
        // The kernel writes the floats straight into page-locked host memory (mapped into the device's
        // address space under unified addressing): no device buffer and no separate copy to queue,
        // and the writes stream over the bus as they are produced. The caller's memory is pageable
        // (often fresh), so the floats are copied there once they have arrived.
        const std::string what = "download_part of " + x.shape().str();
        auto pinned = downloads_->take(bytes, what);
        cuda::launch_complex_part(dev(x), static_cast<long long>(x.size()), part, static_cast<float*>(pinned->data()),
                                  ctx_->stream());
        LARMOR_CUDA_CHECK(cudaStreamSynchronize(ctx_->stream()), what);
        std::memcpy(out, pinned->data(), bytes);
    }

    void synchronize() override {
        DeviceGuard g(ctx_->device());
        LARMOR_CUDA_CHECK(cudaStreamSynchronize(ctx_->stream()), "synchronize on " + describe());
    }

    void upload_rows(const cfloat* src, size_t src_pitch, size_t row_len, size_t rows, CArray& dst,
                     size_t dst_offset, size_t dst_pitch) override {
        check_ours(dst, "upload_rows", "dst");
        detail::check_rows(dst, row_len, rows, dst_offset, dst_pitch, "upload_rows");
        if (rows == 0 || row_len == 0) return;
        // On the compute stream: ordered after the buffer's zeroing and before the reconstruction
        // that follows the trigger. Staged through page-locked slots (cuda/upload_ring.h); a copy too
        // large for a slot goes straight from pageable memory, staged by the driver.
        auto what = [&] {
            return "upload_rows of " + std::to_string(rows) + " x " + std::to_string(row_len) + " into " + dst.shape().str();
        };
        void* to = dst.data() + dst_offset;
        if (uploads_.upload(to, dst_pitch * sizeof(cfloat), src, src_pitch * sizeof(cfloat), row_len * sizeof(cfloat),
                            rows, ctx_->stream(), what))
            return;
        DeviceGuard g(ctx_->device());
        LARMOR_CUDA_CHECK(cudaMemcpy2DAsync(to, dst_pitch * sizeof(cfloat), src, src_pitch * sizeof(cfloat),
                                            row_len * sizeof(cfloat), rows, cudaMemcpyHostToDevice, ctx_->stream()),
                          what());
    }

    void place_lines(const CArray& src, const std::vector<LinePlacement>& where, CArray& dst) override {
        check_ours(src, "place_lines", "src");
        check_ours(dst, "place_lines", "dst");
        const detail::PlaceDims d = detail::check_place_lines(src, where, dst);
        if (where.empty() || d.l == 0 || d.c == 0) return;
        DeviceGuard g(ctx_->device());
        for (size_t first = 0; first < where.size(); first += cuda::kMaxPlacements) {
            const cuda::Placements p = placements(where, first);
            cuda::launch_place_lines(dev(src), static_cast<long long>(d.l), static_cast<long long>(d.k), dev(dst),
                                     static_cast<long long>(d.e), static_cast<long long>(d.c), p, ctx_->stream());
        }
    }

    void mix_place_lines(const CArray& src, const std::vector<cfloat>& m, const std::vector<LinePlacement>& where,
                         CArray& dst) override {
        check_ours(src, "mix_place_lines", "src");
        check_ours(dst, "mix_place_lines", "dst");
        const detail::MixPlaceDims d = detail::check_mix_place_lines(src, m.size(), where, dst);
        if (where.empty() || d.l == 0 || d.c == 0) return;
        DeviceGuard g(ctx_->device());
        const CArray& md =
            device_matrix(m, [&] { return "mix_place_lines src " + src.shape().str() + " -> dst " + dst.shape().str(); });
        for (size_t first = 0; first < where.size(); first += cuda::kMaxPlacements) {
            const cuda::Placements p = placements(where, first);
            cuda::launch_mix_place_lines(dev(src), static_cast<long long>(d.l), static_cast<long long>(d.k),
                                         static_cast<long long>(d.d), dev(md), dev(dst), static_cast<long long>(d.e),
                                         static_cast<long long>(d.c), p, ctx_->stream());
        }
    }

    // Out of place, always (whatever the centring, cuda/fft_plans.h): the result goes to fresh memory
    // from the session's stream-ordered pool and x is rebound to it, so the shifted load callback may
    // read any input element and other handles to x's old storage keep the input. The old block
    // returns to the pool, stream-ordered, when its last handle goes (the next call's output, of the
    // same size, is typically that block again).
    void fft(CArray& x, AxisMask axes, FFTDirection dir) override {
        check_ours(x, "fft", "x");
        const AxisMask live = detail::check_fft_axes(x.shape(), axes);
        if (live == 0 || x.size() == 0) return;
        DeviceGuard g(ctx_->device());
        CArray y(x.shape(), cuda::make_device_storage(ctx_, x.bytes(), "fft output " + x.shape().str()));
        std::shared_ptr<Storage> scratch;  // released (stream-ordered) after the queued transform
        plans_.execute(dev(x), dev(y), x.shape(), live, dir, [&] {
            scratch = cuda::make_device_storage(ctx_, x.bytes(), "fft scratch " + x.shape().str());
            return static_cast<float2*>(scratch->data());
        });
        x = std::move(y);
    }

    void mix_last_axis(const CArray& x, const std::vector<cfloat>& m, CArray& y) override {
        check_ours(x, "mix_last_axis", "x");
        check_ours(y, "mix_last_axis", "y");
        const detail::MixDims d = detail::check_mix(x, m.size(), y);
        if (d.n == 0 || d.c == 0) return;
        DeviceGuard g(ctx_->device());
        const std::string ctx = "mix_last_axis x " + x.shape().str() + " -> y " + y.shape().str();
        if (d.d == 0) {
            LARMOR_CUDA_CHECK(cudaMemsetAsync(y.data(), 0, y.bytes(), ctx_->stream()), ctx);
            return;
        }
        const CArray& md = device_matrix(m, [&] { return ctx; });
        const cuComplex one = make_cuComplex(1.f, 0.f), zero = make_cuComplex(0.f, 0.f);
        const auto n = static_cast<int64_t>(d.n), c = static_cast<int64_t>(d.c), k = static_cast<int64_t>(d.d);
        std::lock_guard<std::mutex> lock(ctx_->library_mutex());
        // y (N x C) = x (N x D) * m^T, m^T being m's row-major C x D read column-major (D x C)
        LARMOR_CUBLAS_CHECK(cublasCgemm_64(ctx_->blas(), CUBLAS_OP_N, CUBLAS_OP_N, n, c, k, &one,
                                           reinterpret_cast<const cuComplex*>(x.data()), n,
                                           reinterpret_cast<const cuComplex*>(md.data()), k, &zero,
                                           reinterpret_cast<cuComplex*>(y.data()), n),
                            ctx);
    }

    void crop_pad_centred(const CArray& src, CArray& dst) override {
        check_ours(src, "crop_pad_centred", "src");
        check_ours(dst, "crop_pad_centred", "dst");
        detail::check_crop_pad(src, dst);
        if (detail::same_storage(src, dst)) {
            if (src.shape() == dst.shape()) return;
            throw std::invalid_argument("crop_pad_centred: dst " + dst.shape().str() + " aliases src " + src.shape().str());
        }
        DeviceGuard g(ctx_->device());
        const std::string ctx = "crop_pad_centred " + src.shape().str() + " -> " + dst.shape().str();
        if (src.shape() == dst.shape() || dst.shape().rank() == 0) {  // plain copy
            if (dst.bytes())
                LARMOR_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), dst.bytes(), cudaMemcpyDeviceToDevice,
                                                  ctx_->stream()),
                                  ctx);
            return;
        }
        if (src.size() == 0) {
            if (dst.bytes()) LARMOR_CUDA_CHECK(cudaMemsetAsync(dst.data(), 0, dst.bytes(), ctx_->stream()), ctx);
            return;
        }
        cuda::launch_crop_pad(dev(src), dims_of(src.shape()), dev(dst), dims_of(dst.shape()), ctx_->stream());
    }

    void rss_last_axis(const CArray& x, CArray& y) override {
        check_ours(x, "rss_last_axis", "x");
        check_ours(y, "rss_last_axis", "y");
        detail::check_reduced(x, y, "rss_last_axis");
        DeviceGuard g(ctx_->device());
        const long long pixels = static_cast<long long>(y.size());
        cuda::launch_rss(dev(x), pixels, pixels ? static_cast<long long>(x.size()) / pixels : 0, dev(y), ctx_->stream());
    }

    void walsh_sensitivities(const CArray& x, int kernel, int stride, CArray& maps) override {
        check_ours(x, "walsh_sensitivities", "x");
        check_ours(maps, "walsh_sensitivities", "maps");
        detail::check_walsh(x, kernel, stride, maps);
        if (x.size() == 0) return;
        const cuda::WalshDims d = walsh_dims(x, kernel, stride, "walsh_sensitivities");
        DeviceGuard g(ctx_->device());
        auto scratch = cuda::make_device_storage(ctx_, cuda::walsh_scratch_bytes(d),
                                                 "walsh scratch for " + x.shape().str() + " stride " + std::to_string(stride));
        cuda::launch_walsh(dev(x), d, scratch->data(), dev(maps), ctx_->stream());
    }

    void walsh_combine(const CArray& x, int kernel, int stride, CArray& y) override {
        check_ours(x, "walsh_combine", "x");
        check_ours(y, "walsh_combine", "y");
        detail::check_walsh_combine(x, kernel, stride, y);
        if (x.size() == 0) return;
        const cuda::WalshDims d = walsh_dims(x, kernel, stride, "walsh_combine");
        DeviceGuard g(ctx_->device());
        auto scratch = cuda::make_device_storage(ctx_, cuda::walsh_combine_scratch_bytes(d),
                                                 "walsh scratch for " + x.shape().str() + " stride " + std::to_string(stride));
        cuda::launch_walsh_combine(dev(x), d, scratch->data(), dev(y), ctx_->stream());
    }

    void combine_last_axis(const CArray& x, const CArray& maps, CArray& y) override {
        check_ours(x, "combine_last_axis", "x");
        check_ours(maps, "combine_last_axis", "maps");
        check_ours(y, "combine_last_axis", "y");
        detail::check_combine(x, maps, y);
        DeviceGuard g(ctx_->device());
        const long long pixels = static_cast<long long>(y.size());
        cuda::launch_combine(dev(x), dev(maps), pixels, pixels ? static_cast<long long>(x.size()) / pixels : 0, dev(y),
                             ctx_->stream());
    }

private:
    // Sizes for the Walsh kernels of x [X, Y, Z..., C] (non-empty); at most kWalshMaxCoils coils.
    static cuda::WalshDims walsh_dims(const CArray& x, int kernel, int stride, const char* op) {
        const Shape& s = x.shape();
        const size_t nc = s[s.rank() - 1];
        if (nc > static_cast<size_t>(cuda::kWalshMaxCoils))
            throw std::invalid_argument(std::string(op) + ": " + std::to_string(nc) + " coils in " + s.str() +
                                        " exceed the CUDA kernel's limit of " + std::to_string(cuda::kWalshMaxCoils) +
                                        " (compress coils first)");
        const size_t slices = x.size() / (s[0] * s[1] * nc);
        return cuda::WalshDims{static_cast<long long>(s[0]), static_cast<long long>(s[1]), static_cast<long long>(slices),
                               static_cast<int>(nc), kernel, stride};
    }

    // Kernel parameters for placements first .. first + kMaxPlacements - 1.
    static cuda::Placements placements(const std::vector<LinePlacement>& where, size_t first) {
        cuda::Placements p;
        p.count = static_cast<int>(std::min<size_t>(cuda::kMaxPlacements, where.size() - first));
        p.first = static_cast<long long>(first);
        for (int q = 0; q < p.count; ++q) {
            const LinePlacement& w = where[first + static_cast<size_t>(q)];
            p.line[q] = static_cast<long long>(w.line);
            p.keep[q] = w.keep;
            p.scale[q] = w.scale;
        }
        return p;
    }

    // A session mixes with the same matrix (its prewhitener) for every batch of readouts: the device
    // copy is kept and reused while the host matrix is unchanged (compared by value, ~1 µs for 32x32),
    // instead of going up from pageable memory on every call.
    // `what` names the operation in errors (called only when the matrix goes up).
    template <class What>
    const CArray& device_matrix(const std::vector<cfloat>& m, const What& what) {
        if (mix_dev_.empty() || m != mix_host_) {
            const std::string ctx = what();
            CArray md({m.size()}, cuda::make_device_storage(ctx_, m.size() * sizeof(cfloat), "mixing matrix of " + ctx));
            // Through the stream (pageable source: the call returns once it is staged), so the matrix
            // it replaces is released only after the work queued before.
            LARMOR_CUDA_CHECK(cudaMemcpyAsync(md.data(), m.data(), m.size() * sizeof(cfloat), cudaMemcpyHostToDevice,
                                              ctx_->stream()),
                              ctx);
            mix_host_ = m;
            mix_dev_ = md;
        }
        return mix_dev_;
    }

    void check_ours(const CArray& a, const char* op, const char* name) const {
        detail::check_device(a, Device::Cuda, op, name);
        detail::check_allocated(a, op, name);
        if (a.storage()) {
            const int d = cuda::storage_device(*a.storage());
            if (d != ctx_->device())
                throw std::invalid_argument(std::string(op) + ": " + name + " " + a.shape().str() +
                                            (d < 0 ? std::string(" is not device memory of this backend")
                                                   : " lives on CUDA device " + std::to_string(d)) +
                                            ", this backend is on device " + std::to_string(ctx_->device()));
        }
    }

    std::shared_ptr<cuda::DeviceContext> ctx_;
    cuda::CufftPlanCache plans_;
    std::shared_ptr<cuda::PinnedCache> downloads_;  // shared with the arrays to_host returns
    cuda::UploadRing uploads_;                      // staging of upload_rows
    std::vector<cfloat> mix_host_;  // the last mixing matrix, and its copy on the device
    CArray mix_dev_;
};

int device_count() {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return -static_cast<int>(e);  // < 0 says why
    }
    return n;
}

}  // namespace

cudaStream_t cuda::backend_stream(Backend& b) {
    auto* c = dynamic_cast<CudaBackend*>(&b);
    if (!c) throw std::invalid_argument("backend_stream: backend " + b.describe() + " is not a CUDA backend");
    return c->stream();
}

bool cuda_available() {
    try {
        if (device_count() <= 0) return false;
        DeviceGuard g(0);
        return cuda::kernels_loadable();
    } catch (...) {
        return false;
    }
}

std::vector<std::string> cuda_devices() {
    std::vector<std::string> out;
    const int n = device_count();
    for (int d = 0; d < n; ++d) {
        cudaDeviceProp p{};
        if (cudaGetDeviceProperties(&p, d) != cudaSuccess) {
            cudaGetLastError();
            continue;
        }
        char mem[32];
        std::snprintf(mem, sizeof mem, "%.1f GiB", static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024 * 1024));
        out.push_back("cuda:" + std::to_string(d) + " " + p.name + " (sm_" + std::to_string(p.major) +
                      std::to_string(p.minor) + ", " + std::to_string(p.multiProcessorCount) + " SMs, " + mem + ")");
    }
    return out;
}

std::shared_ptr<Backend> make_cuda_backend(int device) {
    const int n = device_count();
    if (n < 0)
        throw std::runtime_error("make_cuda_backend(" + std::to_string(device) + "): no usable CUDA driver/device: " +
                                 cudaGetErrorString(static_cast<cudaError_t>(-n)));
    if (device < 0 || device >= n)
        throw std::runtime_error("make_cuda_backend(" + std::to_string(device) + "): no such device, " +
                                 std::to_string(n) + " CUDA device(s) present");
    return std::make_shared<CudaBackend>(device);
}

}  // namespace larmor
