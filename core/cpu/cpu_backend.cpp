// CPU backend: FFTW for transforms, OpenMP loops for the rest. It is the
// reference every GPU result is compared with, and the fallback when a session gets no GPU.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include <fftw3.h>

#include "core/backend.h"
#include "core/cg_step_sizes.h"
#include "core/cpu/backend_checks.h"
#include "core/cpu/blas1.h"
#include "core/cpu/cpu_ops.h"
#include "core/cpu/fftw_plans.h"

namespace larmor {
namespace {

class CpuBackend final : public Backend {
public:
    CpuBackend(int threads, MemoryBudgets budgets)
        : Backend(std::move(budgets)), threads_(resolve(threads)), plans_(threads_) {}

    Device device() const override { return Device::Cpu; }
    std::string describe() const override {
        return "cpu (FFTW " + std::string(fftwf_version) + ", " + std::to_string(threads_) + " threads)";
    }

    CArray empty(const Shape& shape) override { return host_complex(shape); }
    CArray zeros(const Shape& shape) override { return host_complex(shape); }  // host arrays are zero-filled
    RArray empty_real(const Shape& shape) override { return host_real(shape); }
    RArray zeros_real(const Shape& shape) override { return host_real(shape); }
    CArray host_staging(const Shape& shape) override { return host_complex(shape); }
    CArray to_device(const CArray& a) override { return on_host(a, "to_device"); }
    RArray to_device(const RArray& a) override { return on_host(a, "to_device"); }
    CArray to_host(const CArray& a) override { return on_host(a, "to_host"); }
    RArray to_host(const RArray& a) override { return on_host(a, "to_host"); }
    void copy(const CArray& src, CArray& dst) override { copy_any(src, dst); }
    void copy(const RArray& src, RArray& dst) override { copy_any(src, dst); }
    void synchronize() override {}

    // Everything is done when the CPU backend returns: the values are copied at once.
    class ReadyRead final : public PendingRead {
    public:
        explicit ReadyRead(const CArray& a) : v_(a.data(), a.data() + a.size()) {}
        bool ready() override { return true; }
        const std::vector<cfloat>& wait() override { return v_; }

    private:
        std::vector<cfloat> v_;
    };
    std::unique_ptr<PendingRead> read_async(const CArray& a) override {
        check(a, "read_async", "a");
        return std::make_unique<ReadyRead>(a);
    }

    // ---- BLAS-1 and pointwise
    void fill(CArray& x, cfloat v) override {
        check(x, "fill", "x");
        cpu::fill(x.data(), x.size(), v, threads_);
    }
    void fill(RArray& x, float v) override {
        check(x, "fill", "x");
        cpu::fill(x.data(), x.size(), v, threads_);
    }
    void scale(const Coef& a, const CArray& x, CArray& y) override { blas1(a, x, y, "scale", cpu::scale<cfloat>); }
    void scale(const Coef& a, const RArray& x, RArray& y) override { blas1(a, x, y, "scale", cpu::scale<float>); }
    void axpy(const Coef& a, const CArray& x, CArray& y) override { blas1(a, x, y, "axpy", cpu::axpy<cfloat>); }
    void axpy(const Coef& a, const RArray& x, RArray& y) override { blas1(a, x, y, "axpy", cpu::axpy<float>); }
    void xpay(const Coef& a, const CArray& x, CArray& y) override { blas1(a, x, y, "xpay", cpu::xpay<cfloat>); }
    void xpay(const Coef& a, const RArray& x, RArray& y) override { blas1(a, x, y, "xpay", cpu::xpay<float>); }

    void dot(const CArray& x, const CArray& y, CArray& out) override {
        check_reduction(x, y, out, "dot");
        out.data()[0] = cfloat(cpu::dot(x.data(), y.data(), x.size(), threads_));
    }
    void dot(const RArray& x, const RArray& y, CArray& out) override {
        check_reduction(x, y, out, "dot");
        out.data()[0] = cfloat(float(cpu::dot(x.data(), y.data(), x.size(), threads_)), 0.f);
    }
    void norm2(const CArray& x, CArray& out) override {
        check_reduction(x, x, out, "norm2");
        out.data()[0] = cfloat(float(cpu::dot(x.data(), x.data(), x.size(), threads_).real()), 0.f);
    }
    void norm2(const RArray& x, CArray& out) override {
        check_reduction(x, x, out, "norm2");
        out.data()[0] = cfloat(float(cpu::dot(x.data(), x.data(), x.size(), threads_)), 0.f);
    }

