// The exact non-uniform DFT (core/linops/nudft.h) and the Toeplitz form of F^H W F
// (core/linops/toeplitz.h), on every backend, against an independent double-precision reference: the
// sums written out term by term (each factor a std::polar of the full phase, no tables, no rotations),
// with the box basis as a product of sincs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "core/linops/algebra.h"
#include "core/linops/diag.h"
#include "core/linops/nudft.h"
#include "core/linops/nudft_kernels.h"
#include "core/linops/nufft.h"
#include "core/linops/toeplitz.h"
#include "tests/support/backends.h"
#include "tests/support/operator_checks.h"
#include "tests/support/reference_dft.h"

namespace larmor {
namespace {

using test::cdouble;

const double kPi = std::acos(-1.0);

class Nudft : public test::BackendTest {};
LARMOR_INSTANTIATE_BACKEND_TEST(Nudft);

// Uniform random points in [-reach N_a/2, reach N_a/2] per axis (reach > 1 puts some beyond the edge
// of k-space, which the exact DFT must take as they are).
RArray random_points(const Shape& image, size_t m, unsigned seed, double reach = 1.0) {
    const int d = image.rank();
    RArray k = RArray::host({size_t(d), m});
    std::mt19937 gen(seed);
    for (size_t i = 0; i < m; ++i)
        for (int a = 0; a < d; ++a) {
            const double h = reach * double(image[a]) / 2;
            k.data()[i * size_t(d) + size_t(a)] = float(std::uniform_real_distribution<double>(-h, h)(gen));
        }
    return k;
}

// y[m, b] = N^-1/2 phi(k_m) sum_n x[n, b] exp(-2 pi i sum_a k_a (n_a - N_a/2) / N_a), and its adjoint.
struct Reference {
    Shape image;
    size_t batch, m, n;
    std::vector<cdouble> e;  // e[i * n + v]: the full factor of point i and voxel v

