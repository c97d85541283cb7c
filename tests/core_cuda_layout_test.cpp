// Host-only checks of the CUDA FFT decomposition (cuda/fft_layout.h) and callback generation
// (cuda/fft_callbacks.h): runs without a GPU. Each cuFFT plan is emulated exactly as cuFFT's advanced
// layout addresses memory, with the callbacks' work evaluated from the offsets they receive (the
// load/store modulation in place; the shifted load out of place, ping-ponging between buffers as
// cuda/fft_plans.cpp does), and the result compared with the exact centred DFT. NVRTC (a pure
// compiler) must accept every generated callback.
#include <gtest/gtest.h>

#ifdef LARMOR_WITH_CUDA

#include <cmath>
#include <string>

#include "core/cpu/centring.h"
#include "cuda/fft_callbacks.h"
#include "cuda/fft_layout.h"
#include "tests/support/reference_dft.h"

namespace larmor {
namespace {

using test::cdouble;

// The factor a callback applies at element `offset` (relative to the exec pointer), from the math
// in centring.h rather than from the generated code.
cdouble factor(const cuda::CallbackSpec& spec, unsigned long long offset, bool store) {
    cdouble f = 1;
    for (const auto& a : spec.axes) {
        const unsigned long long m = (offset / a.stride) % a.n;
        const uint64_t r = store ? detail::centring_store_residue(a.n, m) : detail::centring_load_residue(a.n, m);
        f *= detail::centring_twiddle(a.n, r, spec.dir);
    }
    return store ? f * spec.scale : f;
}

// Plain multi-dimensional DFT over row-major dims n (cuFFT's convention), unnormalised.
std::vector<cdouble> dft_rowmajor(const std::vector<cdouble>& in, const std::vector<long long>& n, int sign) {
    std::vector<cdouble> x = in;
    const double pi = 3.14159265358979323846;
    long long inner = 1;
    for (int k = static_cast<int>(n.size()) - 1; k >= 0; --k) {
        const long long len = n[static_cast<size_t>(k)], outer = static_cast<long long>(x.size()) / (len * inner);
        std::vector<cdouble> y(x.size());
        for (long long o = 0; o < outer; ++o)
            for (long long i = 0; i < inner; ++i)
                for (long long q = 0; q < len; ++q) {
                    cdouble acc = 0;
                    for (long long m = 0; m < len; ++m)
                        acc += x[static_cast<size_t>((o * len + m) * inner + i)] *
                               std::polar(1.0, sign * 2.0 * pi * static_cast<double>((q * m) % len) / len);
                    y[static_cast<size_t>((o * len + q) * inner + i)] = acc;
                }
        x = y;
        inner *= len;
    }
    return x;
}

void emulate(std::vector<cdouble>& data, const cuda::FftRunLayout& r, FFTDirection dir) {
    long long total = 1;
    for (long long v : r.n) total *= v;
    const int sign = dir == FFTDirection::Forward ? -1 : +1;
    for (long long e = 0; e < r.execs; ++e) {
        const long long base = e * r.step;
        for (long long b = 0; b < r.batch; ++b) {
            std::vector<cdouble> in(static_cast<size_t>(total));
            for (long long l = 0; l < total; ++l) {
                const unsigned long long off = static_cast<unsigned long long>(b * r.dist + l * r.stride);
                in[static_cast<size_t>(l)] = data.at(static_cast<size_t>(base) + off) * factor(r.callbacks, off, false);
            }
            const auto out = dft_rowmajor(in, r.n, sign);
            for (long long l = 0; l < total; ++l) {
                const unsigned long long off = static_cast<unsigned long long>(b * r.dist + l * r.stride);
                data[static_cast<size_t>(base) + off] = out[static_cast<size_t>(l)] * factor(r.callbacks, off, true);
            }
        }
    }
}

// The shifted load (fft_callbacks.h): where the callback asked for `offset` reads, and the factor it
// applies, from the math (shift by c = n/2, load twiddle of centring.h, orthonormal scale).
struct ShiftedLoad {
    unsigned long long src;
    cdouble factor;
};
ShiftedLoad shifted_load(const cuda::CallbackSpec& spec, unsigned long long offset) {
    long long src = static_cast<long long>(offset);
    cdouble f = spec.scale;
    for (const auto& a : spec.axes) {
        const unsigned long long m = (offset / a.stride) % a.n, c = a.n / 2;
        const unsigned long long shifted = (m + c) % a.n;
        src += (static_cast<long long>(shifted) - static_cast<long long>(m)) * static_cast<long long>(a.stride);
        f *= detail::centring_twiddle(a.n, detail::centring_load_residue(a.n, m), spec.dir);
    }
    return {static_cast<unsigned long long>(src), f};
}

// One run out of place with the shifted load: reads `in`, writes `out` (every element of `out` that
// the run covers).
void emulate_shifted(const std::vector<cdouble>& in, std::vector<cdouble>& out, const cuda::FftRunLayout& r,
                     FFTDirection dir) {
    long long total = 1;
    for (long long v : r.n) total *= v;
    const int sign = dir == FFTDirection::Forward ? -1 : +1;
    for (long long e = 0; e < r.execs; ++e) {
        const long long base = e * r.step;
        for (long long b = 0; b < r.batch; ++b) {
            std::vector<cdouble> w(static_cast<size_t>(total));
            for (long long l = 0; l < total; ++l) {
                const unsigned long long off = static_cast<unsigned long long>(b * r.dist + l * r.stride);
                const ShiftedLoad ld = shifted_load(r.callbacks, off);
                w[static_cast<size_t>(l)] = in.at(static_cast<size_t>(base) + ld.src) * ld.factor;
            }
            const auto y = dft_rowmajor(w, r.n, sign);
            for (long long l = 0; l < total; ++l) {
                const unsigned long long off = static_cast<unsigned long long>(b * r.dist + l * r.stride);
                out.at(static_cast<size_t>(base) + off) = y[static_cast<size_t>(l)];
            }
        }
    }
}

struct Case {
    Shape shape;
    AxisMask axes;
};

const Case kLayoutCases[] = {
    {{16}, 1u},         {{9}, 1u},            {{8, 6}, 3u},       {{8, 6, 3}, 2u},     {{4, 6, 5}, 2u},
    {{3, 5, 8}, 2u},    {{6, 5, 4}, 5u},      {{5, 7, 9}, 7u},    {{4, 3, 5, 6}, 15u}, {{3, 4, 2, 5, 2}, 30u},
    {{4, 4, 6, 3}, 6u}, {{2, 3, 4, 5, 3}, 23u}, {{6, 5, 4, 3}, 11u}, {{7, 2, 3, 2}, 13u},
    {{4, 3, 5, 2, 6}, 21u}, {{3, 2, 5, 2, 4}, 21u},
};

TEST(CoreCudaLayout, EmulatedPlansGiveTheCentredTransform) {
    unsigned seed = 5;
    for (const Case& c : kLayoutCases)
        for (FFTDirection dir : {FFTDirection::Forward, FFTDirection::Inverse}) {
            const auto x = test::to_double(test::random_array(c.shape, seed++));
            auto y = x;
            const auto runs = cuda::fft_layout(c.shape, c.axes, dir);
            for (const auto& r : runs) {
                ASSERT_LE(r.n.size(), 3u) << c.shape.str();
                emulate(y, r, dir);
            }
            EXPECT_LT(test::relative_error(y, test::reference_centred_dft(x, c.shape, c.axes, dir)), 1e-12)
                << c.shape.str() << " axes " << c.axes << " runs " << runs.size();
        }
}

TEST(CoreCudaLayout, EmulatedShiftedLoadPlansGiveTheCentredTransform) {
    unsigned seed = 50;
    for (const Case& c : kLayoutCases)
        for (FFTDirection dir : {FFTDirection::Forward, FFTDirection::Inverse}) {
            const auto x = test::to_double(test::random_array(c.shape, seed++));
            const auto runs = cuda::fft_layout(c.shape, c.axes, dir);
            // as CufftPlanCache::execute: the last run writes `out`, earlier ones alternate with a
            // scratch buffer; no run writes the buffer it reads. Unwritten elements stay NaN.
            const cdouble nan(std::nan(""), std::nan(""));
            std::vector<cdouble> out(x.size(), nan), spare(x.size(), nan);
            const std::vector<cdouble>* src = &x;
            for (size_t i = 0; i < runs.size(); ++i) {
                std::vector<cdouble>* dst = (runs.size() - 1 - i) % 2 == 0 ? &out : &spare;
                ASSERT_NE(static_cast<const void*>(dst), static_cast<const void*>(src));
                emulate_shifted(*src, *dst, runs[i], dir);
                src = dst;
            }
            EXPECT_LT(test::relative_error(out, test::reference_centred_dft(x, c.shape, c.axes, dir)), 1e-12)
                << c.shape.str() << " axes " << c.axes << " runs " << runs.size()
                << (dir == FFTDirection::Forward ? " forward" : " inverse");
        }
}

TEST(CoreCudaLayout, PicksTheSmallerLoopForInterleavedBatches) {
    // axis 1 of [256, 256, 32]: batched over the 256 inner transforms, 32 execs
    auto runs = cuda::fft_layout({256, 256, 32}, 2u, FFTDirection::Forward);
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].batch, 256);
    EXPECT_EQ(runs[0].execs, 32);
    // the benchmark shapes are single execs
    runs = cuda::fft_layout({256, 256, 32}, 3u, FFTDirection::Forward);
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].execs, 1);
    EXPECT_EQ(runs[0].batch, 32);
    runs = cuda::fft_layout({256, 256, 256}, 7u, FFTDirection::Forward);
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].n.size(), 3u);
}

