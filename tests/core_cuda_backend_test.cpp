// CUDA backend against its CPU twin (the reference), to 1e-5 relative. Every test skips without a
// usable CUDA device, so this file also runs (as skips) on CPU-only machines and builds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/backend.h"
#include "core/coils/coil_combination.h"
#include "gadgets/kernels/line_placement.h"
#include "core/linops/fft_op.h"
#include "tests/support/reference_dft.h"
#ifdef LARMOR_WITH_CUDA
#include "cuda/fft_plans.h"
#endif

namespace larmor {
namespace {

using test::cdouble;

#define REQUIRE_CUDA() \
    if (!larmor::cuda_available()) GTEST_SKIP() << "no CUDA device"

struct FftCase {
    Shape shape;
    AxisMask axes;
};

// Even and odd sizes; leading, trailing, interleaved and non-contiguous batches; the benchmark sizes.
const FftCase kFftCases[] = {
    {{16}, 1u},           {{15}, 1u},          {{8, 6}, 3u},         {{9, 5}, 3u},          {{7, 8}, 2u},
    {{16, 12, 4}, 3u},    {{10, 9, 3}, 3u},    {{6, 10, 5}, 2u},     {{6, 5, 4}, 5u},       {{8, 6, 10}, 7u},
    {{5, 7, 9}, 7u},      {{6, 5, 4, 3}, 7u},  {{4, 6, 8, 3}, 6u},   {{3, 4, 5, 6}, 15u},   {{12, 1, 10, 2}, 5u},
    {{256, 256, 8}, 3u},  {{256, 256, 8}, 2u}, {{256, 256, 32}, 3u}, {{64, 64, 64}, 7u},    {{96, 80, 4, 3}, 7u},
    {{31, 33, 3}, 3u},    {{128, 1, 1, 4}, 1u}, {{3, 8, 20}, 2u},    {{2, 9, 30}, 2u},
};

CArray upload(Backend& gpu, const CArray& host) {
    CArray staging = gpu.host_staging(host.shape());
    std::copy(host.data(), host.data() + host.size(), staging.data());
    return gpu.to_device(staging);
}

void fft_cases_match_cpu(Backend& gpu) {
    auto cpu = make_cpu_backend();
    unsigned seed = 100;
    for (const FftCase& c : kFftCases)
        for (FFTDirection dir : {FFTDirection::Forward, FFTDirection::Inverse}) {
            CArray x = test::random_array(c.shape, seed++);
            CArray d = gpu.to_device(x);
            test::fft_rebind(gpu, d, c.axes, dir);
            test::fft_rebind(*cpu, x, c.axes, dir);
            EXPECT_LT(test::relative_error(gpu.to_host(d), x), 1e-5)
                << c.shape.str() << " axes " << c.axes << (dir == FFTDirection::Forward ? " forward" : " inverse");
        }
}

TEST(CoreCudaBackend, DescribesItsDevice) {
    REQUIRE_CUDA();
    auto gpu = make_cuda_backend(0);
    EXPECT_EQ(gpu->device(), Device::Cuda);
    EXPECT_FALSE(cuda_devices().empty());
    EXPECT_NE(gpu->describe().find("cuda:0"), std::string::npos) << gpu->describe();
    std::cout << "[ info ] " << gpu->describe() << "\n";
}

// Plans made while LARMOR_CUDA_CENTRING is set use that centring (cuda/fft_plans.h).
struct CentringEnv {
    explicit CentringEnv(const char* v) { setenv("LARMOR_CUDA_CENTRING", v, 1); }
    ~CentringEnv() { unsetenv("LARMOR_CUDA_CENTRING"); }
};

TEST(CoreCudaBackend, FftMatchesCpu) {
    REQUIRE_CUDA();
    auto gpu = make_cuda_backend();
    fft_cases_match_cpu(*gpu);
}

TEST(CoreCudaBackend, FftEveryCentringMatchesCpu) {
    REQUIRE_CUDA();
    for (const char* mode : {"strided", "load", "callbacks", "swap", "kernels"}) {
        CentringEnv env(mode);
        auto gpu = make_cuda_backend();
        SCOPED_TRACE(mode);
        fft_cases_match_cpu(*gpu);
    }
#ifdef LARMOR_WITH_CUDA
    if (!cuda::fft_callbacks_healthy())
        std::cout << "[ info ] some plans could not take LTO callbacks: " << cuda::fft_callbacks_failure() << "\n";
    // The benchmark transforms must get their callbacks when asked for them (and by default), and
    // the strided kernels when asked for them.
    for (const char* mode : {"", "strided", "load", "callbacks"}) {
        CentringEnv env(mode);
        auto gpu = make_cuda_backend();
        for (const FftCase& c : {FftCase{{256, 256, 8}, 3u}, FftCase{{256, 256, 32}, 3u}, FftCase{{256, 256, 256}, 7u}}) {
            CArray d = gpu->to_device(test::random_array(c.shape, 3));
            test::fft_rebind(*gpu, d, c.axes, FFTDirection::Forward);
            const std::string m = mode;
            EXPECT_EQ(cuda::last_planned_centring(), m == "callbacks" ? cuda::Centring::Callbacks
                                                     : m == "load"      ? cuda::Centring::Load
                                                                        : cuda::Centring::Strided)
                << "mode '" << mode << "' " << c.shape.str() << ": " << cuda::fft_callbacks_failure();
        }
    }
#endif
}

// The default path transforms out of place: x is rebound to new storage, and every other handle to
// the old storage (copies of the handle, reshaped views) still reads the input, bit for bit. 1D/2D/3D,
// batched (leading, trailing, interleaved), even and odd, several cuFFT runs (scratch ping-pong),
// both directions, against the CPU backend.
TEST(CoreCudaBackend, FftIsOutOfPlaceAndLeavesTheInput) {
    REQUIRE_CUDA();
    auto gpu = make_cuda_backend();
    auto cpu = make_cpu_backend();
    const FftCase cases[] = {
        {{64}, 1u},           {{63}, 1u},            {{128, 1, 1, 4}, 1u}, {{32, 24}, 3u},     {{33, 25}, 3u},
        {{48, 40, 6}, 3u},    {{45, 39, 5}, 3u},     {{40, 32, 6}, 2u},    {{41, 30, 5}, 2u},  {{24, 20, 5}, 5u},
        {{20, 16, 12}, 7u},   {{21, 15, 11}, 7u},    {{20, 15, 8, 3}, 7u}, {{8, 6, 10, 4}, 6u}, {{6, 8, 10, 4}, 15u},
        {{9, 7, 5, 3}, 15u},  {{10, 9, 8, 7}, 11u},  {{256, 256, 4}, 3u},  {{255, 129, 2}, 3u}, {{64, 64, 64}, 7u},
        {{6, 3, 5, 2, 4}, 21u}, {{5, 4, 7, 2, 3}, 21u}, {{3, 8, 20}, 2u},  {{2, 9, 30}, 2u},    {{3, 16, 12, 9}, 6u},
    };
    unsigned seed = 500;
    for (const FftCase& c : cases)
        for (FFTDirection dir : {FFTDirection::Forward, FFTDirection::Inverse}) {
            const std::string what =
                c.shape.str() + " axes " + std::to_string(c.axes) + (dir == FFTDirection::Forward ? " forward" : " inverse");
            const CArray h = test::random_array(c.shape, seed++);
            CArray x = upload(*gpu, h);
            const CArray alias = x;                                   // another handle
            const CArray flat = x.reshaped({x.size()});               // a view of the same storage
            const cfloat* before = x.data();
            test::fft_rebind(*gpu, x, c.axes, dir);
            EXPECT_NE(x.data(), before) << what << ": not rebound";
            EXPECT_EQ(x.shape(), c.shape) << what;
            EXPECT_EQ(test::relative_error(gpu->to_host(alias), h), 0.0) << what << ": input modified";
            EXPECT_EQ(test::relative_error(gpu->to_host(flat).reshaped(c.shape), h), 0.0) << what << ": view modified";
            CArray want = test::from_double(test::to_double(h), c.shape);
            test::fft_rebind(*cpu, want, c.axes, dir);
            const CArray got = gpu->to_host(x);
            EXPECT_LT(test::relative_error(got, want), 1e-5) << what;
            // the same transform again from the untouched input gives the same bits
            CArray again = alias;
            test::fft_rebind(*gpu, again, c.axes, dir);
            EXPECT_EQ(test::relative_error(gpu->to_host(again), got), 0.0) << what << ": second call differs";
#ifdef LARMOR_WITH_CUDA
            if (cuda::last_planned_centring() != cuda::Centring::Load &&
                cuda::last_planned_centring() != cuda::Centring::Strided)
                std::cout << "[ info ] " << what << " fell back to " << cuda::centring_name(cuda::last_planned_centring())
                          << ": " << cuda::fft_callbacks_failure() << "\n";
#endif
        }
    // Bench size, both directions, and a round trip back to the input.
    const Shape big{256, 256, 256};
    const CArray h = test::random_array(big, 77);
    CArray x = gpu->to_device(h);
    const CArray alias = x;
    test::fft_rebind(*gpu, x, 7u, FFTDirection::Forward);
    CArray want = test::from_double(test::to_double(h), big);
    test::fft_rebind(*cpu, want, 7u, FFTDirection::Forward);
    EXPECT_LT(test::relative_error(gpu->to_host(x), want), 1e-5) << big.str();
    test::fft_rebind(*gpu, x, 7u, FFTDirection::Inverse);
    EXPECT_LT(test::relative_error(gpu->to_host(x), h), 1e-5) << big.str() << " round trip";
    EXPECT_EQ(test::relative_error(gpu->to_host(alias), h), 0.0) << big.str() << ": input modified";
}

// Every centring leaves the input untouched (they all run out of place on CUDA; an out-of-place
// transform must), the fallbacks included.
TEST(CoreCudaBackend, FftEveryCentringLeavesTheInput) {
    REQUIRE_CUDA();
    for (const char* mode : {"strided", "load", "callbacks", "swap", "kernels"}) {
        CentringEnv env(mode);
        auto gpu = make_cuda_backend();
        for (const FftCase& c : {FftCase{{16}, 1u}, FftCase{{9, 5}, 3u}, FftCase{{6, 5, 4}, 5u}, FftCase{{64, 48, 4}, 3u},
                                 FftCase{{3, 4, 5, 6}, 15u}}) {
            const CArray h = test::random_array(c.shape, 8);
            CArray x = gpu->to_device(h);
            const CArray alias = x;
            test::fft_rebind(*gpu, x, c.axes, FFTDirection::Inverse);
            EXPECT_NE(x.data(), alias.data()) << mode << " " << c.shape.str();
            EXPECT_EQ(test::relative_error(gpu->to_host(alias), h), 0.0) << mode << " " << c.shape.str();
        }
    }
}

// The strided centring (cuda/fft_strided.h) on every power-of-two length of the strided
// axes (2..1024), 2D and 3D, batched, non-square, x transformed or not, both directions, against
// the CPU backend; it must actually be used, leave the input untouched and rebind x.
TEST(CoreCudaBackend, FftStridedMatchesCpu) {
    REQUIRE_CUDA();
    CentringEnv env("strided");
    auto gpu = make_cuda_backend();
    auto cpu = make_cpu_backend();
    const FftCase cases[] = {
        {{4, 2, 5}, 3u},        {{8, 4, 3}, 3u},       {{6, 8, 2}, 3u},        {{16, 16, 3}, 3u},
        {{32, 32, 2}, 3u},      {{8, 64, 4}, 3u},      {{64, 8, 4}, 3u},       {{128, 128, 2}, 3u},
        {{12, 256, 3}, 3u},     {{256, 512, 1}, 3u},   {{16, 1024, 2}, 3u},    {{2, 1024, 1}, 3u},
        {{64, 256, 8}, 3u},     {{24, 64, 3}, 2u},     {{8, 6, 32, 2}, 5u},    {{16, 8, 32, 2}, 7u},
        {{32, 64, 16}, 7u},     {{8, 4, 1024}, 7u},    {{10, 16, 8, 3}, 6u},   {{4, 8, 2, 4}, 15u},
        {{256, 256, 8}, 3u},    {{64, 64, 64}, 7u},    {{3, 512, 4}, 2u},      {{1024, 2, 2}, 3u},
    };
    unsigned seed = 900;
    for (const FftCase& c : cases)
        for (FFTDirection dir : {FFTDirection::Forward, FFTDirection::Inverse}) {
            const std::string what =
                c.shape.str() + " axes " + std::to_string(c.axes) + (dir == FFTDirection::Forward ? " forward" : " inverse");
            const CArray h = test::random_array(c.shape, seed++);
            CArray x = upload(*gpu, h);
            const CArray alias = x;
            test::fft_rebind(*gpu, x, c.axes, dir);
#ifdef LARMOR_WITH_CUDA
            EXPECT_EQ(cuda::last_planned_centring(), cuda::Centring::Strided) << what;
#endif
            EXPECT_NE(x.data(), alias.data()) << what << ": not rebound";
            EXPECT_EQ(test::relative_error(gpu->to_host(alias), h), 0.0) << what << ": input modified";
            CArray want = test::from_double(test::to_double(h), c.shape);
            test::fft_rebind(*cpu, want, c.axes, dir);
            EXPECT_LT(test::relative_error(gpu->to_host(x), want), 1e-5) << what;
        }
}

TEST(CoreCudaBackend, FftMatchesExactDft) {
    REQUIRE_CUDA();
    auto gpu = make_cuda_backend();
    for (const FftCase& c : {FftCase{{16, 12, 3}, 3u}, FftCase{{9, 7, 5}, 7u}, FftCase{{10, 6, 4}, 6u}}) {
        const CArray x = test::random_array(c.shape, 7);
        CArray d = upload(*gpu, x);
        test::fft_rebind(*gpu, d, c.axes, FFTDirection::Forward);
        const auto want = test::reference_centred_dft(test::to_double(x), c.shape, c.axes, FFTDirection::Forward);
        EXPECT_LT(test::relative_error(gpu->to_host(d), want), 1e-5) << c.shape.str();
    }
}

// The operator's adjoint, dense-DFT and CPU-twin checks live in core_linops_test; here the case of
// nothing to transform (all axes of length 1): the output is a copy of the input.
TEST(CoreCudaBackend, FftOperatorWithNothingToTransformCopies) {
    REQUIRE_CUDA();
    auto gpu = make_cuda_backend();
    LinOp trivial = fft_op(gpu, {1, 1, 4}, 3u);
    const CArray h = test::random_array({1, 1, 4}, 5);
    const CArray x = gpu->to_device(h);
    CArray y = gpu->empty({1, 1, 4});
    trivial->forward(x, y);
    EXPECT_NE(y.data(), x.data());
    EXPECT_EQ(test::relative_error(gpu->to_host(y), h), 0.0);
}

TEST(CoreCudaBackend, TransfersAndAllocation) {
    REQUIRE_CUDA();
    auto gpu = make_cuda_backend();
    const Shape s{33, 17, 3};
    CArray staging = gpu->host_staging(s);
    EXPECT_TRUE(staging.pinned());
    EXPECT_EQ(staging.device(), Device::Cpu);
    for (size_t i = 0; i < staging.size(); ++i) ASSERT_EQ(staging.data()[i], cfloat(0.f, 0.f));
    const CArray x = test::random_array(s, 3);
    std::copy(x.data(), x.data() + x.size(), staging.data());
    CArray d = gpu->to_device(staging);
    // The caller may refill the staging buffer as soon as to_device returns.
    std::fill(staging.data(), staging.data() + staging.size(), cfloat(-1.f, -1.f));
    EXPECT_EQ(d.device(), Device::Cuda);
    EXPECT_EQ(gpu->to_device(d).data(), d.data());
    EXPECT_EQ(test::relative_error(gpu->to_host(d), x), 0.0);
    EXPECT_EQ(gpu->to_host(x).data(), x.data());
    CArray z = gpu->zeros(s);
    EXPECT_EQ(test::relative_error(gpu->to_host(z), CArray::host(s)), 0.0);
    CArray e = gpu->empty({0});
    EXPECT_EQ(e.size(), 0u);
    gpu->synchronize();
}

TEST(CoreCudaBackend, ArraysOutliveTheirBackend) {
    REQUIRE_CUDA();
    CArray d;
    {
        auto gpu = make_cuda_backend();
        d = gpu->to_device(test::random_array({64, 64}, 4));
        test::fft_rebind(*gpu, d, 3u, FFTDirection::Forward);
    }
    d = CArray();  // freed on the (still alive) session stream
    SUCCEED();
}

TEST(CoreCudaBackend, PrimitivesMatchCpu) {
    REQUIRE_CUDA();
    auto gpu = make_cuda_backend();
    auto cpu = make_cpu_backend();
    // mix
    for (auto [shape, c] : {std::pair<Shape, size_t>{{64, 48, 16}, 8}, {{33, 7, 5}, 3}, {{256, 256, 32}, 12}}) {
        Shape ys = shape;
        ys[ys.rank() - 1] = c;
        const CArray x = test::random_array(shape, 11);
        std::vector<cfloat> m(c * shape[shape.rank() - 1]);
        for (size_t i = 0; i < m.size(); ++i) m[i] = cfloat(std::cos(0.37f * i), std::sin(0.11f * i * i));
        CArray yc = CArray::host(ys), yg = gpu->empty(ys);
        kernels::mix_last_axis(*cpu, x, m, yc);
        kernels::mix_last_axis(*gpu, gpu->to_device(x), m, yg);
        EXPECT_LT(test::relative_error(gpu->to_host(yg), yc), 1e-5) << "mix " << shape.str();
    }
    // crop / pad
    const std::pair<Shape, Shape> crops[] = {{{16, 12, 3}, {8, 20, 3}}, {{15, 9}, {16, 8}}, {{5, 6, 7, 2}, {9, 4, 7, 3}},
                                             {{384, 144, 14}, {192, 144, 14}}, {{10}, {4}}, {{4, 4}, {4, 4}}};
    for (const auto& [ss, ds] : crops) {
        const CArray src = test::random_array(ss, 21);
        CArray dc = CArray::host(ds), dg = gpu->empty(ds);
        cpu->crop_pad_centred(src, dc);
        gpu->crop_pad_centred(gpu->to_device(src), dg);
        EXPECT_EQ(test::relative_error(gpu->to_host(dg), dc), 0.0) << "crop " << ss.str() << " -> " << ds.str();
    }
    // rss, combine (odd pixel counts take the scalar path)
    for (const Shape& s : {Shape{64, 48, 16}, Shape{33, 7, 5}, Shape{256, 256, 32}}) {
        Shape rs;
        for (int a = 0; a + 1 < s.rank(); ++a) rs.push_back(s[a]);
        const CArray x = test::random_array(s, 31), maps = test::random_array(s, 32);
        CArray rc = CArray::host(rs), yc = CArray::host(rs), rg = gpu->empty(rs), yg = gpu->empty(rs);
        coils::rss_last_axis(*cpu, x, rc);
        coils::combine_last_axis(*cpu, x, maps, yc);
        const CArray xd = gpu->to_device(x), md = gpu->to_device(maps);
        coils::rss_last_axis(*gpu, xd, rg);
        coils::combine_last_axis(*gpu, xd, md, yg);
        EXPECT_LT(test::relative_error(gpu->to_host(rg), rc), 1e-5) << "rss " << s.str();
        EXPECT_LT(test::relative_error(gpu->to_host(yg), yc), 1e-5) << "combine " << s.str();
    }
}

// Crop/pad along x only takes a row kernel (float4 when sizes and shift are even): crop and pad, even
// and odd sizes, odd and even shifts, 1 to > 65535 * 8 rows (the row loop), bit-exact against the CPU.
TEST(CoreCudaBackend, CropPadAlongXMatchesCpu) {
    REQUIRE_CUDA();
    auto gpu = make_cuda_backend();
    auto cpu = make_cpu_backend();
    const std::pair<size_t, size_t> xs[] = {{512, 256}, {256, 512}, {16, 9}, {9, 16}, {15, 8}, {8, 15}, {6, 2},
                                            {6, 4},     {10, 4},    {4, 10}, {7, 3},  {3, 7},  {1, 5},  {5, 1}};
    const Shape rest[] = {{}, {1}, {3}, {7, 5}, {33, 1, 4}};
    unsigned seed = 500;
    auto check = [&](const Shape& ss, const Shape& ds) {
        const CArray src = test::random_array(ss, seed++);
        CArray dc = CArray::host(ds), dg = gpu->empty(ds);
        std::fill(dc.data(), dc.data() + dc.size(), cfloat(7.f, 7.f));
        cpu->crop_pad_centred(src, dc);
        gpu->crop_pad_centred(gpu->to_device(src), dg);
        const CArray got = gpu->to_host(dg);
        ASSERT_EQ(got.size(), dc.size());
        EXPECT_TRUE(std::equal(got.data(), got.data() + got.size(), dc.data()))
            << "crop " << ss.str() << " -> " << ds.str();
    };
    for (const auto& [ns, nd] : xs)
        for (const Shape& r : rest) {
            Shape ss{ns}, ds{nd};
            for (int a = 0; a < r.rank(); ++a) {
                ss.push_back(r[a]);
                ds.push_back(r[a]);
            }
            check(ss, ds);
        }
    check({512, 256, 1, 32}, {256, 256, 1, 32});
    check({256, 256, 1, 32}, {512, 256, 1, 32});
    check({8, 600000}, {4, 600000});  // float4, rows beyond one grid
    check({3, 600000}, {2, 600000});  // scalar, rows beyond one grid
    check({2, 70000}, {5, 70000});
}

// Downloads land in page-locked blocks reused across calls; every result keeps its own data while
// alive, and results outlive the backend.
TEST(CoreCudaBackend, DownloadsArePinnedAndReused) {
    REQUIRE_CUDA();
    const Shape s{256, 256, 1};
    const CArray x1 = test::random_array(s, 61), x2 = test::random_array(s, 62), x3 = test::random_array(s, 63);
    auto same = [](const CArray& a, const CArray& b) {
        return a.size() == b.size() && std::equal(a.data(), a.data() + a.size(), b.data());
    };
    CArray kept;
    {
        auto gpu = make_cuda_backend();
        const CArray d1 = gpu->to_device(x1), d2 = gpu->to_device(x2), d3 = gpu->to_device(x3);
        CArray h1 = gpu->to_host(d1);
        CArray h2 = gpu->to_host(d2);
        EXPECT_EQ(h1.device(), Device::Cpu);
        EXPECT_TRUE(h1.pinned());
        EXPECT_TRUE(h2.pinned());
        EXPECT_NE(h1.data(), h2.data());
        EXPECT_TRUE(same(h1, x1));
        EXPECT_TRUE(same(h2, x2));
        // h1's block goes back and is reused; h2 keeps its data through later downloads
        const cfloat* p1 = h1.data();
        h1 = CArray();
        CArray h3 = gpu->to_host(d3);
        EXPECT_EQ(h3.data(), p1) << "the released block was not reused";
        CArray h4 = gpu->to_host(d1);
        EXPECT_NE(h4.data(), h2.data());
        EXPECT_NE(h4.data(), h3.data());
        EXPECT_TRUE(same(h2, x2));
        EXPECT_TRUE(same(h3, x3));
        EXPECT_TRUE(same(h4, x1));
        for (int i = 0; i < 10; ++i) {  // steady state: same blocks over and over
            const CArray a = gpu->to_host(i % 2 ? d1 : d3);
            EXPECT_TRUE(same(a, i % 2 ? x1 : x3)) << i;
            EXPECT_TRUE(same(h2, x2)) << i;
        }
        // other shapes, empty arrays, and a host array passes through
        const CArray small = gpu->to_host(gpu->to_device(test::random_array({5, 3}, 64)));
        EXPECT_TRUE(same(small, test::random_array({5, 3}, 64)));
        const CArray none = gpu->to_host(gpu->empty({0}));
        EXPECT_EQ(none.size(), 0u);
        EXPECT_EQ(none.device(), Device::Cpu);
        EXPECT_EQ(gpu->to_host(x1).data(), x1.data());
        kept = h2;
        h3 = CArray();  // back to the cache, freed with it once the backend and `kept` are gone
    }
    EXPECT_TRUE(same(kept, x2)) << "download lost after its backend was destroyed";
    std::fill(kept.data(), kept.data() + kept.size(), cfloat(1.f, 2.f));
    kept = CArray();
    SUCCEED();
}

// read_async on both of its paths: a few scalars stored by a kernel into the page-locked block (up to
// 4096 bytes), larger arrays by the copy engine; each read sees the work queued before it and not the
// work queued after, and reads in flight together keep their own values.
TEST(CoreCudaBackend, ReadAsyncSeesQueuedWorkOnBothPaths) {
    REQUIRE_CUDA();
    auto gpu = make_cuda_backend();
    for (size_t n : {1u, 2u, 4u, 511u, 512u, 513u, 10000u}) {
        const CArray x = test::random_array({n}, unsigned(70 + n));
        CArray d = gpu->to_device(x);
        gpu->scale(2.f, d, d);
        auto doubled = gpu->read_async(d);
        gpu->scale(3.f, d, d);
        auto sextupled = gpu->read_async(d);
        gpu->scale(0.f, d, d);
        const std::vector<cfloat>& a = doubled->wait();
        const std::vector<cfloat>& b = sextupled->wait();
        ASSERT_EQ(a.size(), n);
        ASSERT_EQ(b.size(), n);
        for (size_t i = 0; i < n; ++i) {
            ASSERT_EQ(a[i], x.data()[i] * 2.f) << n << " elements, element " << i;
            ASSERT_EQ(b[i], x.data()[i] * 6.f) << n << " elements, element " << i;
        }
    }
    EXPECT_TRUE(gpu->read_async(gpu->empty({0}))->wait().empty());
}

// Walsh maps on the GPU against the CPU reference, per pixel (stride 1) and on grids: coil counts
// from 1 to 64 (padded inside the kernels to 8, 16, 32 or 64), odd sizes, several slices, strides
// that do not divide X - 1, strides above the kernel and the image, a kernel large enough to stage
// the windows in several bands of rows, one wider than what fits in shared memory at once, and
// strides of at least the kernel (the per-point kernel).
TEST(CoreCudaBackend, WalshMatchesCpu) {
    REQUIRE_CUDA();
    auto gpu = make_cuda_backend();
    auto cpu = make_cpu_backend();
    struct Case {
        size_t nx, ny, nz, nc;
        int kernel, stride;
    };
    const Case cases[] = {
        {64, 48, 1, 8, 5, 1},   {40, 36, 3, 32, 7, 1},  {24, 20, 1, 64, 5, 1},  {30, 26, 2, 6, 4, 1},
        {33, 21, 1, 3, 7, 1},   {64, 48, 1, 1, 7, 4},   {37, 29, 2, 3, 5, 3},   {50, 41, 1, 5, 7, 4},
        {96, 80, 1, 32, 7, 4},  {70, 66, 1, 64, 7, 4},  {40, 36, 3, 32, 7, 2},  {33, 20, 1, 17, 3, 8},
        {20, 20, 1, 16, 21, 64}, {45, 39, 2, 40, 6, 5},  {48, 40, 1, 8, 41, 4},  {200, 12, 1, 40, 131, 4},
        {256, 256, 1, 32, 7, 4}, {2, 40, 2, 6, 3, 4},    {64, 2, 1, 4, 5, 3},
        // stride >= kernel (one block per grid point): every coil padding, a window of 81 pixels
        // staged in two chunks that split a column, and the chain's default (kernel 7, stride 7)
        {40, 36, 1, 8, 3, 3},    {50, 41, 1, 12, 4, 6},  {96, 80, 1, 32, 7, 7},  {70, 66, 2, 64, 5, 5},
        {45, 39, 1, 40, 9, 9},   {256, 256, 1, 32, 7, 7},
    };
    for (const Case& k : cases) {
        const auto ph = test::smooth_coil_phantom(k.nx, k.ny, k.nz, k.nc);
        CArray mc = CArray::host(ph.data.shape()), mg = gpu->empty(ph.data.shape());
        coils::walsh_sensitivities(*cpu, ph.data, k.kernel, k.stride, mc);
        coils::walsh_sensitivities(*gpu, gpu->to_device(ph.data), k.kernel, k.stride, mg);
        EXPECT_LT(test::relative_error(gpu->to_host(mg), mc), 1e-5)
            << ph.data.shape().str() << " kernel " << k.kernel << " stride " << k.stride;
    }
    CArray too_many = gpu->empty({8, 8, 1, 65}), maps = gpu->empty({8, 8, 1, 65});
    EXPECT_THROW(coils::walsh_sensitivities(*gpu, too_many, 5, 4, maps), std::invalid_argument);
    CArray x = gpu->empty({8, 8, 1, 2}), m = gpu->empty({8, 8, 1, 2});
    try {
        coils::walsh_sensitivities(*gpu, x, 5, 0, m);
        ADD_FAILURE() << "stride 0 accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("stride 0"), std::string::npos) << e.what();
    }
}

// Noisy data (small eigengaps, so the 20 power iterations have not converged) must still agree: both
// backends run the same iterations from the same start.
TEST(CoreCudaBackend, WalshMatchesCpuOnNoise) {
    REQUIRE_CUDA();
    auto gpu = make_cuda_backend();
    auto cpu = make_cpu_backend();
    for (int stride : {1, 4, 7}) {
        const CArray x = test::random_array({40, 34, 1, 12}, 77);
        CArray mc = CArray::host(x.shape()), mg = gpu->empty(x.shape());
        coils::walsh_sensitivities(*cpu, x, 7, stride, mc);
        coils::walsh_sensitivities(*gpu, gpu->to_device(x), 7, stride, mg);
        EXPECT_LT(test::relative_error(gpu->to_host(mg), mc), 1e-5) << "stride " << stride;
    }
}

// walsh_combine interpolates the maps inside the combination on the GPU (never storing them): it
// must give the CPU's maps-then-combine, per pixel and on grids, for 1..64 coils and several slices,
// and agree with the GPU's own maps followed by combine_last_axis.
TEST(CoreCudaBackend, WalshCombineMatchesCpu) {
    REQUIRE_CUDA();
    auto gpu = make_cuda_backend();
    auto cpu = make_cpu_backend();
    struct Case {
        size_t nx, ny, nz, nc;
        int kernel, stride;
    };
    const Case cases[] = {{64, 48, 1, 8, 5, 1},   {40, 36, 3, 32, 7, 1},  {33, 21, 1, 3, 7, 1},
                          {37, 29, 2, 3, 5, 3},   {96, 80, 1, 32, 7, 4},  {70, 66, 1, 64, 7, 4},
                          {33, 20, 1, 17, 3, 8},  {45, 39, 2, 40, 6, 5},  {256, 256, 1, 32, 7, 7},
                          {64, 2, 1, 1, 5, 3}};
    for (const Case& k : cases) {
        const auto ph = test::smooth_coil_phantom(k.nx, k.ny, k.nz, k.nc);
        const Shape image{k.nx, k.ny, k.nz};
        CArray yc = CArray::host(image), yg = gpu->empty(image);
        coils::walsh_combine(*cpu, ph.data, k.kernel, k.stride, yc);
        const CArray xg = gpu->to_device(ph.data);
        coils::walsh_combine(*gpu, xg, k.kernel, k.stride, yg);
        const std::string what = ph.data.shape().str() + " kernel " + std::to_string(k.kernel) + " stride " +
                                 std::to_string(k.stride);
        EXPECT_LT(test::relative_error(gpu->to_host(yg), yc), 1e-5) << what;
        CArray maps = gpu->empty(ph.data.shape()), y2 = gpu->empty(image);
        coils::walsh_sensitivities(*gpu, xg, k.kernel, k.stride, maps);
        coils::combine_last_axis(*gpu, xg, maps, y2);
        EXPECT_LT(test::relative_error(gpu->to_host(yg), gpu->to_host(y2)), 1e-6) << what;
    }
    CArray x = gpu->empty({8, 8, 1, 2}), wrong = gpu->empty({8, 8, 2});
    try {
        coils::walsh_combine(*gpu, x, 5, 4, wrong);
        ADD_FAILURE() << "an output of the wrong shape was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("[8x8x2]"), std::string::npos) << e.what();
    }
}

// Arrays released by a session go to its block cache and come back to its next allocation of the
// same size at once, while work queued on them may not have run: stream order must keep that work
// first. An FFT reads `a`, `a` is released, its block is taken again and overwritten right away.
TEST(CoreCudaBackend, ReleasedBlocksAreReusedInStreamOrder) {
    REQUIRE_CUDA();
    auto gpu = make_cuda_backend();
    auto cpu = make_cpu_backend(2);
    const Shape s{256, 128, 8};
    const CArray x = test::random_array(s, 31);
    CArray host_copy = CArray::host(s);
    std::copy(x.data(), x.data() + x.size(), host_copy.data());
    test::fft_rebind(*cpu, host_copy, 3u, FFTDirection::Forward);
    for (int round = 0; round < 3; ++round) {
        CArray a = gpu->to_device(x);
        CArray b = a;
        test::fft_rebind(*gpu, b, 3u, FFTDirection::Forward);  // queued: reads a's block
        const cfloat* block = a.data();
        a = CArray();  // a's block goes back to the cache with the FFT possibly still queued
        CArray c = gpu->empty(s);
        EXPECT_EQ(c.data(), block) << "the released block was not reused";
        const std::vector<cfloat> junk(s[0], cfloat(1e3f, -1e3f));
        for (size_t row = 0; row < s.size() / s[0]; ++row) gpu->upload_rows(junk.data(), s[0], s[0], 1, c, row * s[0], s[0]);
        EXPECT_LT(test::relative_error(gpu->to_host(b), host_copy), 1e-5) << "round " << round;
    }
}

TEST(CoreCudaBackend, ConcurrentSessionsAreIndependent) {
    REQUIRE_CUDA();
    auto cpu = make_cpu_backend();
    const Shape s{128, 96, 8};
    const CArray x = test::random_array(s, 9);
    CArray want = test::from_double(test::to_double(x), s);
    test::fft_rebind(*cpu, want, 3u, FFTDirection::Forward);
    std::vector<double> err(4, 1.0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            auto gpu = make_cuda_backend();
            double worst = 0;
            for (int i = 0; i < 10; ++i) {
                CArray d = gpu->to_device(x);
                test::fft_rebind(*gpu, d, 3u, FFTDirection::Forward);
                worst = std::max(worst, test::relative_error(gpu->to_host(d), want));
            }
            err[static_cast<size_t>(t)] = worst;
        });
    for (auto& th : threads) th.join();
    for (int t = 0; t < 4; ++t) EXPECT_LT(err[static_cast<size_t>(t)], 1e-5) << "session " << t;
}

#ifdef LARMOR_WITH_CUDA
// Sessions share the process's cuFFT plans (cuda/fft_plans.h) but never scratch memory: four sessions
// on four threads transform different data of the same shapes at once, among them shapes whose plans
// need a work area (a long 1D transform, odd sizes by Bluestein's algorithm), by the default centring
// and by LTO callbacks; every result matches the CPU's, and each shape was planned once.
TEST(CoreCudaBackend, SessionsShareFftPlansButNotWorkAreas) {
    REQUIRE_CUDA();
    const FftCase cases[] = {{{1 << 20}, 1u}, {{255, 129, 2}, 3u}, {{4097, 3}, 1u}, {{256, 256, 8}, 3u}};
    auto cpu = make_cpu_backend();
    for (const char* mode : {"", "load"}) {
        CentringEnv env(mode);
        SCOPED_TRACE(std::string("centring '") + mode + "'");
        std::vector<std::vector<CArray>> inputs(4), wants(4);
        for (size_t t = 0; t < 4; ++t)
            for (const FftCase& c : cases) {
                CArray x = test::random_array(c.shape, unsigned(700 + 10 * t + inputs[t].size()));
                CArray w = test::from_double(test::to_double(x), c.shape);
                test::fft_rebind(*cpu, w, c.axes, FFTDirection::Forward);
                inputs[t].push_back(std::move(x));
                wants[t].push_back(std::move(w));
            }
        size_t most_work = 0;
        {
            auto probe = make_cuda_backend();
            for (const FftCase& c : cases) {
                CArray d = probe->to_device(test::random_array(c.shape, 1));
                test::fft_rebind(*probe, d, c.axes, FFTDirection::Forward);
                most_work = std::max(most_work, cuda::last_work_area_bytes());
            }
        }
        const uint64_t planned_before = cuda::cufft_plan_stats().created;
        std::vector<double> err(4, 1.0);
        std::vector<std::thread> threads;
        for (size_t t = 0; t < 4; ++t)
            threads.emplace_back([&, t] {
                auto gpu = make_cuda_backend();
                double worst = 0;
                for (int i = 0; i < 10; ++i)
                    for (size_t k = 0; k < std::size(cases); ++k) {
                        CArray d = gpu->to_device(inputs[t][k]);
                        test::fft_rebind(*gpu, d, cases[k].axes, FFTDirection::Forward);
                        worst = std::max(worst, test::relative_error(gpu->to_host(d), wants[t][k]));
                    }
                err[t] = worst;
            });
        for (auto& th : threads) th.join();
        for (size_t t = 0; t < 4; ++t) EXPECT_LT(err[t], 1e-5) << "session " << t;
        EXPECT_EQ(cuda::cufft_plan_stats().created, planned_before) << "sessions planned shapes the process had planned";
        EXPECT_GT(most_work, 0u) << "no case needed a cuFFT work area, so none tested keeping them apart";
        std::cout << "[ info ] largest cuFFT work area of the cases: " << most_work << " bytes\n";
    }
}
#endif

TEST(CoreCudaBackend, ErrorsNameTheProblem) {
    REQUIRE_CUDA();
    auto gpu = make_cuda_backend();
    CArray host = CArray::host({8, 8});
    try {
        test::fft_rebind(*gpu, host, 3u, FFTDirection::Forward);
        FAIL() << "a host array was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("[8x8]"), std::string::npos) << e.what();
    }
    try {
        make_cuda_backend(1000);
        FAIL() << "device 1000 was accepted";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("1000"), std::string::npos) << e.what();
    }
    try {
        gpu->empty({size_t(1) << 47});  // 1 PiB
        FAIL() << "a 1 PiB allocation succeeded";
    } catch (const std::runtime_error& e) {
        const std::string w = e.what();
        EXPECT_NE(w.find("out of GPU memory"), std::string::npos) << w;
        EXPECT_NE(w.find(std::to_string(size_t(1) << 50)), std::string::npos) << w;
        std::cout << "[ info ] " << w << "\n";
    }
    // the backend still works after the failures
    CArray d = gpu->to_device(test::random_array({16, 16}, 1));
    test::fft_rebind(*gpu, d, 3u, FFTDirection::Forward);
    gpu->synchronize();
}

}  // namespace
}  // namespace larmor