    Reference(const Shape& img, size_t b, const RArray& k, VoxelBasis basis)
        : image(img), batch(b), m(k.shape()[1]), n(img.size()), e(m * n) {
        const int d = img.rank();
        for (size_t i = 0; i < m; ++i) {
            double phi = 1.0;
            for (int a = 0; a < d; ++a) {
                const double u = double(k.data()[i * size_t(d) + size_t(a)]) / double(img[a]);
                if (basis == VoxelBasis::Box && u != 0.0) phi *= std::sin(kPi * u) / (kPi * u);
            }
            for (size_t v = 0; v < n; ++v) {
                double phase = 0.0;
                size_t r = v;
                for (int a = 0; a < d; ++a) {
                    const long long na = (long long)(r % img[a]), big = (long long)img[a];
                    r /= img[a];
                    phase += double(k.data()[i * size_t(d) + size_t(a)]) * double(na - big / 2) / double(big);
                }
                e[i * n + v] = std::polar(phi / std::sqrt(double(n)), -2 * kPi * phase);
            }
        }
    }
    std::vector<cdouble> forward(const std::vector<cdouble>& x) const {
        std::vector<cdouble> y(m * batch);
        for (size_t b = 0; b < batch; ++b)
            for (size_t i = 0; i < m; ++i) {
                cdouble s = 0;
                for (size_t v = 0; v < n; ++v) s += e[i * n + v] * x[b * n + v];
                y[b * m + i] = s;
            }
        return y;
    }
    std::vector<cdouble> adjoint(const std::vector<cdouble>& y) const {
        std::vector<cdouble> x(n * batch);
        for (size_t b = 0; b < batch; ++b)
            for (size_t i = 0; i < m; ++i)
                for (size_t v = 0; v < n; ++v) x[b * n + v] += std::conj(e[i * n + v]) * y[b * m + i];
        return x;
    }
};

struct Case {
    Shape image;
    size_t batch, points;
    double reach;
};

// 1D, 2D and 3D, batch 1 and 3, powers of two and not, points within and beyond the edge, and a
// 64 x 64 image whose far voxels have phases of up to 32 turns (where a plain float phase loses 1e-5).
const Case kCases[] = {
    {{40}, 1, 90, 1.0},  {{16, 12}, 3, 400, 1.0}, {{60, 50}, 1, 700, 1.3},
    {{8, 6, 10}, 2, 300, 1.0}, {{64, 64}, 1, 2500, 1.0}, {{9, 16, 7}, 1, 500, 1.2},
};

TEST_P(Nudft, MatchesTheDoublePrecisionSums) {
    for (const Case& c : kCases)
        for (VoxelBasis basis : {VoxelBasis::Dirac, VoxelBasis::Box}) {
            const RArray k = random_points(c.image, c.points, 5);
            const Reference ref(c.image, c.batch, k, basis);
            for (bool accurate : {true, false}) {
                auto op = nudft(be, c.image, c.batch, k, {basis, accurate});
                const CArray x = test::random_on(*be, op->ishape(), 3), y = test::random_on(*be, op->oshape(), 4);
                const double ef = test::relative_error(test::apply_forward(*op, x), ref.forward(test::download(*be, x)));
                const double ea = test::relative_error(test::apply_adjoint(*op, y), ref.adjoint(test::download(*be, y)));
                // The CPU tabulates its factors in double either way; the device's fast sincos
                // (the default) is allowed 1e-4, the accurate one 1e-5 (issue 20).
                const double tol = (be->device() == Device::Cpu || accurate) ? 1e-5 : 1e-4;
                const std::string what = c.image.str() + " batch " + std::to_string(c.batch) + ", " +
                                         std::to_string(c.points) + " points, basis " + voxel_basis_name(basis) +
                                         (accurate ? ", accurate" : ", fast") + " sincos";
                EXPECT_LE(ef, tol) << "forward, " << what;
                EXPECT_LE(ea, tol) << "adjoint (FHd), " << what;
                std::printf("  %-48s forward %.2e  adjoint %.2e\n", what.c_str(), ef, ea);
            }
        }
}

TEST_P(Nudft, AdjointIdentityHolds) {
    for (VoxelBasis basis : {VoxelBasis::Dirac, VoxelBasis::Box}) {
        auto op = nudft(be, {20, 14}, 2, random_points({20, 14}, 350, 8), {basis, false});
        test::expect_adjoint(*op, 1e-5);
        auto op3 = nudft(be, {6, 8, 5}, 1, random_points({6, 8, 5}, 200, 9), {basis, true});
        test::expect_adjoint(*op3, 1e-5);
    }
}

// With the Dirac basis the NUDFT is what the NUFFT approximates: at the NUFFT's tightest tolerance the
// two agree to that tolerance, which also pins the conventions (sign, centre, normalisation) to each other.
TEST_P(Nudft, DiracBasisIsWhatTheNufftApproximates) {
    for (const Shape& image : {Shape{32, 24}, Shape{12, 10, 8}}) {
        const RArray k = random_points(image, 600, 12);
        auto exact = nudft(be, image, 2, k, {VoxelBasis::Dirac, true});
        NufftOptions no;
        no.tolerance = 1e-6;
        auto approx = Nufft::create(be, image, 2, k, no);
        const CArray x = test::random_on(*be, exact->ishape(), 1), y = test::random_on(*be, exact->oshape(), 2);
        EXPECT_LE(test::relative_error(test::apply_forward(*approx, x), test::apply_forward(*exact, x)), 1e-5)
            << image.str();
        EXPECT_LE(test::relative_error(test::apply_adjoint(*approx, y), test::apply_adjoint(*exact, y)), 1e-5)
            << image.str();
    }
}

TEST_P(Nudft, RefusesNonFiniteCoordinates) {
    RArray k = random_points({8, 8}, 10, 1);
    k.data()[2 * 7 + 1] = std::nanf("");
    try {
        nudft(be, {8, 8}, 1, k);
        FAIL() << "a NaN coordinate was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("point 7"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("axis 1"), std::string::npos) << e.what();
    }
}

TEST_P(Nudft, CudaMatchesCpu) {
    const RArray k = random_points({24, 18}, 500, 4), k3 = random_points({10, 8, 6}, 300, 5);
    test::expect_same_on_cpu(be, [&](std::shared_ptr<Backend> b) { return nudft(b, {24, 18}, 2, k, {VoxelBasis::Box, true}); });
    test::expect_same_on_cpu(be, [&](std::shared_ptr<Backend> b) { return nudft(b, {10, 8, 6}, 1, k3, {VoxelBasis::Dirac, true}); });
}

// Every launch shape the tuning run times (cuda/nudft.cu) gives the raw sums of the default one: the
// tuning changes the speed, never the image. Extents that no shape divides, batch 2, sample counts that
// split over blocks and that do not.
TEST(NudftLaunch, EveryCompiledShapeGivesTheDefaultsSums) {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
    auto gpu = make_cuda_backend();
    for (const Shape& image : {Shape{37, 21}, Shape{11, 9, 13}}) {
        for (const size_t m : {size_t(70), size_t(9000)}) {
            NudftGeometry g;
            g.dims = image.rank();
            for (int a = 0; a < g.dims; ++a) g.extent[a] = g.image[a] = image[a];
            g.batch = 2;
            g.points = m;
            const RArray k = gpu->to_device(random_points(image, m, 11));
            CArray h = CArray::host({m, 2});
            std::mt19937 gen(2);
            std::normal_distribution<float> nd;
            for (size_t i = 0; i < h.size(); ++i) h.data()[i] = cfloat(nd(gen), nd(gen));
            const CArray d = gpu->to_device(h);
            CArray ref = gpu->empty({g.voxels(), 2});
            cuda::nudft_adjoint(*gpu, k, d, ref, g);
            const CArray rh = gpu->to_host(ref);
            for (const auto& l : cuda::nudft_adjoint_launches()) {
                CArray x = gpu->empty({g.voxels(), 2});
                cuda::nudft_adjoint(*gpu, k, d, x, g, l);
                EXPECT_LE(test::relative_error(gpu->to_host(x), rh), 2e-6)
                    << image.str() << ", " << m << " points, " << l.rows << " threads x " << l.voxels << " voxels";
            }
        }
    }
    NudftGeometry g;
    g.dims = 2;
    g.extent[0] = g.extent[1] = g.image[0] = g.image[1] = 4;
    g.points = 1;
    g.accurate = true;
    CArray x = gpu->empty({16, 1});
    EXPECT_THROW(cuda::nudft_adjoint(*gpu, gpu->to_device(random_points({4, 4}, 1, 1)), gpu->zeros({1, 1}), x, g, {64, 4}),
                 std::invalid_argument);  // accurate sines: the default shape only
}

// Positive weights of a density-compensation-like spread.
RArray random_weights(size_t m, unsigned seed) {
    RArray w = RArray::host({m});
    std::mt19937 gen(seed);
    for (size_t i = 0; i < m; ++i) w.data()[i] = std::uniform_real_distribution<float>(0.1f, 2.f)(gen);
    return w;
}

// F^H W F by the explicit pair: normal of W^1/2 F, applied as F^H (W (F x)).
LinOp explicit_normal(const std::shared_ptr<Backend>& be, const Shape& image, size_t batch, const RArray& k,
                      const RArray& w, VoxelBasis basis) {
    auto f = nudft(be, image, batch, k, {basis, true});
    RArray sw = RArray::host({w.size()});
    for (size_t i = 0; i < w.size(); ++i) sw.data()[i] = std::sqrt(w.data()[i]);
    return compose(diag(be, f->oshape(), be->to_device(sw)), f);
}

TEST_P(Nudft, ToeplitzEqualsTheExplicitNormal) {
    const struct {
        Shape image;
        size_t batch;
        VoxelBasis basis;
        ToeplitzOptions::Method method;
    } cases[] = {
        {{24, 20}, 2, VoxelBasis::Box, ToeplitzOptions::Method::Exact},
        {{24, 20}, 1, VoxelBasis::Dirac, ToeplitzOptions::Method::Nufft},
        {{10, 8, 6}, 1, VoxelBasis::Box, ToeplitzOptions::Method::Exact},
        {{10, 8, 6}, 2, VoxelBasis::Box, ToeplitzOptions::Method::Nufft},
        {{33}, 1, VoxelBasis::Dirac, ToeplitzOptions::Method::Exact},
    };
    for (const auto& c : cases) {
        const RArray k = random_points(c.image, 700, 21), w = random_weights(700, 22);
        ToeplitzOptions to;
        to.basis = c.basis;
        to.method = c.method;
        auto t = toeplitz_normal(be, c.image, c.batch, toeplitz_spectrum(be, c.image, k, w, to));
        auto e = explicit_normal(be, c.image, c.batch, k, w, c.basis);
        const CArray x = test::random_on(*be, t->ishape(), 5);
        const double err = test::relative_error(test::apply_forward(*t, x), test::apply_normal(*e, x));
        EXPECT_LE(err, 1e-4) << c.image.str() << " batch " << c.batch << " basis " << voxel_basis_name(c.basis)
                             << (c.method == ToeplitzOptions::Method::Exact ? " exact Q" : " NUFFT Q");
        std::printf("  Toeplitz %-12s %s Q: %.2e\n", c.image.str().c_str(),
                    c.method == ToeplitzOptions::Method::Exact ? "exact" : "NUFFT", err);
        test::expect_adjoint(*t, 1e-5);
    }
}

TEST_P(Nudft, ToeplitzCudaMatchesCpu) {
    const RArray k = random_points({20, 16}, 400, 3), w = random_weights(400, 4);
    test::expect_same_on_cpu(be, [&](std::shared_ptr<Backend> b) {
        ToeplitzOptions to;
        to.basis = VoxelBasis::Box;
        to.accurate_sincos = true;
        return toeplitz_normal(b, {20, 16}, 2, toeplitz_spectrum(b, {20, 16}, k, w, to));
    });
}

TEST_P(Nudft, ToeplitzRefusesAWrongSpectrum) {
    const RArray k = random_points({8, 8}, 20, 3);
    CArray s = toeplitz_spectrum(be, {8, 8}, k, RArray());
    EXPECT_THROW(toeplitz_normal(be, {8, 6}, 1, s), std::invalid_argument);
    EXPECT_THROW(toeplitz_spectrum(be, {8, 8}, k, random_weights(19, 1)), std::invalid_argument);
}

}  // namespace
}  // namespace larmor