// The strided centring's passes (cuda/fft_layout.h strided_layout): which shapes qualify, the pass
// order (highest axis first, the first one shifted and scaled), and the bare x run.
TEST(CoreCudaLayout, StridedLayoutPasses) {
    const auto fwd = FFTDirection::Forward;
    {
        const auto l = cuda::strided_layout(Shape{256, 256, 32}, 3u, fwd);
        ASSERT_TRUE(l.ok);
        ASSERT_EQ(l.passes.size(), 1u);
        EXPECT_EQ(l.passes[0].n, 256);
        EXPECT_EQ(l.passes[0].inner, 256);
        EXPECT_EQ(l.passes[0].outer, 32);
        EXPECT_EQ(l.passes[0].shift, 1);
        EXPECT_EQ(l.passes[0].sign, -1);
        EXPECT_FLOAT_EQ(l.passes[0].scale, 1.f / 256.f);
        EXPECT_EQ(l.passes[0].below_rank, 1);
        EXPECT_EQ(l.passes[0].below_live, 1u);
        EXPECT_EQ(l.passes[0].above_rank, 1);
        EXPECT_EQ(l.passes[0].above_live, 0u);
        ASSERT_TRUE(l.x_pass);
        EXPECT_EQ(l.x_run.n, std::vector<long long>{256});
        EXPECT_EQ(l.x_run.stride, 1);
        EXPECT_EQ(l.x_run.dist, 256);
        EXPECT_EQ(l.x_run.batch, 256 * 32);
    }
    {
        const auto l = cuda::strided_layout(Shape{256, 128, 64}, 7u, FFTDirection::Inverse);
        ASSERT_TRUE(l.ok);
        ASSERT_EQ(l.passes.size(), 2u);
        EXPECT_EQ(l.passes[0].n, 64);
        EXPECT_EQ(l.passes[0].inner, 256 * 128);
        EXPECT_EQ(l.passes[0].outer, 1);
        EXPECT_EQ(l.passes[0].shift, 1);
        EXPECT_EQ(l.passes[0].sign, 1);
        EXPECT_EQ(l.passes[0].below_live, 3u);
        EXPECT_EQ(l.passes[1].n, 128);
        EXPECT_EQ(l.passes[1].inner, 256);
        EXPECT_EQ(l.passes[1].outer, 64);
        EXPECT_EQ(l.passes[1].shift, 0);
        EXPECT_FLOAT_EQ(l.passes[1].scale, 1.f);
        EXPECT_TRUE(l.x_pass);
    }
    {
        const auto l = cuda::strided_layout(Shape{6, 8, 10, 4}, 10u, fwd);  // y and w, x not transformed
        ASSERT_TRUE(l.ok);
        ASSERT_EQ(l.passes.size(), 2u);
        EXPECT_EQ(l.passes[0].n, 4);
        EXPECT_EQ(l.passes[0].below_live, 2u);
        EXPECT_EQ(l.passes[1].n, 8);
        EXPECT_FALSE(l.x_pass);
    }
    EXPECT_FALSE(cuda::strided_layout(Shape{256, 256}, 1u, fwd).ok);         // x only
    EXPECT_FALSE(cuda::strided_layout(Shape{9, 256}, 3u, fwd).ok);           // odd x
    EXPECT_FALSE(cuda::strided_layout(Shape{8, 96}, 3u, fwd).ok);            // not a power of two
    EXPECT_FALSE(cuda::strided_layout(Shape{8, 2048}, 3u, fwd).ok);          // too long
    EXPECT_FALSE(cuda::strided_layout(Shape{8, 16, 5}, 7u, fwd).ok);         // odd z
    EXPECT_TRUE(cuda::strided_layout(Shape{9, 256}, 2u, fwd).ok);            // odd x, not transformed
    EXPECT_TRUE(cuda::strided_layout(Shape{12, 2}, 3u, fwd).ok);             // even x, N = 2
}

