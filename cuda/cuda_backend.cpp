// CUDA backend: one per session, with its own streams and cuFFT plan cache
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
#include "core/fault_injection.h"
#include "cuda/blas1.h"
#include "cuda/cuda_backend.h"
#include "cuda/complex_part.h"
#include "cuda/cuda_check.h"
#include "cuda/device_context.h"
#include "cuda/fft_plans.h"
#include "cuda/graph_recording.h"
#include "cuda/kernels.h"
#include "cuda/upload_ring.h"

namespace larmor {
namespace {

using cuda::DeviceGuard;

float2* dev(CArray& a) { return reinterpret_cast<float2*>(a.data()); }
const float2* dev(const CArray& a) { return reinterpret_cast<const float2*>(a.data()); }
float* dev(RArray& a) { return a.data(); }
const float* dev(const RArray& a) { return a.data(); }
long long count(size_t n) { return static_cast<long long>(n); }

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
    CudaBackend(int device, MemoryBudgets budgets)
        : Backend(budgets),
          ctx_(std::make_shared<cuda::DeviceContext>(device, budgets)),
          plans_(ctx_),
          downloads_(std::make_shared<cuda::PinnedCache>(device, budgets.host)),
          uploads_(device, budgets.host) {
        DeviceGuard g(device);
        // Zeroed once: the reductions' arrival counter must start at 0 (each launch leaves it at 0).
        reduction_ = cuda::make_device_storage(ctx_, cuda::reduction_scratch_bytes(), "reduction scratch");
        LARMOR_CUDA_CHECK(cudaMemsetAsync(reduction_->data(), 0, cuda::reduction_scratch_bytes(), ctx_->stream()),
                          "reduction scratch");
        // With unified addressing, page-locked memory from cudaHostAlloc is addressable by the device
        // at its host address (CUDA programming guide, "Unified Virtual Address Space").
        int unified = 0;
        LARMOR_CUDA_CHECK(cudaDeviceGetAttribute(&unified, cudaDevAttrUnifiedAddressing, device),
                          "unified addressing of device " + std::to_string(device));
        host_addressable_ = unified != 0;
    }

    Device device() const override { return Device::Cuda; }
    cudaStream_t stream() const { return ctx_->stream(); }
    cuda::ReductionScratch reduction_scratch() const { return cuda::reduction_scratch_at(reduction_->data()); }
    int device_index() const override { return ctx_->device(); }
    void release_cached_memory() noexcept override { ctx_->release_cached_blocks(); }

    std::unique_ptr<Recording> record(std::function<void()> body) override {
        return cuda::record_graph(ctx_, std::move(body));
    }

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

    RArray empty_real(const Shape& shape) override {
        DeviceGuard g(ctx_->device());
        return RArray(shape, cuda::make_device_storage(ctx_, shape.size() * sizeof(float), "real array " + shape.str()));
    }

    RArray zeros_real(const Shape& shape) override {
        RArray a = empty_real(shape);
        DeviceGuard g(ctx_->device());
        if (a.bytes())
            LARMOR_CUDA_CHECK(cudaMemsetAsync(a.data(), 0, a.bytes(), ctx_->stream()), "zeros_real " + shape.str());
        return a;
    }

    CArray host_staging(const Shape& shape) override {
        return CArray(shape, cuda::make_pinned_storage(ctx_, shape.size() * sizeof(cfloat), "staging " + shape.str()));
    }

    CArray to_device(const CArray& a) override { return upload(a); }
    RArray to_device(const RArray& a) override { return upload(a); }
    CArray to_host(const CArray& a) override { return download(a); }
    RArray to_host(const RArray& a) override { return download(a); }

    void copy(const CArray& src, CArray& dst) override { copy_any(src, dst); }
    void copy(const RArray& src, RArray& dst) override { copy_any(src, dst); }

    void download_part(const CArray& x, ComplexPart part, float* out) override {
        check_ours(x, "download_part", "x");
        if (x.size() == 0) return;
        ctx_->refuse_while_recording("download_part");
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
        ctx_->refuse_while_recording("synchronize");
        DeviceGuard g(ctx_->device());
        LARMOR_CUDA_CHECK(cudaStreamSynchronize(ctx_->stream()), "synchronize on " + describe());
    }

