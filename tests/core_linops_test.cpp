// Every operator of core/linops, on every backend: the adjoint identity, a dense double-precision
// matrix of the same operator built independently (the exact centred DFT, explicit diagonals and
// difference stencils), and CUDA against the CPU twin.
#include <gtest/gtest.h>

#include <random>

#include "core/linops/algebra.h"
#include "core/linops/diag.h"
#include "core/linops/fft_op.h"
#include "core/linops/finite_difference.h"
#include "core/linops/sampled_fft.h"
#include "core/linops/sense.h"
#include "core/iter/cg.h"
#include "tests/support/backends.h"
#include "tests/support/operator_checks.h"
#include "tests/support/reference_dft.h"

namespace larmor {
namespace {

using test::cdouble;
using test::DenseMatrix;

class Linops : public test::BackendTest {};
LARMOR_INSTANTIATE_BACKEND_TEST(Linops);

DenseMatrix dense_fft(const Shape& s, AxisMask axes, FFTDirection dir = FFTDirection::Forward) {
    return DenseMatrix::from_columns(
        s.size(), [&](const std::vector<cdouble>& e) { return test::reference_centred_dft(e, s, axes, dir); });
}

// Pointwise weights w broadcast over the trailing axes of an array of n elements.
DenseMatrix dense_diag(size_t n, const std::vector<cdouble>& w) {
    DenseMatrix d(n, n);
    for (size_t i = 0; i < n; ++i) d.at(i, i) = w[i % w.size()];
    return d;
}

RArray random_mask(const Shape& s, unsigned seed) {
    RArray m = RArray::host(s);
    std::mt19937 gen(seed);
    for (size_t i = 0; i < m.size(); ++i) m.data()[i] = (gen() % 3 == 0) ? 1.f : 0.f;
    m.data()[0] = 1.f;
    return m;
}

RArray random_real(const Shape& s, unsigned seed) {
    RArray w = RArray::host(s);
    std::mt19937 gen(seed);
    std::normal_distribution<float> nd;
    for (size_t i = 0; i < w.size(); ++i) w.data()[i] = nd(gen);
    return w;
}

std::vector<cdouble> as_double(const RArray& w) { return std::vector<cdouble>(w.data(), w.data() + w.size()); }

DenseMatrix dense_sense(const CArray& maps) {
    const Shape& s = maps.shape();
    const size_t coils = s[s.rank() - 1], pixels = maps.size() / coils;
    DenseMatrix d(maps.size(), pixels);
    for (size_t c = 0; c < coils; ++c)
        for (size_t p = 0; p < pixels; ++p) d.at(c * pixels + p, p) = cdouble(maps.data()[c * pixels + p]);
    return d;
}

DenseMatrix dense_finite_difference(const Shape& s, const std::vector<int>& axes) {
    const size_t n = s.size();
    DenseMatrix d(n * axes.size(), n);
    for (size_t k = 0; k < axes.size(); ++k) {
        const size_t len = s[axes[k]], stride = s.stride(axes[k]);
        for (size_t i = 0; i < n; ++i) {
            const size_t c = (i / stride) % len;
            const size_t next = c + 1 == len ? i - c * stride : i + stride;
            d.at(k * n + i, next) += 1.0;
            d.at(k * n + i, i) -= 1.0;
        }
    }
    return d;
}

TEST_P(Linops, FftMatchesExactDft) {
    const struct {
        Shape s;
        AxisMask axes;
    } cases[] = {{{8, 6, 3}, 3u}, {{7, 5, 2}, 3u}, {{6, 4, 5}, 7u}, {{4, 6, 3}, 2u}};
    for (const auto& c : cases) {
        LinOp f = fft_op(be, c.s, c.axes);
        test::expect_adjoint(*f);
        test::expect_matches(*f, dense_fft(c.s, c.axes));
        test::expect_same_on_cpu(be, [&](std::shared_ptr<Backend> b) { return fft_op(b, c.s, c.axes); });
    }
}

TEST_P(Linops, DiagonalsMatchDense) {
    const Shape s{6, 5, 3};
    const CArray cw = test::random_array({6, 5}, 3);
    const RArray rw = random_real({6, 5, 3}, 4);
    const RArray mask = random_mask({6, 5}, 5);
    LinOp dc = diag(be, s, cw), dr = diag(be, s, rw), m = sampling_mask(be, s, mask);
    for (LinOp op : {dc, dr, m}) test::expect_adjoint(*op);
    test::expect_matches(*dc, dense_diag(s.size(), test::to_double(cw)));
    test::expect_matches(*dr, dense_diag(s.size(), as_double(rw)));
    test::expect_matches(*m, dense_diag(s.size(), as_double(mask)));
    test::expect_same_on_cpu(be, [&](std::shared_ptr<Backend> b) { return diag(b, s, cw); });
    test::expect_same_on_cpu(be, [&](std::shared_ptr<Backend> b) { return diag(b, s, rw); });
    test::expect_same_on_cpu(be, [&](std::shared_ptr<Backend> b) { return sampling_mask(b, s, mask); });
}

TEST_P(Linops, SamplingMaskRefusesNonBinaryValues) {
    RArray mask = RArray::host({4, 4});
    mask.data()[5] = 0.5f;
    EXPECT_THROW(sampling_mask(be, {4, 4, 2}, mask), std::invalid_argument);
    EXPECT_THROW(diag(be, {4, 4, 2}, RArray::host({4, 3})), std::invalid_argument);
}

TEST_P(Linops, SenseMatchesDense) {
    for (const Shape& ms : {Shape{6, 5, 4}, Shape{4, 3, 2, 3}}) {
        const CArray maps = test::random_array(ms, 8);
        LinOp s = sense(be, maps);
        test::expect_adjoint(*s);
        test::expect_matches(*s, dense_sense(maps));
        test::expect_same_on_cpu(be, [&](std::shared_ptr<Backend> b) { return sense(b, maps); });
    }
}

TEST_P(Linops, FiniteDifferenceMatchesDense) {
    const struct {
        Shape s;
        std::vector<int> axes;
    } cases[] = {{{6, 5}, {0, 1}}, {{4, 3, 5}, {0, 1, 2}}, {{5, 4, 3}, {1}}, {{7}, {0}}};
    for (const auto& c : cases) {
        LinOp d = finite_difference(be, c.s, c.axes);
        test::expect_adjoint(*d);
        test::expect_matches(*d, dense_finite_difference(c.s, c.axes));
        test::expect_same_on_cpu(be, [&](std::shared_ptr<Backend> b) { return finite_difference(b, c.s, c.axes); });
    }
    EXPECT_THROW(finite_difference(be, {4, 4}, {2}), std::invalid_argument);
    EXPECT_THROW(finite_difference(be, {4, 4}, {0, 0}), std::invalid_argument);
}

// The SENSE encoding E = M F S of a Cartesian acquisition, the operator CG-SENSE inverts: its dense
// matrix is the product of the parts' dense matrices, and normal() = S^H (F^H M F) S through the
// parts' overrides matches E^H E.
TEST_P(Linops, CartesianSenseEncodingComposes) {
    const Shape img{6, 4}, ks{6, 4, 3};
    const CArray maps = test::random_array(ks, 31);
    const RArray mask = random_mask({6, 4}, 32);
    auto make = [&](std::shared_ptr<Backend> b) {
        return compose({sampling_mask(b, ks, mask), fft_op(b, ks, 3u), sense(b, maps)});
    };
    LinOp e = make(be);
    const DenseMatrix de = dense_diag(ks.size(), as_double(mask)) * dense_fft(ks, 3u) * dense_sense(maps);
    test::expect_adjoint(*e);
    test::expect_matches(*e, de);
    test::expect_same_on_cpu(be, make);
    EXPECT_EQ(e->ishape(), img);
}

// M F as one operator, whose normal transforms only along the axes the mask varies on: the same
// matrix as the pair, for masks varying along y only (Cartesian lines), along x and y, and nowhere.
TEST_P(Linops, SampledFftMatchesMaskTimesFft) {
    const Shape ks{8, 6, 3};
    RArray lines = RArray::host({8, 6}), points = random_mask({8, 6}, 51), full = RArray::host({8, 6});
    for (size_t y = 0; y < 6; ++y)
        for (size_t x = 0; x < 8; ++x) {
            lines.data()[x + 8 * y] = y % 2 == 0 || y == 3 ? 1.f : 0.f;
            full.data()[x + 8 * y] = 1.f;
        }
    EXPECT_EQ(mask_varying_axes(lines, 3u), 2u);
    EXPECT_EQ(mask_varying_axes(points, 3u), 3u);
    EXPECT_EQ(mask_varying_axes(full, 3u), 0u);
    for (const RArray* m : {&lines, &points, &full}) {
        LinOp a = sampled_fft(be, ks, 3u, *m);
        test::expect_adjoint(*a);
        test::expect_matches(*a, dense_diag(ks.size(), as_double(*m)) * dense_fft(ks, 3u));
        test::expect_same_on_cpu(be, [&](std::shared_ptr<Backend> b) { return sampled_fft(b, ks, 3u, *m); });
    }
}

TEST_P(Linops, AlgebraMatchesDense) {
    const Shape s{5, 4};
    const CArray w1 = test::random_array(s, 41), w2 = test::random_array(s, 42);
    const auto d1 = dense_diag(s.size(), test::to_double(w1)), d2 = dense_diag(s.size(), test::to_double(w2));
    const DenseMatrix df = dense_fft(s, 3u);
    LinOp a = compose(fft_op(be, s, 3u), diag(be, s, w1));  // dense: F D1
    LinOp b = diag(be, s, w2);
    const DenseMatrix da = df * d1;

    test::expect_matches(*identity(be, s), DenseMatrix::identity(s.size()));
    test::expect_matches(*sum(a, b), da + d2);
    DenseMatrix scaled = da;
    for (auto& v : scaled.a) v *= cdouble(0.5, -2.0);
    test::expect_matches(*scale(cfloat(0.5f, -2.f), a), scaled);

    // vstack: rows of A then rows of B; hstack: columns of A then columns of B.
    DenseMatrix dv(2 * s.size(), s.size()), dh(s.size(), 2 * s.size());
    for (size_t r = 0; r < s.size(); ++r)
        for (size_t c = 0; c < s.size(); ++c) {
            dv.at(r, c) = da.at(r, c);
            dv.at(s.size() + r, c) = d2.at(r, c);
            dh.at(r, c) = da.at(r, c);
            dh.at(r, s.size() + c) = d2.at(r, c);
        }
    for (LinOp op : {sum(a, b), scale(cfloat(0.5f, -2.f), a), vstack({a, b}), hstack({a, b}), identity(be, s)})
        test::expect_adjoint(*op);
    test::expect_matches(*vstack({a, b}), dv);
    test::expect_matches(*hstack({a, b}), dh);

    // (A^H A + lambda I) as CG sees it.
    const DenseMatrix dt = da.adjoint() * da + [&] {
        DenseMatrix i = DenseMatrix::identity(s.size());
        for (auto& v : i.a) v *= 0.25;
        return i;
    }();
    test::expect_matches(*tikhonov_normal(a, 0.25f), dt);
}

TEST_P(Linops, MismatchedPartsAreRefusedByName) {
    LinOp f = fft_op(be, {4, 4}, 3u);
    LinOp g = fft_op(be, {4, 5}, 3u);
    try {
        compose(f, g);
        FAIL() << "compose of mismatched shapes accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("[4x5]"), std::string::npos) << e.what();
    }
    EXPECT_THROW(sum(f, g), std::invalid_argument);
    EXPECT_THROW(vstack({f, g}), std::invalid_argument);
    CArray x = be->empty({4, 5}), y = be->empty({4, 4});
    EXPECT_THROW(f->forward(x, y), std::invalid_argument);
    CArray z = be->empty({4, 4});
    EXPECT_THROW(f->forward(z, z), std::invalid_argument);  // output overlaps input
    if (be->device() == Device::Cuda) {
        CArray host = CArray::host({4, 4});
        EXPECT_THROW(f->forward(host, y), std::invalid_argument);
    }
}

}  // namespace
}  // namespace larmor