    void mul(const CArray& a, const CArray& b, CArray& out, bool conj_b) override {
        if (!check_pointwise(a, b, out, "mul")) return;
        cpu::mul(a.data(), b.data(), b.size(), out.data(), a.size(), conj_b, threads_);
    }
    void mul(const CArray& a, const RArray& b, CArray& out) override {
        if (!check_pointwise(a, b, out, "mul")) return;
        cpu::mul(a.data(), b.data(), b.size(), out.data(), a.size(), threads_);
    }
    void mul(const RArray& a, const RArray& b, RArray& out) override {
        if (!check_pointwise(a, b, out, "mul")) return;
        cpu::mul(a.data(), b.data(), b.size(), out.data(), a.size(), threads_);
    }
    void div(const CArray& a, const RArray& b, CArray& out) override {
        if (!check_pointwise(a, b, out, "div")) return;
        cpu::div(a.data(), b.data(), b.size(), out.data(), a.size(), threads_);
    }
    void div(const RArray& a, const RArray& b, RArray& out) override {
        if (!check_pointwise(a, b, out, "div")) return;
        cpu::div(a.data(), b.data(), b.size(), out.data(), a.size(), threads_);
    }
    void reduce_conj_mul(const CArray& a, const CArray& b, CArray& out) override {
        check(a, "reduce_conj_mul", "a");
        check(b, "reduce_conj_mul", "b");
        check(out, "reduce_conj_mul", "out");
        detail::check_reduce(a, b, out);
        if (out.size() == 0) return;
        cpu::reduce_conj_mul(a.data(), b.data(), out.size(), a.size() / out.size(), out.data(), threads_);
    }
    void change_norms(const CArray& x, CArray& previous, CArray& out) override {
        check(x, "change_norms", "x");
        check(previous, "change_norms", "previous");
        check(out, "change_norms", "out");
        detail::check_change_norms(x, previous, out);
        const auto [change, size] = cpu::change_norms(x.data(), previous.data(), x.size(), threads_);
        out.data()[0] = cfloat(float(change), 0.f);
        out.data()[1] = cfloat(float(size), 0.f);
    }
    void cg_coefficients(const CArray& r, const CArray& w, CArray& scalars) override {
        check(r, "cg_coefficients", "r");
        check(w, "cg_coefficients", "w");
        check(scalars, "cg_coefficients", "scalars");
        detail::check_cg_coefficients(r, w, scalars);
        const auto [gamma, delta] = cpu::cg_inner_products(r.data(), w.data(), r.size(), threads_);
        cfloat* s = scalars.data();
        const CgCoefficients c = cg_step_sizes(gamma, delta, s[0].real(), s[1].real());
        s[0] = cfloat(float(gamma), 0.f);
        s[1] = cfloat(float(c.alpha), 0.f);
        s[2] = cfloat(float(c.beta), 0.f);
        s[3] = cfloat(float(delta), 0.f);
    }
    void cg_update(const CArray& w, const CArray& scalars, CArray& p, CArray& s, CArray& x, CArray& r) override {
        check(w, "cg_update", "w");
        check(scalars, "cg_update", "scalars");
        check(p, "cg_update", "p");
        check(s, "cg_update", "s");
        check(x, "cg_update", "x");
        check(r, "cg_update", "r");
        detail::check_cg_update(w, scalars, p, s, x, r);
        cpu::cg_update(scalars.data()[1].real(), scalars.data()[2].real(), w.data(), p.data(), s.data(), x.data(),
                       r.data(), x.size(), threads_);
    }
    void blend(const RArray& m, const CArray& y, CArray& x) override {
        check(m, "blend", "m");
        check(y, "blend", "y");
        check(x, "blend", "x");
        detail::check_blend(m, y, x);
        if (x.size() == 0) return;
        cpu::blend(m.data(), m.size(), y.data(), x.data(), x.size(), threads_);
    }
    void soft_threshold(float lambda, const CArray& x, CArray& out, size_t joint) override {
        check(x, "soft_threshold", "x");
        check(out, "soft_threshold", "out");
        detail::check_soft_threshold(lambda, x, out, joint);
        cpu::soft_threshold(lambda, x.data(), out.data(), x.size(), joint, threads_);
    }

    void download_part(const CArray& x, ComplexPart part, float* out) override {
        check(x, "download_part", "x");
        if (x.size() == 0) return;
        cpu::complex_part(x.data(), x.size(), part, out, threads_);
    }

    void upload_rows(const cfloat* src, size_t src_pitch, size_t row_len, size_t rows, CArray& dst,
                     size_t dst_offset, size_t dst_pitch) override {
        detail::check_rows(dst, row_len, rows, dst_offset, dst_pitch, "upload_rows");
        detail::check_device(dst, Device::Cpu, "upload_rows", "dst");
        for (size_t i = 0; i < rows; ++i)
            std::copy(src + i * src_pitch, src + i * src_pitch + row_len, dst.data() + dst_offset + i * dst_pitch);
    }

    void copy_rows(const CArray& src, size_t src_offset, size_t src_pitch, CArray& dst, size_t dst_offset,
                   size_t dst_pitch, size_t row_len, size_t rows) override {
        detail::check_device(src, Device::Cpu, "copy_rows", "src");
        detail::check_device(dst, Device::Cpu, "copy_rows", "dst");
        detail::check_copy_rows(src, src_offset, src_pitch, dst, dst_offset, dst_pitch, row_len, rows);
        const cfloat* from = src.data() + src_offset;
        cfloat* to = dst.data() + dst_offset;
#pragma omp parallel for schedule(static) num_threads(threads_)
        for (long long i = 0; i < static_cast<long long>(rows); ++i)
            std::copy(from + size_t(i) * src_pitch, from + size_t(i) * src_pitch + row_len, to + size_t(i) * dst_pitch);
    }

