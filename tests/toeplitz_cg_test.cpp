// The regularised least-squares reconstruction of core/recon/toeplitz_cg.h on every backend: data made
// by the exact forward model from a known image are inverted back to it, the Toeplitz normal and the
// NUFFT pair give one solution, the finite-difference regulariser smooths what the identity does not,
// its anatomically weighted version keeps the reference's edges, and bad input is refused naming the value.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <random>

#include "core/linops/nudft.h"
#include "core/linops/sense.h"
#include "core/recon/anatomical_weights.h"
#include "core/recon/toeplitz_cg.h"
#include "gadgets/precompute_cache.h"
#include "tests/support/backends.h"
#include "tests/support/operator_checks.h"
#include "tests/support/reference_dft.h"

namespace larmor {
namespace {

class ToeplitzCgTest : public test::BackendTest {};
LARMOR_INSTANTIATE_BACKEND_TEST(ToeplitzCgTest);

const double kPi = std::acos(-1.0);

// Radial spokes (2D) with `samples` points over [-N/2, N/2), plus a little jitter so no two spokes share
// a point.
RArray spokes(const Shape& image, size_t count, size_t samples) {
    RArray k = RArray::host({2, count * samples});
    std::mt19937 gen(3);
    std::uniform_real_distribution<double> jitter(-0.05, 0.05);
    for (size_t s = 0; s < count; ++s)
        for (size_t i = 0; i < samples; ++i) {
            const double r = (double(i) - double(samples / 2)) * double(image[0]) / double(samples);
            const double t = kPi * double(s) / double(count);
            // Inside [-N/2, N/2] after the jitter (the NUFFT refuses points beyond).
            const double hx = double(image[0]) / 2 - 0.05, hy = double(image[1]) / 2 - 0.05;
            k.data()[2 * (s * samples + i)] = float(std::clamp(r * std::cos(t), -hx, hx) + jitter(gen));
            k.data()[2 * (s * samples + i) + 1] =
                float(std::clamp(r * std::sin(t) * double(image[1]) / double(image[0]), -hy, hy) + jitter(gen));
        }
    return k;
}

// A smooth object: a disc with a bright off-centre ellipse and a phase ramp.
CArray object(const Shape& image) {
    CArray x = CArray::host(image);
    for (size_t j = 0; j < image[1]; ++j)
        for (size_t i = 0; i < image[0]; ++i) {
            const double u = (double(i) - double(image[0]) / 2) / double(image[0]),
                         v = (double(j) - double(image[1]) / 2) / double(image[1]);
            double a = (u * u + v * v < 0.16) ? 1.0 : 0.0;
            if ((u - 0.1) * (u - 0.1) / 0.01 + v * v / 0.04 < 1) a += 0.5;
            x.data()[j * image[0] + i] = cfloat(std::polar(a, 2.0 * u));
        }
    return x;
}

// Smooth complex coil maps, normalised to unit root-sum-of-squares.
CArray coil_maps(const Shape& image, size_t coils) {
    Shape s = image;
    s.push_back(coils);
    CArray m = CArray::host(s);
    const size_t n = image.size();
    for (size_t p = 0; p < n; ++p) {
        const double u = double(p % image[0]) / double(image[0]) - 0.5, v = double(p / image[0]) / double(image[1]) - 0.5;
        double rss = 0;
        std::vector<std::complex<double>> c(coils);
        for (size_t q = 0; q < coils; ++q) {
            const double a = 2 * kPi * double(q) / double(coils);
            const double d2 = (u - 0.5 * std::cos(a)) * (u - 0.5 * std::cos(a)) + (v - 0.5 * std::sin(a)) * (v - 0.5 * std::sin(a));
            c[q] = std::polar(std::exp(-d2 / 0.3), a + u);
            rss += std::norm(c[q]);
        }
        for (size_t q = 0; q < coils; ++q) m.data()[q * n + p] = cfloat(c[q] / std::sqrt(rss));
    }
    return m;
}

// y = F S x by the exact forward model with the box basis.
CArray simulate(const std::shared_ptr<Backend>& be, const Shape& image, const RArray& k, const CArray& maps, const CArray& x) {
    const size_t coils = maps.empty() ? 1 : maps.shape()[image.rank()];
    auto f = nudft(be, image, coils, k, {VoxelBasis::Box, true});
    CArray xs = be->empty(f->ishape());
    if (maps.empty())
        be->copy(be->to_device(x), xs);
    else
        sense(be, be->to_device(maps))->forward(be->to_device(x), xs);
    CArray y = be->empty(f->oshape());
    f->forward(xs, y);
    return y;
}

CArray solve(const std::shared_ptr<Backend>& be, const Shape& image, const RArray& k, const CArray& y, const CArray& maps,
             const ToeplitzCgSetup& s, double* residual = nullptr) {
    ToeplitzCg p = toeplitz_cg(be, image, k, y, maps.empty() ? CArray() : be->to_device(maps), RArray(), s);
    while (!p.solver->done()) p.solver->update();
    if (residual) *residual = p.solver->residual();
    return p.image;
}

// Uniform random points over the whole square of k-space.
RArray uniform_points(const Shape& image, size_t m) {
    RArray k = RArray::host({2, m});
    std::mt19937 gen(9);
    for (size_t i = 0; i < m; ++i)
        for (size_t a = 0; a < 2; ++a)
            k.data()[2 * i + a] =
                float(std::uniform_real_distribution<double>(-double(image[int(a)]) / 2, double(image[int(a)]) / 2)(gen));
    return k;
}

// 32 x 24 from 3x as many random points over all of k-space (radial spokes would leave the corners
// unmeasured): the system is well determined, so with a tiny lambda the solution is the object that
// made the data.
TEST_P(ToeplitzCgTest, RecoversTheImageThatMadeTheData) {
    const Shape image{32, 24};
    const RArray k = uniform_points(image, 3 * 32 * 24);
    const CArray x = object(image);
    for (size_t coils : {size_t(1), size_t(4)}) {
        const CArray maps = coils == 1 ? CArray() : coil_maps(image, coils);
        const CArray y = simulate(be, image, k, maps, x);
        ToeplitzCgSetup s;
        s.basis = VoxelBasis::Box;  // the model that made the data
        s.lambda = 1e-6f;
        s.cg = {300, 1e-6};
        double res = 0;
        const CArray r = solve(be, image, k, y, maps, s, &res);
        const double err = test::relative_error(be->to_host(r), x);
        EXPECT_LE(err, 2e-3) << coils << " coils, residual " << res;
        std::printf("  %zu coil(s): error %.2e, residual %.2e\n", coils, err, res);
    }
}

TEST_P(ToeplitzCgTest, ToeplitzAndTheNufftPairGiveOneSolution) {
    const Shape image{24, 24};
    const RArray k = spokes(image, 18, 48);  // undersampled: lambda matters
    const CArray maps = coil_maps(image, 3), y = simulate(be, image, k, maps, object(image));
    ToeplitzCgSetup a;
    a.lambda = 0.05f;
    a.cg = {40, 0.0};
    ToeplitzCgSetup b = a;
    b.normal = ToeplitzCgSetup::Normal::NufftPair;
    b.nufft.tolerance = 1e-6;
    ToeplitzCgSetup c = a;
    c.adjoint = ToeplitzCgSetup::Adjoint::Nufft;
    c.q = ToeplitzOptions::Method::Nufft;
    c.nufft.tolerance = 1e-6;
    const CArray ra = be->to_host(solve(be, image, k, y, maps, a));
    EXPECT_LE(test::relative_error(be->to_host(solve(be, image, k, y, maps, b)), ra), 1e-3);
    EXPECT_LE(test::relative_error(be->to_host(solve(be, image, k, y, maps, c)), ra), 1e-3);
}

// Total variation's smooth cousin: with strong weight, finite differences leave a smoother image than the
// identity does at the same lambda (less energy in the image's own differences).
TEST_P(ToeplitzCgTest, FiniteDifferencesSmoothMoreThanTheIdentity) {
    const Shape image{32, 32};
    const RArray k = spokes(image, 16, 64);
    CArray y = simulate(be, image, k, CArray(), object(image));
    // Noise, so that there is something to smooth.
    CArray yh = be->to_host(y);
    std::mt19937 gen(1);
    std::normal_distribution<float> nd(0.f, 0.02f);
    for (size_t i = 0; i < yh.size(); ++i) yh.data()[i] += cfloat(nd(gen), nd(gen));
    y = be->to_device(yh);
    auto roughness = [&](const CArray& img) {
        const CArray h = be->to_host(img);
        double r = 0, e = 0;
        for (size_t j = 0; j < 32; ++j)
            for (size_t i = 0; i < 32; ++i) {
                const cfloat v = h.data()[j * 32 + i];
                r += std::norm(h.data()[j * 32 + (i + 1) % 32] - v) + std::norm(h.data()[((j + 1) % 32) * 32 + i] - v);
                e += std::norm(v);
            }
        return r / e;
    };
    ToeplitzCgSetup s;
    s.lambda = 1.0f;
    s.cg = {50, 0.0};
    const double plain = roughness(solve(be, image, k, y, CArray(), s));
    s.regularizer = ToeplitzCgSetup::Regularizer::FiniteDifference;
    const double smooth = roughness(solve(be, image, k, y, CArray(), s));
    EXPECT_LT(smooth, 0.9 * plain) << "identity " << plain << ", finite differences " << smooth;
}

// Noisy data of `image` from radial spokes.
CArray noisy_spokes_data(const std::shared_ptr<Backend>& be, const Shape& image, const RArray& k, float sigma) {
    CArray yh = be->to_host(simulate(be, image, k, CArray(), object(image)));
    std::mt19937 gen(1);
    std::normal_distribution<float> nd(0.f, sigma);
    for (size_t i = 0; i < yh.size(); ++i) yh.data()[i] += cfloat(nd(gen), nd(gen));
    return be->to_device(yh);
}

RArray magnitude(const CArray& x) {
    RArray r = RArray::host(x.shape());
    for (size_t i = 0; i < x.size(); ++i) r.data()[i] = std::abs(x.data()[i]);
    return r;
}

// With every weight 1 the anatomical regulariser is the plain finite-difference one: one solution.
TEST_P(ToeplitzCgTest, AnatomicalWeightsOfOneAreFiniteDifferences) {
    const Shape image{24, 20};
    const RArray k = spokes(image, 12, 48);
    const CArray y = noisy_spokes_data(be, image, k, 0.02f);
    ToeplitzCgSetup fd;
    fd.lambda = 0.5f;
    fd.cg = {40, 0.0};
    fd.regularizer = ToeplitzCgSetup::Regularizer::FiniteDifference;
    ToeplitzCgSetup an = fd;
    an.regularizer = ToeplitzCgSetup::Regularizer::AnatomicalFiniteDifference;
    an.edge_weights = RArray::host({24, 20, 2});
    for (size_t i = 0; i < an.edge_weights.size(); ++i) an.edge_weights.data()[i] = 1.f;
    const CArray a = be->to_host(solve(be, image, k, y, CArray(), fd));
    EXPECT_LE(test::relative_error(be->to_host(solve(be, image, k, y, CArray(), an)), a), 1e-5);
}

// Undersampled, noisy spokes of a piecewise-smooth object: penalising differences everywhere blurs its
// edges along with the noise; with the edges of the object's own magnitude exempt (a reference scan of
// the same anatomy) the error is far lower at the same lambda (Haldar et al. 2008).
TEST_P(ToeplitzCgTest, AnatomicalRegulariserKeepsTheReferenceEdges) {
    const Shape image{32, 32};
    const RArray k = spokes(image, 12, 64);
    const CArray y = noisy_spokes_data(be, image, k, 0.05f);
    const CArray truth = object(image);
    ToeplitzCgSetup fd;
    fd.lambda = 2.0f;
    fd.cg = {60, 0.0};
    fd.regularizer = ToeplitzCgSetup::Regularizer::FiniteDifference;
    ToeplitzCgSetup an = fd;
    an.regularizer = ToeplitzCgSetup::Regularizer::AnatomicalFiniteDifference;
    an.edge_weights = anatomical_edge_weights(magnitude(truth), 0.05f);
    const double e_fd = test::relative_error(be->to_host(solve(be, image, k, y, CArray(), fd)), truth);
    const double e_an = test::relative_error(be->to_host(solve(be, image, k, y, CArray(), an)), truth);
    std::printf("  error: finite differences %.3f, anatomically weighted %.3f\n", e_fd, e_an);
    EXPECT_LT(e_an, 0.6 * e_fd);
    an.edge_weights = RArray::host({32, 32, 3});
    EXPECT_THROW(solve(be, image, k, y, CArray(), an), std::invalid_argument);
}

TEST_P(ToeplitzCgTest, RefusesInconsistentInput) {
    const Shape image{16, 16};
    const RArray k = spokes(image, 8, 16);
    const CArray y = be->zeros({128, 2});
    EXPECT_THROW(toeplitz_cg(be, image, k, y, CArray(), RArray(), {}), std::invalid_argument);  // 2 coils, no maps
    EXPECT_THROW(toeplitz_cg(be, image, k, be->zeros({127, 1}), CArray(), RArray(), {}), std::invalid_argument);
    RArray w = RArray::host({128});
    for (size_t i = 0; i < 128; ++i) w.data()[i] = 1.f;
    w.data()[77] = -1.f;
    try {
        toeplitz_cg(be, image, k, be->zeros({128, 1}), CArray(), w, {});
        FAIL() << "a negative weight was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("sample 77"), std::string::npos) << e.what();
    }
}

// A step along x (values 1 | 3) in a 6 x 4 image: the differences across it, and across the periodic
// wrap, are edges; every difference along y is not.
TEST(AnatomicalEdgeWeights, ZeroAcrossTheReferenceEdgesOnly) {
    RArray r = RArray::host({6, 4});
    for (size_t y = 0; y < 4; ++y)
        for (size_t x = 0; x < 6; ++x) r.data()[y * 6 + x] = x < 3 ? 1.f : 3.f + 0.01f * float(y);
    const RArray w = anatomical_edge_weights(r, 0.1f);
    ASSERT_EQ(w.shape(), (Shape{6, 4, 2}));
    for (size_t y = 0; y < 4; ++y)
        for (size_t x = 0; x < 6; ++x) {
            EXPECT_EQ(w.data()[y * 6 + x], (x == 2 || x == 5) ? 0.f : 1.f) << x << ", " << y;
            EXPECT_EQ(w.data()[24 + y * 6 + x], 1.f) << x << ", " << y;  // 0.01 steps along y: below 0.1 x 3.03
        }
    EXPECT_NEAR(edge_fraction(w), 8.0 / 48.0, 1e-12);
    // A tighter threshold sees the y steps (0.01 > 0.001 x 3.03) and the wrap from y = 3 to 0 too.
    EXPECT_NEAR(edge_fraction(anatomical_edge_weights(r, 0.001f)), (8.0 + 12.0) / 48.0, 1e-12);

    RArray r3 = RArray::host({4, 3, 2});
    for (size_t i = 0; i < r3.size(); ++i) r3.data()[i] = i < 12 ? 0.f : 5.f;  // a step along z
    const RArray w3 = anatomical_edge_weights(r3, 0.5f);
    ASSERT_EQ(w3.shape(), (Shape{4, 3, 2, 3}));
    EXPECT_NEAR(edge_fraction(w3), 24.0 / 72.0, 1e-12);  // every z difference (2 planes, periodic) is an edge
}

TEST(AnatomicalEdgeWeights, RefusesABadReferenceOrThreshold) {
    RArray r = RArray::host({4, 4});
    for (size_t i = 0; i < 16; ++i) r.data()[i] = float(i);
    EXPECT_THROW(anatomical_edge_weights(r, 0.f), std::invalid_argument);
    EXPECT_THROW(anatomical_edge_weights(r, 1.f), std::invalid_argument);
    EXPECT_THROW(anatomical_edge_weights(RArray::host({16}), 0.1f), std::invalid_argument);
    r.data()[5] = std::nanf("");
    try {
        anatomical_edge_weights(r, 0.1f);
        FAIL() << "a NaN reference was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("element 5"), std::string::npos) << e.what();
    }
    for (size_t i = 0; i < 16; ++i) r.data()[i] = 0.f;
    EXPECT_THROW(anatomical_edge_weights(r, 0.1f), std::invalid_argument);  // no anatomy
}

// The server's precompute cache (gadgets/precompute_cache.h): computes a key once, charges what it keeps
// to its budget (and the server's above it), drops the least recently used entry when full, returns
// without keeping what cannot fit, and reads persistent entries back in a new instance, recomputing a
// file that does not check out.
CArray filled(size_t n, float v) {
    CArray a = CArray::host({n});
    for (size_t i = 0; i < n; ++i) a.data()[i] = cfloat(v, float(i));
    return a;
}

TEST(PrecomputeCache, ComputesOnceChargesItsBudgetAndEvictsTheOldest) {
    auto server = std::make_shared<MemoryBudget>("server", MemoryBudget::kUnlimited);
    PrecomputeCache::Options o;
    o.memory_limit = 2 * 1000 * sizeof(cfloat) + 100;  // room for two entries of 1000
    PrecomputeCache cache(o, server);
    int computed = 0;
    auto make = [&](float v) {
        return [&computed, v] {
            ++computed;
            return filled(1000, v);
        };
    };
    const auto a1 = cache.get("a", false, make(1));
    const auto a2 = cache.get("a", false, make(1));
    EXPECT_EQ(a1.source, PrecomputeCache::Source::Computed);
    EXPECT_EQ(a2.source, PrecomputeCache::Source::Memory);
    EXPECT_EQ(a1.value, a2.value);
    EXPECT_EQ(computed, 1);
    EXPECT_EQ(server->in_use(), 1000 * sizeof(cfloat));
    cache.get("b", false, make(2));
    cache.get("a", false, make(1));  // a is now the most recent
    cache.get("c", false, make(3));  // evicts b
    EXPECT_TRUE(cache.contains("a", false));
    EXPECT_FALSE(cache.contains("b", false));
    EXPECT_EQ(cache.stats().evicted, 1u);
    EXPECT_EQ(cache.stats().entries, 2u);
    EXPECT_EQ(cache.get("c", false, make(3)).value->data()[7], cfloat(3.f, 7.f));
    EXPECT_EQ(computed, 3);

    PrecomputeCache tiny({100, "", 0}, server);  // nothing fits: returned, never kept
    const uint64_t before = server->in_use();
    EXPECT_EQ(tiny.get("x", false, make(4)).source, PrecomputeCache::Source::Computed);
    EXPECT_EQ(tiny.get("x", false, make(4)).source, PrecomputeCache::Source::Computed);
    EXPECT_EQ(server->in_use(), before);
}

TEST(PrecomputeCache, PersistentEntriesOutliveTheInstanceAndBadFilesAreRecomputed) {
    namespace fs = std::filesystem;
    const std::string dir = ::testing::TempDir() + "larmor-pc-" + std::to_string(::getpid());
    PrecomputeCache::Options o;
    o.directory = dir;
    {
        PrecomputeCache c(o);
        c.get("q1", true, [] { return filled(64, 5); });
        c.get("memory only", false, [] { return filled(64, 6); });
    }
    size_t files = 0;
    fs::path file;
    for (const auto& e : fs::directory_iterator(dir)) {
        ++files;
        file = e.path();
    }
    EXPECT_EQ(files, 1u);  // the persistent entry only
    {
        PrecomputeCache c(o);
        EXPECT_TRUE(c.contains("q1", true));
        EXPECT_FALSE(c.contains("memory only", true));
        const auto e = c.get("q1", true, [] { return filled(64, 0); });
        EXPECT_EQ(e.source, PrecomputeCache::Source::Disk);
        EXPECT_EQ(e.value->data()[9], cfloat(5.f, 9.f));
    }
    {
        std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(-12, std::ios::end);  // a data byte: the checksum no longer matches
        f.put('\x7f');
    }
    {
        PrecomputeCache c(o);
        const auto e = c.get("q1", true, [] { return filled(64, 5); });
        EXPECT_EQ(e.source, PrecomputeCache::Source::Computed);
    }
    {
        PrecomputeCache c(o);  // the recomputed entry was written back
        EXPECT_EQ(c.get("q1", true, [] { return filled(64, 0); }).source, PrecomputeCache::Source::Disk);
    }
    // A disk limit of about one file keeps the newest only.
    o.disk_limit = fs::file_size(file) + 16;
    {
        PrecomputeCache c(o);
        c.get("q2", true, [] { return filled(64, 7); });
    }
    files = 0;
    for (const auto& e : fs::directory_iterator(dir)) files += e.path().extension() == ".larmor-pc";
    EXPECT_EQ(files, 1u);
    EXPECT_TRUE(PrecomputeCache(o).contains("q2", true));
    fs::remove_all(dir);
}

}  // namespace
}  // namespace larmor
