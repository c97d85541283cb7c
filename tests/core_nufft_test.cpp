// The NUFFT operator (core/linops/nufft.h) on every backend: against the exact non-uniform DFT in
// double precision (direct sums, written here), the adjoint identity of the operator and of its
// interpolation(), set_points against a fresh plan, the refusal of bad input, the pruned 3D grid FFT
// against the unpruned one, and CUDA against the CPU twin.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/linops/nufft.h"
#include "core/linops/nufft_kernels.h"
#include "tests/support/backends.h"
#include "tests/support/operator_checks.h"
#include "tests/support/reference_dft.h"

namespace larmor {
namespace {

using test::cdouble;

class NufftTest : public test::BackendTest {};
LARMOR_INSTANTIATE_BACKEND_TEST(NufftTest);

const double kPi = std::acos(-1.0);

// Uniform random points in [-N_a/2, N_a/2] per axis, with the corners +-N_a/2 among them.
RArray random_points(const Shape& image, size_t M, unsigned seed) {
    const int d = image.rank();
    RArray k = RArray::host({size_t(d), M});
    std::mt19937 gen(seed);
    for (size_t m = 0; m < M; ++m)
        for (int a = 0; a < d; ++a) {
            const double h = double(image[a]) / 2;
            std::uniform_real_distribution<double> u(-h, h);
            double v = u(gen);
            if (m == 0) v = -h;
            if (m == 1) v = h;
            k.data()[m * size_t(d) + size_t(a)] = float(v);
        }
    return k;
}

// Radial spokes through the centre (2D: in-plane angles; 3D: spokes on a spiral over the sphere;
// 1D: lines along the axis), samples from -N/2 to +N/2 inclusive along each axis's half-width.
RArray radial_points(const Shape& image, size_t spokes, size_t samples) {
    const int d = image.rank();
    RArray k = RArray::host({size_t(d), spokes * samples});
    for (size_t s = 0; s < spokes; ++s) {
        double dir[3] = {1, 0, 0};
        if (d == 2) {
            const double th = kPi * double(s) / double(spokes);
            dir[0] = std::cos(th);
            dir[1] = std::sin(th);
        } else if (d == 3) {
            const double z = 1.0 - 2.0 * (double(s) + 0.5) / double(spokes), r = std::sqrt(1 - z * z);
            const double ph = double(s) * kPi * (3.0 - std::sqrt(5.0));
            dir[0] = s == 0 ? 1.0 : r * std::cos(ph);
            dir[1] = s == 0 ? 0.0 : r * std::sin(ph);
            dir[2] = s == 0 ? 0.0 : z;
        }
        for (size_t i = 0; i < samples; ++i) {
            const double r = -1.0 + 2.0 * double(i) / double(samples - 1);
            for (int a = 0; a < d; ++a)
                k.data()[(s * samples + i) * size_t(d) + size_t(a)] = float(r * dir[a] * double(image[a]) / 2);
        }
    }
    return k;
}

// The exact NUDFT, double precision: forward y[m, b] = N^-1/2 sum_n x[n, b] e^{-2 pi i k.(n - N/2)/N},
// adjoint its conjugate transpose. The float coordinates are read as given.
struct Nudft {
    Shape image;
    size_t batch, M, N;
    std::vector<cdouble> e;  // e[m * N + n]