    void fft(const CArray& x, CArray& y, AxisMask axes, FFTDirection dir) override {
        check(x, "fft", "x");
        check(y, "fft", "y");
        detail::check_same_shape(x, "x", y, "y", "fft");
        detail::check_in_place_or_disjoint(y, "y", x, "x", "fft");
        const AxisMask live = detail::check_fft_axes(x.shape(), axes);
        if (x.size() == 0) return;
        if (live == 0) {  // every transformed axis has length 1: the identity
            copy(x, y);
            return;
        }
        const detail::FftwTransform& t = plans_.get(y.shape(), live, dir, y.data());
        // The load modulation doubles as the copy of an out-of-place input; FFTW then runs in place.
        cpu::modulate(x.data(), y.data(), y.shape(), t.load, threads_);
        auto* io = reinterpret_cast<fftwf_complex*>(y.data());
        fftwf_execute_dft(static_cast<fftwf_plan>(t.plan.get()), io, io);
        cpu::modulate(y.data(), y.data(), y.shape(), t.store, threads_);
    }

    void crop_pad_centred(const CArray& src, CArray& dst) override {
        check(src, "crop_pad_centred", "src");
        check(dst, "crop_pad_centred", "dst");
        detail::check_crop_pad(src, dst);
        if (same_view(src, dst) && src.shape() == dst.shape()) return;
        detail::check_disjoint(dst, "dst", src, "src", "crop_pad_centred");
        cpu::crop_pad_centred(src, dst, threads_);
    }

private:
    template <class T>
    void copy_any(const Array<T>& src, Array<T>& dst) {
        check(src, "copy", "src");
        check(dst, "copy", "dst");
        detail::check_copy_sizes(src.size(), dst.size(), src.shape(), dst.shape());
        if (same_view(src, dst) || src.size() == 0) return;
        detail::check_disjoint(dst, "dst", src, "src", "copy");
        std::memcpy(dst.data(), src.data(), src.bytes());
    }

    // The coefficient's value; a zero denominator gives 0, so a step that has exactly converged
    // (a zero search direction) stays put instead of turning the iterate into NaN.
    static cfloat coefficient(const Coef& a, const char* op) {
        detail::check_coef(a, Device::Cpu, op);
        // In double, as on the GPU: ratios of squared norms can leave float's normal range.
        std::complex<double> v(a.value);
        if (a.num.storage()) v *= std::complex<double>(a.num.data()[0]);
        if (a.den.storage()) {
            const std::complex<double> d(a.den.data()[0]);
            v = d == std::complex<double>(0.0, 0.0) ? std::complex<double>(0.0, 0.0) : v / d;
        }
        return cfloat(v);
    }

    template <class T, class F>
    void blas1(const Coef& a, const Array<T>& x, Array<T>& y, const char* op, F f) {
        check(x, op, "x");
        check(y, op, "y");
        detail::check_same_shape(x, "x", y, "y", op);
        detail::check_in_place_or_disjoint(y, "y", x, "x", op);
        f(coefficient(a, op), x.data(), y.data(), x.size(), threads_);
    }

    template <class T>
    void check_reduction(const Array<T>& x, const Array<T>& y, const CArray& out, const char* op) {
        check(x, op, "x");
        check(y, op, "y");
        check(out, op, "out");
        detail::check_same_shape(x, "x", y, "y", op);
        detail::check_scalar_out(out, op);
    }

    template <class A, class B>
    bool check_pointwise(const Array<A>& a, const Array<B>& b, const Array<A>& out, const char* op) {
        check(a, op, "a");
        check(b, op, "b");
        check(out, op, "out");
        return detail::check_pointwise(a, b, out, op);
    }

    static int resolve(int threads) {
        if (threads < 0) throw std::invalid_argument("make_cpu_backend: threads " + std::to_string(threads) + " < 0");
        if (threads > 0) return threads;
        const int n = omp_get_max_threads();
        return n > 0 ? n : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    }

    template <class T>
    static Array<T> on_host(const Array<T>& a, const char* op) {
        if (a.device() != Device::Cpu)
            throw std::invalid_argument(std::string(op) + ": the cpu backend cannot read a " + device_name(a.device()) +
                                        " array " + a.shape().str() + "; use that array's backend");
        return a;
    }

    template <class T>
    static void check(const Array<T>& a, const char* op, const char* name) {
        detail::check_device(a, Device::Cpu, op, name);
        detail::check_allocated(a, op, name);
    }

    int threads_;
    detail::FftwPlanCache plans_;
};

}  // namespace

std::shared_ptr<Backend> make_cpu_backend(int threads, MemoryBudgets budgets) {
    return std::make_shared<CpuBackend>(threads, std::move(budgets));
}

}  // namespace larmor