TEST(CoreCudaLayout, GeneratedCallbacksCompileWithNvrtc) {
    const Case cases[] = {{{256, 256, 32}, 3u}, {{5, 7, 9}, 7u}, {{4, 6, 8, 3}, 6u}, {{12, 10, 2}, 1u},
                          {{256, 256, 256}, 7u}, {{6, 5, 4}, 5u}};
    for (const Case& c : cases)
        for (FFTDirection dir : {FFTDirection::Forward, FFTDirection::Inverse})
            for (const auto& r : cuda::fft_layout(c.shape, c.axes, dir)) {
                const std::string src = cuda::callback_source(r.callbacks);
                EXPECT_NE(src.find(cuda::kLoadCallback), std::string::npos);
                EXPECT_FALSE(cuda::callback_ltoir(src, 90).empty()) << src;
                const std::string shifted = cuda::shifted_load_source(r.callbacks);
                EXPECT_NE(shifted.find(cuda::kShiftedLoadCallback), std::string::npos);
                EXPECT_NE(shifted.find(cuda::kShiftedLoadCallbackC), std::string::npos);
                EXPECT_EQ(shifted.find("store"), std::string::npos) << shifted;
                EXPECT_FALSE(cuda::callback_ltoir(shifted, 90).empty()) << shifted;
            }
}

}  // namespace
}  // namespace larmor

#else
TEST(CoreCudaLayout, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
