// The backend primitives behind streaming reconstruction: place_lines and mix_place_lines (processed
// readouts into the k-space buffer, with running means of repeated lines and the prewhitening on
// the way), upload_rows' staging on CUDA, and download_part (real parts of an image,
// taken on the device). CPU against a double-precision reference written here; CUDA against the CPU
// twin (skipped without a CUDA device).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "gadgets/kernels/line_placement.h"
#include "tests/support/reference_dft.h"

namespace larmor {
namespace {

using test::cdouble;

#define REQUIRE_CUDA() \
    if (!larmor::cuda_available()) GTEST_SKIP() << "no CUDA device"

// Three rounds of placements into a [L, E, C] buffer, including keep != 0 (running means).
struct Round {
    std::vector<kernels::LinePlacement> where;
    unsigned seed;
};
const size_t kL = 37, kK = 5, kE = 11, kC = 3;
std::vector<Round> rounds() {
    return {{{{3, 0.f, 1.f}, {0, 0.f, 1.f}, {10, 0.f, 1.f}, {7, 0.f, 2.f}}, 1},
            {{{3, 0.5f, 0.5f}, {4, 0.f, 1.f}, {0, 0.25f, -1.5f}, {9, 0.f, 1.f}, {10, 2.f, 1.f}}, 2},
            {{{10, 1.f / 3, 2.f / 3}}, 3}};
}

std::vector<cdouble> reference_places() {
    std::vector<cdouble> dst(kL * kE * kC, cdouble(7.0, -7.0));  // lines never placed keep this
    for (const Round& r : rounds()) {
        const std::vector<cdouble> src = test::to_double(test::random_array({kL, kK, kC}, r.seed));
        for (size_t k = 0; k < r.where.size(); ++k)
            for (size_t c = 0; c < kC; ++c)
                for (size_t l = 0; l < kL; ++l) {
                    cdouble& d = dst[(c * kE + r.where[k].line) * kL + l];
                    const cdouble in = src[(c * kK + k) * kL + l];
                    d = r.where[k].keep == 0.f ? double(r.where[k].scale) * in
                                               : double(r.where[k].keep) * d + double(r.where[k].scale) * in;
                }
    }
    return dst;
}

CArray run_places(Backend& be) {
    CArray init = CArray::host({kL, kE, kC});
    for (size_t i = 0; i < init.size(); ++i) init.data()[i] = cfloat(7.f, -7.f);
    CArray dst = be.to_device(init);
    for (const Round& r : rounds()) {
        CArray src = be.to_device(test::random_array({kL, kK, kC}, r.seed));
        kernels::place_lines(be, src, r.where, dst);
    }
    return be.to_host(dst);
}

TEST(PlaceLines, CpuMatchesReference) {
    auto cpu = make_cpu_backend(2);
    EXPECT_LT(test::relative_error(run_places(*cpu), reference_places()), 1e-6);
}

TEST(PlaceLines, RejectsBadPlacementsNamingThem) {
    auto cpu = make_cpu_backend(1);
    CArray src = CArray::host({8, 2, 3}), dst = CArray::host({8, 4, 3});
    auto message = [&](const std::vector<kernels::LinePlacement>& w, CArray& d) {
        try {
            kernels::place_lines(*cpu, src, w, d);
        } catch (const std::invalid_argument& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(message({{4, 0.f, 1.f}}, dst).find("line 4"), std::string::npos);
    EXPECT_NE(message({{1, 0.f, 1.f}, {1, 0.f, 1.f}}, dst).find("targeted twice"), std::string::npos);
    EXPECT_NE(message({{0, 0.f, 1.f}, {1, 0.f, 1.f}, {2, 0.f, 1.f}}, dst).find("3 placements"), std::string::npos);
    CArray other = CArray::host({9, 4, 3});
    EXPECT_NE(message({{0, 0.f, 1.f}}, other).find("differ in the line length"), std::string::npos);
}

TEST(PlaceLines, CudaMatchesCpu) {
    REQUIRE_CUDA();
    auto gpu = make_cuda_backend();
    auto cpu = make_cpu_backend(2);
    EXPECT_LT(test::relative_error(run_places(*gpu), test::to_double(run_places(*cpu))), 1e-6);
    // More placements than one kernel launch carries (64): 150 lines of a 200-line buffer.
    CArray src = test::random_array({16, 150, 2}, 9);
    std::vector<kernels::LinePlacement> where;
    for (size_t k = 0; k < 150; ++k) where.push_back({(k * 37) % 200, 0.f, 1.f + float(k % 3)});
    CArray d_gpu = gpu->zeros({16, 200, 2}), d_cpu = cpu->zeros({16, 200, 2});
    kernels::place_lines(*gpu, gpu->to_device(src), where, d_gpu);
    kernels::place_lines(*cpu, src, where, d_cpu);
    EXPECT_EQ(test::relative_error(gpu->to_host(d_gpu), d_cpu), 0.0);
}

// mix_place_lines: the same rounds with a D -> C mixing matrix (C = kC outputs from kD inputs).
const size_t kD = 4;
std::vector<cfloat> mixing_matrix() {
    const CArray m = test::random_array({kC * kD}, 17);
    return std::vector<cfloat>(m.data(), m.data() + m.size());
}

std::vector<cdouble> reference_mix_places() {
    const std::vector<cfloat> m = mixing_matrix();
    std::vector<cdouble> dst(kL * kE * kC, cdouble(7.0, -7.0));
    for (const Round& r : rounds()) {
        const std::vector<cdouble> src = test::to_double(test::random_array({kL, kK, kD}, r.seed));
        for (size_t k = 0; k < r.where.size(); ++k)
            for (size_t c = 0; c < kC; ++c)
                for (size_t l = 0; l < kL; ++l) {
                    cdouble in = 0;
                    for (size_t d = 0; d < kD; ++d) in += cdouble(m[c * kD + d]) * src[(d * kK + k) * kL + l];
                    cdouble& o = dst[(c * kE + r.where[k].line) * kL + l];
                    o = r.where[k].keep == 0.f ? double(r.where[k].scale) * in
                                               : double(r.where[k].keep) * o + double(r.where[k].scale) * in;
                }
    }
    return dst;
}

// A mixing matrix as the kernels take it: an array on the backend.
CArray matrix_on(Backend& be, const std::vector<cfloat>& m) {
    CArray h = CArray::host({m.size()});
    std::copy(m.begin(), m.end(), h.data());
    return be.to_device(h);
}

CArray run_mix_places(Backend& be) {
    CArray init = CArray::host({kL, kE, kC});
    for (size_t i = 0; i < init.size(); ++i) init.data()[i] = cfloat(7.f, -7.f);
    CArray dst = be.to_device(init);
    for (const Round& r : rounds()) {
        CArray src = be.to_device(test::random_array({kL, kK, kD}, r.seed));
        kernels::mix_place_lines(be, src, matrix_on(be, mixing_matrix()), r.where, dst);
    }
    return be.to_host(dst);
}

TEST(MixPlaceLines, CpuMatchesReference) {
    auto cpu = make_cpu_backend(2);
    EXPECT_LT(test::relative_error(run_mix_places(*cpu), reference_mix_places()), 1e-6);
}

TEST(MixPlaceLines, RejectsAMatrixOfTheWrongSizeNamingIt) {
    auto cpu = make_cpu_backend(1);
    CArray src = CArray::host({8, 2, 3}), dst = CArray::host({8, 4, 2});
    try {
        kernels::mix_place_lines(*cpu, src, matrix_on(*cpu, std::vector<cfloat>(5)), {{0, 0.f, 1.f}}, dst);
        FAIL() << "no error";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("5 entries, expected C*D = 2*3"), std::string::npos) << e.what();
    }
}

TEST(MixPlaceLines, CudaMatchesCpu) {
    REQUIRE_CUDA();
    auto gpu = make_cuda_backend();
    auto cpu = make_cpu_backend(2);
    EXPECT_LT(test::relative_error(run_mix_places(*gpu), test::to_double(run_mix_places(*cpu))), 1e-6);
    // The chain's shape (32 -> 32 channels, 256 samples: whole tiles), and 70 -> 13 channels on
    // lines of 203 samples (input channels in two staged chunks, a partial pass of output channels,
    // a partial tile), both with more placements than one launch carries.
    const std::pair<size_t, size_t> channels[] = {{32, 32}, {70, 13}};
    for (const auto& [d, c_out] : channels) {
        const size_t l = d == 32 ? 256 : 203, k = 80, e = 120;
        CArray src = test::random_array({l, k, d}, 21);
        const CArray mh = test::random_array({c_out * d}, 22);
        const std::vector<cfloat> m(mh.data(), mh.data() + mh.size());
        std::vector<kernels::LinePlacement> where;
        for (size_t q = 0; q < k; ++q) where.push_back({(q * 7) % e, q % 2 ? 0.5f : 0.f, q % 2 ? 0.5f : 1.f});
        const CArray start = test::random_array({l, e, c_out}, 23);
        CArray d_gpu = gpu->to_device(start), d_cpu = cpu->to_device(start);
        kernels::mix_place_lines(*gpu, gpu->to_device(src), matrix_on(*gpu, m), where, d_gpu);
        kernels::mix_place_lines(*cpu, src, matrix_on(*cpu, m), where, d_cpu);
        EXPECT_LT(test::relative_error(gpu->to_host(d_gpu), test::to_double(d_cpu)), 1e-6) << c_out << " channels out";
    }
}

// upload_rows on CUDA goes through a ring of page-locked slots: more uploads than slots (each slot
// reused while the source buffer is overwritten right after every call), rows with a source pitch,
// and one copy larger than a slot (the direct path).
TEST(UploadRows, CudaStagingKeepsEveryUpload) {
    REQUIRE_CUDA();
    auto gpu = make_cuda_backend();
    const size_t row = 300, rows = 5, uploads = 40, pitch = 310;
    CArray dst = gpu->zeros({row, uploads, rows});
    std::vector<cfloat> src(pitch * rows);
    for (size_t u = 0; u < uploads; ++u) {
        for (size_t i = 0; i < src.size(); ++i) src[i] = cfloat(float(u), float(i));
        gpu->upload_rows(src.data(), pitch, row, rows, dst, u * row, row * uploads);
        std::fill(src.begin(), src.end(), cfloat(-1.f, -1.f));  // the call returned: src is ours again
    }
    const CArray host = gpu->to_host(dst);
    size_t wrong = 0;
    for (size_t r = 0; r < rows; ++r)
        for (size_t u = 0; u < uploads; ++u)
            for (size_t i = 0; i < row; ++i)
                wrong += host.data()[(r * uploads + u) * row + i] != cfloat(float(u), float(r * pitch + i));
    EXPECT_EQ(wrong, 0u);

    const size_t big = (size_t{1} << 20) / sizeof(cfloat) + 3;  // over one 1 MiB slot
    std::vector<cfloat> large(big);
    for (size_t i = 0; i < big; ++i) large[i] = cfloat(float(i % 1000), 1.f);
    CArray dbig = gpu->zeros({big});
    gpu->upload_rows(large.data(), big, big, 1, dbig, 0, big);
    const CArray hbig = gpu->to_host(dbig);
    EXPECT_TRUE(std::equal(large.begin(), large.end(), hbig.data()));
}

// copy_rows: a strided 2D window out of one array into another, checked element by element on the CPU;
// on CUDA from device to device (the same GPU through a second backend, as a slab moves to a peer), host
// to device and device to host, each against the CPU's copy; and the refusals, by name.
TEST(CopyRows, MovesAStridedWindowBetweenAnyTwoPlaces) {
    const CArray src = test::random_array({40, 30}, 11);
    const size_t offset = 7, rows = 29, row = 12;  // columns 7 .. 18 of every line but the last
    auto cpu = make_cpu_backend();
    CArray want = cpu->zeros({row, rows + 2});
    cpu->copy_rows(src, offset, 40, want, row, row, row, rows);
    for (size_t r = 0; r < rows; ++r)
        for (size_t i = 0; i < row; ++i) ASSERT_EQ(want.data()[(r + 1) * row + i], src.data()[offset + r * 40 + i]);
    EXPECT_EQ(want.data()[0], cfloat(0.f, 0.f));
    auto message = [&](auto f) {
        try {
            f();
        } catch (const std::invalid_argument& e) {
            return std::string(e.what());
        }
        return std::string("no exception");
    };
    CArray small = cpu->zeros({10});
    EXPECT_NE(message([&] { cpu->copy_rows(src, 1190, 40, small, 0, 10, 12, 1); }).find("past src [40x30]"),
              std::string::npos);
    EXPECT_NE(message([&] { cpu->copy_rows(src, 0, 40, small, 0, 12, 12, 2); }).find("past dst [10]"), std::string::npos);
    EXPECT_NE(message([&] { cpu->copy_rows(src, 0, 4, small, 0, 12, 8, 2); }).find("source pitch of 4"), std::string::npos);
    CArray& same = const_cast<CArray&>(src);
    EXPECT_NE(message([&] { cpu->copy_rows(src, 0, 40, same, 1, 40, 10, 2); }).find("overlap"), std::string::npos);

    REQUIRE_CUDA();
    auto gpu = make_cuda_backend(), peer = make_cuda_backend();
    const CArray d_src = gpu->to_device(src);
    CArray d_dst = peer->zeros({row, rows + 2});
    gpu->synchronize();
    peer->copy_rows(d_src, offset, 40, d_dst, row, row, row, rows);  // device to device, on the peer's stream
    CArray h_dst = CArray::host({row, rows + 2});
    peer->copy_rows(d_dst, 0, row, h_dst, 0, row, row, rows + 2);    // device to host
    peer->synchronize();
    EXPECT_TRUE(std::equal(want.data(), want.data() + want.size(), h_dst.data()));
    CArray d_up = gpu->zeros({row, rows + 2});
    gpu->copy_rows(src, offset, 40, d_up, row, row, row, rows);  // host to device
    const CArray back = gpu->to_host(d_up);
    EXPECT_TRUE(std::equal(want.data(), want.data() + want.size(), back.data()));
}

// Values that stress each part: huge magnitudes (|z|^2 overflows float), signs in all quadrants, zeros.
CArray part_input() {
    CArray x = test::random_array({33, 17, 2}, 4);
    x.data()[0] = cfloat(3e30f, -4e30f);
    x.data()[1] = cfloat(0.f, 0.f);
    x.data()[2] = cfloat(-1.f, -0.f);
    x.data()[3] = cfloat(-2.f, 1e-30f);
    return x;
}

double reference_part(cfloat z, ComplexPart p) {
    const cdouble d(z);
    switch (p) {
        case ComplexPart::Magnitude: return std::abs(d);
        case ComplexPart::Real: return d.real();
        case ComplexPart::Imag: return d.imag();
        case ComplexPart::Phase: return std::arg(d);
    }
    return 0;
}

const ComplexPart kParts[] = {ComplexPart::Magnitude, ComplexPart::Real, ComplexPart::Imag, ComplexPart::Phase};

TEST(DownloadPart, CpuMatchesReference) {
    auto cpu = make_cpu_backend(2);
    const CArray x = part_input();
    for (ComplexPart p : kParts) {
        std::vector<float> out(x.size(), -99.f);
        cpu->download_part(x, p, out.data());
        for (size_t i = 0; i < x.size(); ++i) {
            const double want = reference_part(x.data()[i], p);
            EXPECT_NEAR(out[i], want, 1e-6 * std::max(1.0, std::abs(want))) << "element " << i << " part " << int(p);
        }
    }
}

TEST(DownloadPart, CudaMatchesCpu) {
    REQUIRE_CUDA();
    auto gpu = make_cuda_backend();
    auto cpu = make_cpu_backend(2);
    const CArray x = part_input();
    const CArray d = gpu->to_device(x);
    for (ComplexPart p : kParts) {
        std::vector<float> g(x.size(), -99.f), c(x.size(), -98.f);
        gpu->download_part(d, p, g.data());
        cpu->download_part(x, p, c.data());
        for (size_t i = 0; i < x.size(); ++i)
            EXPECT_NEAR(g[i], c[i], 2e-7 * std::max(1.f, std::abs(c[i]))) << "element " << i << " part " << int(p);
    }
}

}  // namespace
}  // namespace larmor
