// The regularised least-squares reconstruction of core/recon/toeplitz_cg.h on every backend: data made
// by the exact forward model from a known image are inverted back to it, the Toeplitz normal and the
// NUFFT pair give one solution, the finite-difference regulariser smooths what the identity does not,
// and bad input is refused naming the value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/linops/nudft.h"
#include "core/linops/sense.h"
#include "core/recon/toeplitz_cg.h"
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

}  // namespace
}  // namespace larmor