    // A copy into page-locked memory (the download cache) followed by an event: wait() waits for
    // that event alone.
    class EventRead final : public PendingRead {
    public:
        EventRead(std::shared_ptr<Storage> host, size_t n, int device, const std::string& what)
            : host_(std::move(host)), n_(n), device_(device), done_(what), what_(what) {}
        cudaEvent_t event() const { return done_.get(); }
        void* host() const { return host_->data(); }
        bool ready() override {
            if (!values_.empty() || n_ == 0) return true;
            DeviceGuard g(device_);
            const cudaError_t e = cudaEventQuery(done_.get());
            if (e == cudaErrorNotReady) {
                cudaGetLastError();
                return false;
            }
            LARMOR_CUDA_CHECK(e, what_);
            return true;
        }
        const std::vector<cfloat>& wait() override {
            if (values_.empty() && n_ > 0) {
                DeviceGuard g(device_);
                LARMOR_CUDA_CHECK(cudaEventSynchronize(done_.get()), what_);
                const auto* p = static_cast<const cfloat*>(host_->data());
                values_.assign(p, p + n_);
            }
            return values_;
        }

    private:
        std::shared_ptr<Storage> host_;
        size_t n_;
        int device_;
        Event done_;
        std::string what_;
        std::vector<cfloat> values_;
    };

    std::unique_ptr<PendingRead> read_async(const CArray& a) override {
        check_ours(a, "read_async", "a");
        ctx_->refuse_while_recording("read_async");
        DeviceGuard g(ctx_->device());
        const std::string what = "read_async of " + a.shape().str();
        auto read = std::make_unique<EventRead>(downloads_->take(std::max<size_t>(a.bytes(), 8), what), a.size(),
                                                ctx_->device(), what);
        if (a.size() == 0) return read;
        // A few scalars go by a one-block kernel that stores them into the page-locked block: on an
        // H100 a copy-engine transfer of 8 bytes held the stream about 8 us, a third of a CG-SENSE
        // iteration (bench/FLOORS-cg-sense.md); larger reads keep the copy engine.
        if (host_addressable_ && a.bytes() <= kKernelReadBytes)
            cuda::launch_copy_to_host(dev(a), static_cast<float2*>(read->host()),
                                      static_cast<long long>(a.size()), ctx_->stream());
        else
            LARMOR_CUDA_CHECK(cudaMemcpyAsync(read->host(), a.data(), a.bytes(), cudaMemcpyDeviceToHost, ctx_->stream()),
                              what);
        LARMOR_CUDA_CHECK(cudaEventRecord(read->event(), ctx_->stream()), what);
        return read;
    }