    Nudft(const Shape& img, size_t b, const RArray& k) : image(img), batch(b), M(k.shape()[1]), N(img.size()) {
        const int d = img.rank();
        e.resize(M * N);
        for (size_t m = 0; m < M; ++m)
            for (size_t n = 0; n < N; ++n) {
                double ph = 0;
                size_t r = n;
                for (int a = 0; a < d; ++a) {
                    const long long Na = (long long)img[a], na = (long long)(r % img[a]);
                    r /= img[a];
                    ph += double(k.data()[m * size_t(d) + size_t(a)]) * double(na - Na / 2) / double(Na);
                }
                e[m * N + n] = std::polar(1.0 / std::sqrt(double(N)), -2 * kPi * ph);
            }
    }
    std::vector<cdouble> forward(const std::vector<cdouble>& x) const {
        std::vector<cdouble> y(M * batch);
        for (size_t b = 0; b < batch; ++b)
            for (size_t m = 0; m < M; ++m) {
                cdouble s = 0;
                for (size_t n = 0; n < N; ++n) s += e[m * N + n] * x[b * N + n];
                y[b * M + m] = s;
            }
        return y;
    }
    std::vector<cdouble> adjoint(const std::vector<cdouble>& y) const {
        std::vector<cdouble> x(N * batch);
        for (size_t b = 0; b < batch; ++b)
            for (size_t m = 0; m < M; ++m)
                for (size_t n = 0; n < N; ++n) x[b * N + n] += std::conj(e[m * N + n]) * y[b * M + m];
        return x;
    }
};

struct Errors {
    double forward, adjoint;
};

Errors nudft_errors(const std::shared_ptr<Backend>& be, const Shape& image, size_t batch, const RArray& k,
                    const NufftOptions& opts) {
    auto op = Nufft::create(be, image, batch, k, opts);
    const Nudft ref(image, batch, k);
    const CArray x = test::random_on(*be, op->ishape(), 3), y = test::random_on(*be, op->oshape(), 4);
    Errors e;
    e.forward = test::relative_error(test::apply_forward(*op, x), ref.forward(test::download(*be, x)));
    e.adjoint = test::relative_error(test::apply_adjoint(*op, y), ref.adjoint(test::download(*be, y)));
    return e;
}

// Forward and adjoint against the NUDFT at tolerances 1e-3, 1e-5 and 1e-6, in 1D, 2D and 3D, batch 1 and 3,
// on random points and radial spokes (both with points at +-N/2), on a grid oversampled by sigma.
void expect_matches_nudft(const std::shared_ptr<Backend>& be, double sigma) {
    const struct {
        Shape image;
        size_t batch;
        bool radial;
    } cases[] = {{{32}, 1, false},      {{32}, 3, true},       {{24, 20}, 1, false},   {{24, 20}, 3, true},
                 {{15, 9}, 2, false},   {{12, 10, 8}, 1, true}, {{12, 10, 8}, 3, false},
                 {{9, 8, 7}, 2, false}};  // odd sizes too (an odd z: the pruned 3D FFT's two runs differ)
    for (double tol : {1e-3, 1e-5, 1e-6})
        for (const auto& c : cases) {
            const size_t d = size_t(c.image.rank());
            const RArray k = c.radial ? radial_points(c.image, d == 1 ? 3 : d == 2 ? 16 : 24, d == 3 ? 21 : 33)
                                      : random_points(c.image, d == 1 ? 300 : d == 2 ? 800 : 600, 17);
            const Errors e = nudft_errors(be, c.image, c.batch, k, {tol, sigma});
            // At sigma = 1.25 the deapodisation divides the image edges by psi_hat(0.4 N / n), a few
            // 1e-3 of its centre value at the kernel of tolerance 1e-6, which lifts single
            // precision's rounding (FFT, accumulation) to a floor of 1e-5 .. 1.5e-4 whatever the
            // kernel (measured: wider kernels, other beta and double-precision kernel values do
            // not lower it). So that case is held to 3e-4, still 3x below the 1e-3 kernel's.
            const double bound = tol >= 1e-3 ? tol : sigma >= 2 ? 1e-5 : 3e-4;
            std::printf("nufft %s x%zu %s sigma %.2f tol %.0e: forward %.2e adjoint %.2e\n", c.image.str().c_str(),
                        c.batch, c.radial ? "radial" : "random", sigma, tol, e.forward, e.adjoint);
            EXPECT_LE(e.forward, bound) << c.image.str() << " sigma " << sigma << " tol " << tol;
            EXPECT_LE(e.adjoint, bound) << c.image.str() << " sigma " << sigma << " tol " << tol;
        }
}

TEST_P(NufftTest, MatchesExactNudftSigma2) { expect_matches_nudft(be, 2.0); }

TEST_P(NufftTest, MatchesExactNudftSigma125) { expect_matches_nudft(be, 1.25); }

TEST_P(NufftTest, GridIsOversampledAndFftFriendly) {
    for (double sigma : {1.25, 1.6, 2.0}) {
        const Shape image{24, 20, 9};
        auto op = Nufft::create(be, image, 2, random_points(image, 50, 5), {1e-4, sigma});
        const NufftGrid& g = op->grid();
        EXPECT_EQ(g.dims, 3);
        EXPECT_EQ(g.batch, 2);
        EXPECT_EQ(g.points, 50);
        EXPECT_EQ(op->points(), 50u);
        for (int a = 0; a < 3; ++a) {
            EXPECT_GE(double(g.n[a]), sigma * double(image[a]) - 1e-9);
            EXPECT_EQ(g.n[a] % 2, 0);
            long long r = g.n[a];
            for (long long p : {2, 3, 5})
                while (r % p == 0) r /= p;
            EXPECT_EQ(r, 1) << g.n[a];
        }
    }
}

TEST_P(NufftTest, AdjointIdentity) {
    for (const Shape& image : {Shape{40}, Shape{24, 20}, Shape{12, 10, 8}}) {
        auto make = [&](std::shared_ptr<Backend> b) -> LinOp {
            return Nufft::create(b, image, 3, radial_points(image, 16, 33), {1e-4, 1.5});
        };
        auto op = make(be);
        test::expect_adjoint(*op);
        test::expect_same_on_cpu(be, make, 1e-4);
    }
}

// The batch is a set of independent transforms: a plan of 5 (a batch the kernels take at run time, not
// as a compile-time constant) gives each transform what a plan of 1 gives it alone.
TEST_P(NufftTest, BatchesAreIndependentTransforms) {
    for (const Shape& image : {Shape{24, 20}, Shape{12, 10, 8}}) {
        const RArray k = random_points(image, 400, 12);
        auto five = Nufft::create(be, image, 5, k, {1e-4, 2.0});
        auto one = Nufft::create(be, image, 1, k, {1e-4, 2.0});
        const CArray x = test::random_on(*be, five->ishape(), 13), y = test::random_on(*be, five->oshape(), 14);
        const auto fx = test::apply_forward(*five, x), ay = test::apply_adjoint(*five, y);
        const size_t N = image.size(), M = 400;
        for (size_t b = 0; b < 5; ++b) {
            const auto f1 = test::apply_forward(*one, x.view(b * N, one->ishape()));
            const auto a1 = test::apply_adjoint(*one, y.view(b * M, one->oshape()));
            EXPECT_LE(test::relative_error(std::vector<cdouble>(fx.begin() + long(b * M), fx.begin() + long((b + 1) * M)), f1),
                      1e-6) << image.str() << " transform " << b;
            EXPECT_LE(test::relative_error(std::vector<cdouble>(ay.begin() + long(b * N), ay.begin() + long((b + 1) * N)), a1),
                      1e-6) << image.str() << " transform " << b;
        }
    }
}

// The grid FFT a 3D plan prunes along z (core/linops/nufft_kernels.h: from_image, to_image) against
// the unpruned plan of the same grid: from_image on a grid that is zero outside the image's footprint
// gives the whole transform; to_image of any grid gives it on the footprint. An even and an odd image
// depth (runs of planes of equal and of different length), both directions, batch 3.
TEST_P(NufftTest, PrunedGridFftEqualsTheFullOneWhereItIsDefined) {
    for (const Shape& image : {Shape{12, 10, 8}, Shape{9, 8, 7}}) {
        auto op = Nufft::create(be, image, 3, random_points(image, 50, 3), {1e-3, 2.0});
        const NufftGrid& g = op->grid();
        auto make = [&](const Shape& im) {
            return be->device() == Device::Cpu ? cpu::nufft_grid_fft(g, im) : cuda::nufft_grid_fft(*be, g, im);
        };
        auto pruned = make(image), full = make(Shape{});
        const Shape gs{size_t(g.n[0]), size_t(g.n[1]), size_t(g.n[2]), size_t(g.batch)};
        // Whether grid point (i0, i1, i2) holds a pixel of the image (pad's layout along each axis).
        auto in_footprint = [&](long long gi, int a) {
            const long long N = static_cast<long long>(image[size_t(a)]), n = g.n[a];
            return gi < N - N / 2 || gi >= n - N / 2;
        };
        CArray h = test::random_on(*be, gs, 21);
        CArray host = be->to_host(h);
        for (long long b = 0; b < g.batch; ++b)
            for (long long i2 = 0; i2 < g.n[2]; ++i2)
                for (long long i1 = 0; i1 < g.n[1]; ++i1)
                    for (long long i0 = 0; i0 < g.n[0]; ++i0)
                        if (!in_footprint(i0, 0) || !in_footprint(i1, 1) || !in_footprint(i2, 2))
                            host.data()[i0 + g.n[0] * (i1 + g.n[1] * (i2 + g.n[2] * b))] = cfloat(0.f, 0.f);
        const CArray padded = be->to_device(host);
        for (FFTDirection dir : {FFTDirection::Forward, FFTDirection::Inverse}) {
            CArray a = be->empty(gs), r = be->empty(gs);
            be->copy(padded, a);
            be->copy(padded, r);
            pruned->from_image(a, dir);
            full->from_image(r, dir);
            EXPECT_LE(test::relative_error(test::download(*be, a), test::download(*be, r)), 1e-6) << image.str() << " from_image";

            CArray c = be->empty(gs), q = be->empty(gs);
            be->copy(h, c);
            be->copy(h, q);
            pruned->to_image(c, dir);
            full->to_image(q, dir);
            const auto cv = test::download(*be, c), qv = test::download(*be, q);
            std::vector<cdouble> cf, qf;
            for (long long b = 0; b < g.batch; ++b)
                for (long long i2 = 0; i2 < g.n[2]; ++i2)
                    for (long long i1 = 0; i1 < g.n[1]; ++i1)
                        for (long long i0 = 0; i0 < g.n[0]; ++i0)
                            if (in_footprint(i0, 0) && in_footprint(i1, 1) && in_footprint(i2, 2)) {
                                const size_t i = size_t(i0 + g.n[0] * (i1 + g.n[1] * (i2 + g.n[2] * b)));
                                cf.push_back(cv[i]);
                                qf.push_back(qv[i]);
                            }
            EXPECT_EQ(cf.size(), size_t(g.batch) * image.size());
            EXPECT_LE(test::relative_error(cf, qf), 1e-6) << image.str() << " to_image";
        }
    }
}

TEST_P(NufftTest, InterpolationIsTheConvolution) {
    const Shape image{24, 20};
    auto op = Nufft::create(be, image, 2, random_points(image, 700, 9), {1e-3, 2.0});
    LinOp c = op->interpolation();
    const NufftGrid& g = op->grid();
    EXPECT_EQ(c->ishape(), (Shape{size_t(g.n[0]), size_t(g.n[1]), 2}));
    EXPECT_EQ(c->oshape(), op->oshape());
    test::expect_adjoint(*c);
    // A single grid point's spike reaches exactly the points within half the kernel width of it,
    // with the kernel's value there.
    CArray spike = be->host_complex(c->ishape());
    const long long gx = 7, gy = 30;
    spike.data()[gx + g.n[0] * gy] = cfloat(1.f, 0.f);
    const auto y = test::apply_forward(*c, be->to_device(spike));
    const RArray k = random_points(image, 700, 9);
    for (size_t m = 0; m < 700; ++m) {
        double val = 1.0;
        const long long gg[2] = {gx, gy};
        for (int a = 0; a < 2; ++a) {
            const double n = double(g.n[a]);
            // u as the operator rounds it (to float), so only the kernel's own rounding remains
            const double u = double(float(double(k.data()[m * 2 + size_t(a)]) * n / double(image[a]) + n / 2));
            const double dist = std::remainder(double(gg[a]) - u, n);
            const double z = 2 * dist / g.width;
            val *= std::abs(z) < 1 ? std::exp(double(g.beta) * (std::sqrt(1 - z * z) - 1)) : 0.0;
        }
        EXPECT_NEAR(y[m].real(), val, 1e-5) << "point " << m;
        EXPECT_NEAR(y[m + 700].real(), 0.0, 1e-7) << "point " << m << ", second transform";
    }
}

TEST_P(NufftTest, SetPointsEqualsFreshPlan) {
    const Shape image{24, 20};
    const RArray k1 = random_points(image, 900, 1), k2 = radial_points(image, 30, 30);
    auto moved = Nufft::create(be, image, 3, k1, {1e-4, 2.0});
    moved->set_points(be->to_device(k2));  // coordinates on the device are accepted too
    auto fresh = Nufft::create(be, image, 3, k2, {1e-4, 2.0});
    const CArray x = test::random_on(*be, moved->ishape(), 5), y = test::random_on(*be, moved->oshape(), 6);
    // The CPU repeats its sums exactly; CUDA's spreading adds with atomics in whatever order the blocks
    // run, so two runs of the same plan differ by float rounding (1.4e-7 seen on an H100).
    const double same = be->device() == Device::Cpu ? 1e-7 : 1e-6;
    EXPECT_LE(test::relative_error(test::apply_forward(*moved, x), test::apply_forward(*fresh, x)), same);
    EXPECT_LE(test::relative_error(test::apply_adjoint(*moved, y), test::apply_adjoint(*fresh, y)), same);
    // And the moved plan is not the old one: the first plan's output differs.
    auto old = Nufft::create(be, image, 3, k1, {1e-4, 2.0});
    EXPECT_GT(test::relative_error(test::apply_forward(*moved, x), test::apply_forward(*old, x)), 0.1);
    EXPECT_THROW(moved->set_points(random_points(image, 899, 2)), std::invalid_argument);
}

void expect_throw_naming(const std::function<void()>& f, const std::vector<std::string>& words) {
    try {
        f();
        ADD_FAILURE() << "no exception";
    } catch (const std::invalid_argument& e) {
        const std::string msg = e.what();
        for (const auto& w : words) EXPECT_NE(msg.find(w), std::string::npos) << "'" << w << "' not in: " << msg;
    }
}

TEST_P(NufftTest, RefusesBadInput) {
    const Shape image{24, 20};
    RArray k = random_points(image, 100, 3);
    k.data()[5 * 2 + 1] = std::numeric_limits<float>::quiet_NaN();
    expect_throw_naming([&] { Nufft::create(be, image, 1, k, {}); }, {"point 5", "axis 1", "nan"});
    k = random_points(image, 100, 3);
    k.data()[7 * 2 + 0] = 12.5f;
    expect_throw_naming([&] { Nufft::create(be, image, 1, k, {}); }, {"point 7", "axis 0", "12.5"});
    k.data()[7 * 2 + 0] = -12.f;  // the edge itself is fine
    EXPECT_NO_THROW(Nufft::create(be, image, 1, k, {}));
    auto op = Nufft::create(be, image, 1, k, {});
    k.data()[9 * 2 + 1] = -10.25f;
    expect_throw_naming([&] { op->set_points(k); }, {"point 9", "axis 1", "-10.25"});
    expect_throw_naming([&] { Nufft::create(be, image, 1, random_points(Shape{24, 20, 4}, 10, 1), {}); },
                        {"[3x10]"});
    expect_throw_naming([&] { Nufft::create(be, Shape{4, 4, 4, 4}, 1, random_points(image, 10, 1), {}); },
                        {"[4x4x4x4]"});
    expect_throw_naming([&] { Nufft::create(be, image, 1, random_points(image, 10, 1), {1e-8, 2.0}); }, {"1e-08"});
    expect_throw_naming([&] { Nufft::create(be, image, 1, random_points(image, 10, 1), {1e-3, 3.0}); }, {"3"});
    expect_throw_naming([&] { Nufft::create(be, image, 0, random_points(image, 10, 1), {}); }, {"batch 0"});
}

}  // namespace
}  // namespace larmor
