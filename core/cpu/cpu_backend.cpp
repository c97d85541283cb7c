// CPU backend: FFTW for transforms, OpenBLAS for coil mixing, OpenMP loops for the rest. It is the
// reference every GPU result is compared with, and the fallback when a session gets no GPU.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include <fftw3.h>

#include "core/backend.h"
#include "core/cpu/backend_checks.h"
#include "core/cpu/cpu_ops.h"
#include "core/cpu/fftw_plans.h"

namespace larmor {
namespace {

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(int threads) : threads_(resolve(threads)), plans_(threads_) {}

    Device device() const override { return Device::Cpu; }
    std::string describe() const override {
        return "cpu (FFTW " + std::string(fftwf_version) + ", " + std::to_string(threads_) + " threads)";
    }

    CArray empty(const Shape& shape) override { return CArray::host(shape); }
    CArray zeros(const Shape& shape) override { return CArray::host(shape); }  // host() zero-fills
    CArray host_staging(const Shape& shape) override { return CArray::host(shape); }
    CArray to_device(const CArray& a) override { return on_host(a, "to_device"); }
    CArray to_host(const CArray& a) override { return on_host(a, "to_host"); }
    void synchronize() override {}

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

    void place_lines(const CArray& src, const std::vector<LinePlacement>& where, CArray& dst) override {
        check(src, "place_lines", "src");
        check(dst, "place_lines", "dst");
        const detail::PlaceDims d = detail::check_place_lines(src, where, dst);
        if (where.empty() || d.l == 0 || d.c == 0) return;
        cpu::place_lines(src, where, dst, d.l, d.k, d.e, d.c, threads_);
    }

    void mix_place_lines(const CArray& src, const std::vector<cfloat>& m, const std::vector<LinePlacement>& where,
                         CArray& dst) override {
        check(src, "mix_place_lines", "src");
        check(dst, "mix_place_lines", "dst");
        const detail::MixPlaceDims d = detail::check_mix_place_lines(src, m.size(), where, dst);
        if (where.empty() || d.l == 0 || d.c == 0) return;
        cpu::mix_place_lines(src, m, where, dst, d.l, d.k, d.e, d.d, d.c, threads_);
    }

    void fft(CArray& x, AxisMask axes, FFTDirection dir) override {
        check(x, "fft", "x");
        const AxisMask live = detail::check_fft_axes(x.shape(), axes);
        if (live == 0 || x.size() == 0) return;
        const detail::FftwTransform& t = plans_.get(x.shape(), live, dir, x.data());
        cpu::modulate(x.data(), x.shape(), t.load, threads_);
        auto* io = reinterpret_cast<fftwf_complex*>(x.data());
        fftwf_execute_dft(static_cast<fftwf_plan>(t.plan.get()), io, io);
        cpu::modulate(x.data(), x.shape(), t.store, threads_);
    }

    void mix_last_axis(const CArray& x, const std::vector<cfloat>& m, CArray& y) override {
        check(x, "mix_last_axis", "x");
        check(y, "mix_last_axis", "y");
        detail::check_mix(x, m.size(), y);
        cpu::mix_last_axis(x, m, y);
    }

    void crop_pad_centred(const CArray& src, CArray& dst) override {
        check(src, "crop_pad_centred", "src");
        check(dst, "crop_pad_centred", "dst");
        detail::check_crop_pad(src, dst);
        if (detail::same_storage(src, dst)) {
            if (src.shape() == dst.shape()) return;
            throw std::invalid_argument("crop_pad_centred: dst " + dst.shape().str() + " aliases src " +
                                        src.shape().str());
        }
        cpu::crop_pad_centred(src, dst, threads_);
    }

    void rss_last_axis(const CArray& x, CArray& y) override {
        check(x, "rss_last_axis", "x");
        check(y, "rss_last_axis", "y");
        detail::check_reduced(x, y, "rss_last_axis");
        cpu::rss_last_axis(x, y, threads_);
    }

    void walsh_sensitivities(const CArray& x, int kernel, int stride, CArray& maps) override {
        check(x, "walsh_sensitivities", "x");
        check(maps, "walsh_sensitivities", "maps");
        detail::check_walsh(x, kernel, stride, maps);
        cpu::walsh_sensitivities(x, kernel, stride, maps, threads_);
    }

    void combine_last_axis(const CArray& x, const CArray& maps, CArray& y) override {
        check(x, "combine_last_axis", "x");
        check(maps, "combine_last_axis", "maps");
        check(y, "combine_last_axis", "y");
        detail::check_combine(x, maps, y);
        cpu::combine_last_axis(x, maps, y, threads_);
    }

    // The reference: the maps, then the combination.
    void walsh_combine(const CArray& x, int kernel, int stride, CArray& y) override {
        check(x, "walsh_combine", "x");
        check(y, "walsh_combine", "y");
        detail::check_walsh_combine(x, kernel, stride, y);
        CArray maps = CArray::host(x.shape());
        cpu::walsh_sensitivities(x, kernel, stride, maps, threads_);
        cpu::combine_last_axis(x, maps, y, threads_);
    }

private:
    static int resolve(int threads) {
        if (threads < 0) throw std::invalid_argument("make_cpu_backend: threads " + std::to_string(threads) + " < 0");
        if (threads > 0) return threads;
        const int n = omp_get_max_threads();
        return n > 0 ? n : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    }

    static CArray on_host(const CArray& a, const char* op) {
        if (a.device() != Device::Cpu)
            throw std::invalid_argument(std::string(op) + ": the cpu backend cannot read a " + device_name(a.device()) +
                                        " array " + a.shape().str() + "; use that array's backend");
        return a;
    }

    static void check(const CArray& a, const char* op, const char* name) {
        detail::check_device(a, Device::Cpu, op, name);
        detail::check_allocated(a, op, name);
    }

    int threads_;
    detail::FftwPlanCache plans_;
};

}  // namespace

std::shared_ptr<Backend> make_cpu_backend(int threads) { return std::make_shared<CpuBackend>(threads); }

}  // namespace larmor