    void upload_rows(const cfloat* src, size_t src_pitch, size_t row_len, size_t rows, CArray& dst,
                     size_t dst_offset, size_t dst_pitch) override {
        check_ours(dst, "upload_rows", "dst");
        detail::check_rows(dst, row_len, rows, dst_offset, dst_pitch, "upload_rows");
        if (rows == 0 || row_len == 0) return;
        ctx_->refuse_while_recording("upload_rows");
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

    // One cudaMemcpy2DAsync on the compute stream; cudaMemcpyDefault lets unified addressing pick the
    // direction, so either end may be the host, this device or a peer device.
    void copy_rows(const CArray& src, size_t src_offset, size_t src_pitch, CArray& dst, size_t dst_offset,
                   size_t dst_pitch, size_t row_len, size_t rows) override {
        detail::check_copy_rows(src, src_offset, src_pitch, dst, dst_offset, dst_pitch, row_len, rows);
        if (rows == 0 || row_len == 0) return;
        DeviceGuard g(ctx_->device());
        const std::string what = "copy_rows of " + std::to_string(rows) + " x " + std::to_string(row_len) + " from " +
                                 src.shape().str() + " into " + dst.shape().str();
        // One row: any pitch will do, but cudaMemcpy2D wants pitch >= width.
        const size_t dpitch = rows > 1 ? dst_pitch : row_len, spitch = rows > 1 ? src_pitch : row_len;
        LARMOR_CUDA_CHECK(cudaMemcpy2DAsync(dst.data() + dst_offset, dpitch * sizeof(cfloat), src.data() + src_offset,
                                            spitch * sizeof(cfloat), row_len * sizeof(cfloat), rows,
                                            cudaMemcpyDefault, ctx_->stream()),
                          what);
    }

    // cuFFT runs out of place, always (whatever the centring, cuda/fft_plans.h): the shifted load
    // callback may read any input element, so it must not see its own output. In place (y == x) the
    // transform goes to a block of the session's cache and is copied back.
    void fft(const CArray& x, CArray& y, AxisMask axes, FFTDirection dir) override {
        check_ours(x, "fft", "x");
        check_ours(y, "fft", "y");
        detail::check_same_shape(x, "x", y, "y", "fft");
        detail::check_in_place_or_disjoint(y, "y", x, "x", "fft");
        const AxisMask live = detail::check_fft_axes(x.shape(), axes);
        if (x.size() == 0) return;
        if (live == 0) {
            copy(x, y);
            return;
        }
        DeviceGuard g(ctx_->device());
        std::shared_ptr<Storage> scratch;  // released (stream-ordered) after the queued transform
        auto make_scratch = [&] {
            scratch = cuda::make_device_storage(ctx_, x.bytes(), "fft scratch " + x.shape().str());
            return static_cast<float2*>(scratch->data());
        };
        if (!same_view(x, y)) {
            plans_.execute(dev(x), dev(y), x.shape(), live, dir, make_scratch);
            return;
        }
        CArray out(x.shape(), cuda::make_device_storage(ctx_, x.bytes(), "in-place fft output " + x.shape().str()));
        plans_.execute(dev(x), dev(out), x.shape(), live, dir, make_scratch);
        LARMOR_CUDA_CHECK(cudaMemcpyAsync(y.data(), out.data(), y.bytes(), cudaMemcpyDeviceToDevice, ctx_->stream()),
                          "in-place fft copy-back " + x.shape().str());
    }

    // ---- BLAS-1 and pointwise
    void fill(CArray& x, cfloat v) override { fill_any(x, make_float2(v.real(), v.imag()), v == cfloat(0.f, 0.f)); }
    void fill(RArray& x, float v) override { fill_any(x, v, v == 0.f); }
    void scale(const Coef& a, const CArray& x, CArray& y) override { blas1(cuda::Blas1::Scale, a, x, y, "scale"); }
    void scale(const Coef& a, const RArray& x, RArray& y) override { blas1(cuda::Blas1::Scale, a, x, y, "scale"); }
    void axpy(const Coef& a, const CArray& x, CArray& y) override { blas1(cuda::Blas1::Axpy, a, x, y, "axpy"); }
    void axpy(const Coef& a, const RArray& x, RArray& y) override { blas1(cuda::Blas1::Axpy, a, x, y, "axpy"); }
    void xpay(const Coef& a, const CArray& x, CArray& y) override { blas1(cuda::Blas1::Xpay, a, x, y, "xpay"); }
    void xpay(const Coef& a, const RArray& x, RArray& y) override { blas1(cuda::Blas1::Xpay, a, x, y, "xpay"); }
    void dot(const CArray& x, const CArray& y, CArray& out) override { reduction(x, y, out, "dot"); }
    void dot(const RArray& x, const RArray& y, CArray& out) override { reduction(x, y, out, "dot"); }
    void norm2(const CArray& x, CArray& out) override { reduction(x, x, out, "norm2"); }
    void norm2(const RArray& x, CArray& out) override { reduction(x, x, out, "norm2"); }

    void mul(const CArray& a, const CArray& b, CArray& out, bool conj_b) override {
        pointwise(conj_b ? cuda::Pointwise::MulConj : cuda::Pointwise::Mul, a, b, out, "mul");
    }
    void mul(const CArray& a, const RArray& b, CArray& out) override { pointwise(cuda::Pointwise::Mul, a, b, out, "mul"); }
    void mul(const RArray& a, const RArray& b, RArray& out) override { pointwise(cuda::Pointwise::Mul, a, b, out, "mul"); }
    void div(const CArray& a, const RArray& b, CArray& out) override { pointwise(cuda::Pointwise::Div, a, b, out, "div"); }
    void div(const RArray& a, const RArray& b, RArray& out) override { pointwise(cuda::Pointwise::Div, a, b, out, "div"); }

    void reduce_conj_mul(const CArray& a, const CArray& b, CArray& out) override {
        check_ours(a, "reduce_conj_mul", "a");
        check_ours(b, "reduce_conj_mul", "b");
        check_ours(out, "reduce_conj_mul", "out");
        detail::check_reduce(a, b, out);
        if (out.size() == 0) return;
        DeviceGuard g(ctx_->device());
        cuda::launch_reduce_conj_mul(dev(a), dev(b), count(out.size()), count(a.size() / out.size()), dev(out),
                                     ctx_->stream());
    }

    void change_norms(const CArray& x, CArray& previous, CArray& out) override {
        check_ours(x, "change_norms", "x");
        check_ours(previous, "change_norms", "previous");
        check_ours(out, "change_norms", "out");
        detail::check_change_norms(x, previous, out);
        DeviceGuard g(ctx_->device());
        cuda::launch_change_norms(dev(x), dev(previous), count(x.size()), dev(out),
                                  cuda::reduction_scratch_at(reduction_->data()), ctx_->stream());
    }

    void cg_coefficients(const CArray& r, const CArray& w, CArray& scalars) override {
        check_ours(r, "cg_coefficients", "r");
        check_ours(w, "cg_coefficients", "w");
        check_ours(scalars, "cg_coefficients", "scalars");
        detail::check_cg_coefficients(r, w, scalars);
        DeviceGuard g(ctx_->device());
        cuda::launch_cg_coefficients(dev(r), dev(w), count(r.size()), dev(scalars),
                                     cuda::reduction_scratch_at(reduction_->data()), ctx_->stream());
    }
    void cg_update(const CArray& w, const CArray& scalars, CArray& p, CArray& s, CArray& x, CArray& r) override {
        check_ours(w, "cg_update", "w");
        check_ours(scalars, "cg_update", "scalars");
        check_ours(p, "cg_update", "p");
        check_ours(s, "cg_update", "s");
        check_ours(x, "cg_update", "x");
        check_ours(r, "cg_update", "r");
        detail::check_cg_update(w, scalars, p, s, x, r);
        DeviceGuard g(ctx_->device());
        cuda::launch_cg_update(dev(w), dev(scalars), dev(p), dev(s), dev(x), dev(r), count(x.size()), ctx_->stream());
    }

    void blend(const RArray& m, const CArray& y, CArray& x) override {
        check_ours(m, "blend", "m");
        check_ours(y, "blend", "y");
        check_ours(x, "blend", "x");
        detail::check_blend(m, y, x);
        if (x.size() == 0) return;
        DeviceGuard g(ctx_->device());
        cuda::launch_blend(dev(m), count(m.size()), dev(y), dev(x), count(x.size()), ctx_->stream());
    }

    void soft_threshold(float lambda, const CArray& x, CArray& out, size_t joint) override {
        check_ours(x, "soft_threshold", "x");
        check_ours(out, "soft_threshold", "out");
        detail::check_soft_threshold(lambda, x, out, joint);
        DeviceGuard g(ctx_->device());
        cuda::launch_soft_threshold(lambda, dev(x), dev(out), count(x.size() / joint), count(joint), ctx_->stream());
    }

    void crop_pad_centred(const CArray& src, CArray& dst) override {
        check_ours(src, "crop_pad_centred", "src");
        check_ours(dst, "crop_pad_centred", "dst");
        detail::check_crop_pad(src, dst);
        if (same_view(src, dst) && src.shape() == dst.shape()) return;
        detail::check_disjoint(dst, "dst", src, "src", "crop_pad_centred");
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

private:
    template <class T>
    Array<T> upload(const Array<T>& a) {
        if (a.device() == Device::Cuda) {
            check_ours(a, "to_device", "a");
            return a;
        }
        ctx_->refuse_while_recording("to_device");
        DeviceGuard g(ctx_->device());
        const std::string ctx = "upload of " + a.shape().str();
        // Allocated and filled on the upload stream so the copy overlaps kernels already queued; the
        // compute stream waits for it through an event, and the host waits only for the copy, after
        // which the caller may refill its (pinned) buffer.
        Array<T> d(a.shape(), cuda::make_device_storage(ctx_, a.bytes(), "array " + a.shape().str(), ctx_->upload_stream()));
        if (a.bytes() == 0) return d;
        Event done(ctx);
        LARMOR_CUDA_CHECK(cudaMemcpyAsync(d.data(), a.data(), a.bytes(), cudaMemcpyHostToDevice, ctx_->upload_stream()), ctx);
        LARMOR_CUDA_CHECK(cudaEventRecord(done.get(), ctx_->upload_stream()), ctx);
        LARMOR_CUDA_CHECK(cudaStreamWaitEvent(ctx_->stream(), done.get(), 0), ctx);
        LARMOR_CUDA_CHECK(cudaEventSynchronize(done.get()), ctx);
        return d;
    }

    template <class T>
    Array<T> download(const Array<T>& a) {
        if (a.device() == Device::Cpu) return a;
        check_ours(a, "to_host", "a");
        ctx_->refuse_while_recording("to_host");
        DeviceGuard g(ctx_->device());
        const std::string ctx = "download of " + a.shape().str();
        // Into page-locked memory from the backend's cache (not zeroed: the copy overwrites it); the
        // block returns to the cache when the result's last handle goes.
        Array<T> h(a.shape(), downloads_->take(a.bytes(), ctx));
        if (a.bytes())
            LARMOR_CUDA_CHECK(cudaMemcpyAsync(h.data(), a.data(), a.bytes(), cudaMemcpyDeviceToHost, ctx_->stream()), ctx);
        LARMOR_CUDA_CHECK(cudaStreamSynchronize(ctx_->stream()), ctx);
        return h;
    }

    // Any direction between the host and this device, queued on the compute stream. A pageable host
    // destination makes the call wait (the driver copies through a staging buffer).
    template <class T>
    void copy_any(const Array<T>& src, Array<T>& dst) {
        if (src.device() == Device::Cuda) check_ours(src, "copy", "src");
        if (dst.device() == Device::Cuda) check_ours(dst, "copy", "dst");
        detail::check_copy_sizes(src.size(), dst.size(), src.shape(), dst.shape());
        if (same_view(src, dst) || src.size() == 0) return;
        detail::check_disjoint(dst, "dst", src, "src", "copy");
        // A host end may be pageable and makes the copy wait; either way not for a graph.
        if (src.device() == Device::Cpu || dst.device() == Device::Cpu) ctx_->refuse_while_recording("a host copy");
        DeviceGuard g(ctx_->device());
        const std::string what = "copy of " + src.shape().str();
        LARMOR_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.bytes(), cudaMemcpyDefault, ctx_->stream()), what);
        if (dst.device() == Device::Cpu) LARMOR_CUDA_CHECK(cudaStreamSynchronize(ctx_->stream()), what);
    }

