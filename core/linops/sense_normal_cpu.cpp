// CPU kernel of the fused CG-SENSE normal operator (core/linops/sense_normal_kernels.h): OpenMP over
// tiles of kTile adjacent columns. A tile's coil columns pass through a thread's own [E1, kTile] buffer
// (a few tens of KiB, so it stays in L1/L2 through the transform pair) and FFTW transforms all kTile
// columns of it in one call (howmany = kTile, stride kTile); the maps and the image are read once.
#include <fftw3.h>
#include <omp.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cpu/fftw_plans.h"
#include "core/linops/sense_normal_kernels.h"

namespace larmor::cpu {
namespace {

constexpr size_t kTile = 16;

}  // namespace

class SenseColumnPlans {
public:
    explicit SenseColumnPlans(size_t e1) : e1_(e1) {
        // Estimate plans: planned in microseconds, and the same plan for every session, so the images of
        // the same data agree bit for bit between sessions (measured plans may pick other algorithms).
        std::vector<fftwf_complex> probe(e1 * kTile);
        const int n = static_cast<int>(e1), many = static_cast<int>(kTile), stride = static_cast<int>(kTile);
        std::lock_guard<std::mutex> lock(fftw_planner_mutex());
        const unsigned flags = FFTW_ESTIMATE | FFTW_UNALIGNED;
        forward_ = fftwf_plan_many_dft(1, &n, many, probe.data(), nullptr, stride, 1, probe.data(), nullptr, stride, 1,
                                       FFTW_FORWARD, flags);
        inverse_ = fftwf_plan_many_dft(1, &n, many, probe.data(), nullptr, stride, 1, probe.data(), nullptr, stride, 1,
                                       FFTW_BACKWARD, flags);
        if (!forward_ || !inverse_) {
            release();
            throw std::runtime_error("sense_normal: FFTW could not plan columns of " + std::to_string(e1));
        }
    }
    ~SenseColumnPlans() {
        std::lock_guard<std::mutex> lock(fftw_planner_mutex());
        release();
    }
    SenseColumnPlans(const SenseColumnPlans&) = delete;
    SenseColumnPlans& operator=(const SenseColumnPlans&) = delete;

    size_t e1() const { return e1_; }
    void forward(cfloat* buf) const { execute(forward_, buf); }
    void inverse(cfloat* buf) const { execute(inverse_, buf); }

private:
    static void execute(fftwf_plan p, cfloat* buf) {
        auto* b = reinterpret_cast<fftwf_complex*>(buf);
        fftwf_execute_dft(p, b, b);  // thread-safe on new arrays
    }
    void release() {
        if (forward_) fftwf_destroy_plan(forward_);
        if (inverse_) fftwf_destroy_plan(inverse_);
        forward_ = inverse_ = nullptr;
    }

    size_t e1_;
    fftwf_plan forward_ = nullptr, inverse_ = nullptr;
};

std::shared_ptr<SenseColumnPlans> sense_column_plans(size_t e1) { return std::make_shared<SenseColumnPlans>(e1); }

void sense_normal_apply(const SenseColumnPlans& plans, const CArray& maps, const RArray& mask, const CArray& x,
                        CArray& out, size_t ro, size_t e1, size_t coils, float lambda) {
    if (plans.e1() != e1) throw std::invalid_argument("sense_normal: plans for " + std::to_string(plans.e1()) +
                                                      " columns used on " + std::to_string(e1));
    const float* s = reinterpret_cast<const float*>(maps.data());
    const float* m = mask.data();
    const float* xi = reinterpret_cast<const float*>(x.data());
    float* o = reinterpret_cast<float*>(out.data());
    const long long tiles = static_cast<long long>((ro + kTile - 1) / kTile);
    const size_t slice = ro * e1;
#pragma omp parallel
    {
        std::vector<cfloat> buffer(e1 * kTile), sum(e1 * kTile);
        float* b = reinterpret_cast<float*>(buffer.data());
        float* acc = reinterpret_cast<float*>(sum.data());
#pragma omp for schedule(static)
        for (long long t = 0; t < tiles; ++t) {
            const size_t x0 = size_t(t) * kTile, len = std::min(kTile, ro - x0);
            std::fill(sum.begin(), sum.end(), cfloat(0.f, 0.f));
            // Columns past the readout's end stay zero through the transforms.
            std::fill(buffer.begin(), buffer.end(), cfloat(0.f, 0.f));
            for (size_t c = 0; c < coils; ++c) {
                const float* sc = s + 2 * c * slice;
                // Real and imaginary parts apart: std::complex's operator* (C99 Annex G) is a library
                // call per product without -ffast-math.
                for (size_t y = 0; y < e1; ++y) {
                    const float* sy = sc + 2 * (y * ro + x0);
                    const float* xy = xi + 2 * (y * ro + x0);
                    float* by = b + 2 * y * kTile;
                    for (size_t q = 0; q < len; ++q) {
                        const float ar = sy[2 * q], ai = sy[2 * q + 1], br = xy[2 * q], bi = xy[2 * q + 1];
                        by[2 * q] = ar * br - ai * bi;
                        by[2 * q + 1] = ar * bi + ai * br;
                    }
                }
                plans.forward(buffer.data());
                for (size_t k = 0; k < e1; ++k) {
                    float* bk = b + 2 * k * kTile;
                    for (size_t q = 0; q < 2 * kTile; ++q) bk[q] *= m[k];
                }
                plans.inverse(buffer.data());
                for (size_t y = 0; y < e1; ++y) {
                    const float* sy = sc + 2 * (y * ro + x0);
                    const float* by = b + 2 * y * kTile;
                    float* ay = acc + 2 * y * kTile;
                    for (size_t q = 0; q < len; ++q) {  // += conj(s) v
                        const float ar = sy[2 * q], ai = sy[2 * q + 1], br = by[2 * q], bi = by[2 * q + 1];
                        ay[2 * q] += ar * br + ai * bi;
                        ay[2 * q + 1] += ar * bi - ai * br;
                    }
                }
            }
            for (size_t y = 0; y < e1; ++y) {
                const float* xy = xi + 2 * (y * ro + x0);
                const float* ay = acc + 2 * y * kTile;
                float* oy = o + 2 * (y * ro + x0);
                for (size_t q = 0; q < 2 * len; ++q) oy[q] = ay[q] + lambda * xy[q];
            }
        }
    }
}

}  // namespace larmor::cpu