    template <class T, class V>
    void fill_any(Array<T>& x, V v, bool zero) {
        check_ours(x, "fill", "x");
        if (x.size() == 0) return;
        DeviceGuard g(ctx_->device());
        if (zero)
            LARMOR_CUDA_CHECK(cudaMemsetAsync(x.data(), 0, x.bytes(), ctx_->stream()), "fill " + x.shape().str());
        else
            cuda::launch_fill(dev(x), count(x.size()), v, ctx_->stream());
    }

    cuda::DevCoef coefficient(const Coef& a, const char* op) const {
        detail::check_coef(a, Device::Cuda, op);
        if (a.num.storage()) check_ours(a.num, op, "coefficient numerator");
        if (a.den.storage()) check_ours(a.den, op, "coefficient denominator");
        cuda::DevCoef c;
        c.value = make_float2(a.value.real(), a.value.imag());
        c.num = a.num.storage() ? dev(a.num) : nullptr;
        c.den = a.den.storage() ? dev(a.den) : nullptr;
        return c;
    }

    template <class T>
    void blas1(cuda::Blas1 op, const Coef& a, const Array<T>& x, Array<T>& y, const char* name) {
        check_ours(x, name, "x");
        check_ours(y, name, "y");
        detail::check_same_shape(x, "x", y, "y", name);
        detail::check_in_place_or_disjoint(y, "y", x, "x", name);
        const cuda::DevCoef c = coefficient(a, name);
        DeviceGuard g(ctx_->device());
        cuda::launch_blas1(op, c, dev(x), dev(y), count(x.size()), ctx_->stream());
    }

    template <class T>
    void reduction(const Array<T>& x, const Array<T>& y, CArray& out, const char* name) {
        check_ours(x, name, "x");
        check_ours(y, name, "y");
        check_ours(out, name, "out");
        detail::check_same_shape(x, "x", y, "y", name);
        detail::check_scalar_out(out, name);
        DeviceGuard g(ctx_->device());
        cuda::launch_dot(dev(x), dev(y), count(x.size()), dev(out), cuda::reduction_scratch_at(reduction_->data()),
                         ctx_->stream());
    }

    template <class A, class B>
    void pointwise(cuda::Pointwise op, const Array<A>& a, const Array<B>& b, Array<A>& out, const char* name) {
        check_ours(a, name, "a");
        check_ours(b, name, "b");
        check_ours(out, name, "out");
        if (!detail::check_pointwise(a, b, out, name)) return;
        DeviceGuard g(ctx_->device());
        cuda::launch_pointwise(op, dev(a), dev(b), count(b.size()), dev(out), count(a.size()), ctx_->stream());
    }

    template <class T>
    void check_ours(const Array<T>& a, const char* op, const char* name) const {
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
    std::shared_ptr<Storage> reduction_;  // cuda::ReductionScratch of dot and norm2
    cuda::CufftPlanCache plans_;
    std::shared_ptr<cuda::PinnedCache> downloads_;  // shared with the arrays to_host returns
    bool host_addressable_ = false;                  // page-locked host memory usable in kernels
    static constexpr size_t kKernelReadBytes = 4096;
    cuda::UploadRing uploads_;                      // staging of upload_rows
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

cuda::ReductionScratch cuda::backend_reduction_scratch(Backend& b) {
    auto* c = dynamic_cast<CudaBackend*>(&b);
    if (!c) throw std::invalid_argument("backend_reduction_scratch: backend " + b.describe() + " is not a CUDA backend");
    return c->reduction_scratch();
}

int cuda::backend_device(Backend& b) {
    auto* c = dynamic_cast<CudaBackend*>(&b);
    if (!c) throw std::invalid_argument("backend_device: backend " + b.describe() + " is not a CUDA backend");
    return c->device_index();
}

namespace {
template <class T>
void check_on_backend_any(Backend& b, const Array<T>& a, const char* op, const char* name) {
    if (a.size() == 0) return;
    const int want = cuda::backend_device(b);
    const int got = a.device() == Device::Cuda && a.storage() ? cuda::storage_device(*a.storage()) : -1;
    if (got != want)
        throw std::invalid_argument(std::string(op) + ": " + name + " " + a.shape().str() +
                                    (got < 0 ? std::string(" is not device memory of the session's CUDA backend")
                                             : " lives on CUDA device " + std::to_string(got)) +
                                    ", the backend is on device " + std::to_string(want));
}
}  // namespace

void cuda::check_on_backend(Backend& b, const CArray& a, const char* op, const char* name) {
    check_on_backend_any(b, a, op, name);
}
void cuda::check_on_backend(Backend& b, const RArray& a, const char* op, const char* name) {
    check_on_backend_any(b, a, op, name);
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

uint64_t cuda_device_memory(int device) {
    if (device < 0 || device >= device_count()) return 0;
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, device) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return p.totalGlobalMem;
}

std::string cuda_device_capability(int device) {
    if (device < 0 || device >= device_count()) return "";
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, device) != cudaSuccess) {
        cudaGetLastError();
        return "";
    }
    return std::to_string(p.major) + "." + std::to_string(p.minor);
}

int cuda_driver_version() {
    int v = 0;
    if (cudaDriverGetVersion(&v) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return v;
}

int cuda_runtime_version() {
    int v = 0;
    if (cudaRuntimeGetVersion(&v) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return v;
}

uint64_t cuda_device_free_memory(int device) {
    if (device < 0 || device >= device_count()) return 0;
    try {
        DeviceGuard guard(device);
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
            cudaGetLastError();
            return 0;
        }
        return free_b;
    } catch (const std::exception&) {  // the device cannot be selected: nothing to report
        return 0;
    }
}

std::shared_ptr<Backend> make_cuda_backend(int device, MemoryBudgets budgets) {
    if (inject_fault(FaultSite::CudaBackend))
        throw std::runtime_error("make_cuda_backend(" + std::to_string(device) +
                                 "): injected fault (LARMOR_FAULT_INJECTION=cuda-backend)");
    const int n = device_count();
    if (n < 0)
        throw std::runtime_error("make_cuda_backend(" + std::to_string(device) + "): no usable CUDA driver/device: " +
                                 cudaGetErrorString(static_cast<cudaError_t>(-n)));
    if (device < 0 || device >= n)
        throw std::runtime_error("make_cuda_backend(" + std::to_string(device) + "): no such device, " +
                                 std::to_string(n) + " CUDA device(s) present");
    return std::make_shared<CudaBackend>(device, std::move(budgets));
}

}  // namespace larmor
