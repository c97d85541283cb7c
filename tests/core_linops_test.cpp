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

// f() must throw std::invalid_argument whose message contains every one of `names` (the shapes or
// operators at fault), so that the error tells which parts disagree.
template <class F>
void expect_refused_naming(F f, const std::vector<std::string>& names) {
    try {
        f();
        ADD_FAILURE() << "accepted; expected a refusal naming " << names.front();
    } catch (const std::invalid_argument& e) {
        for (const std::string& n : names) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
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

// adjoint(A) and normal(A) against the dense A^H and A^H A, for a square A = F D (full, non-normal
// in general: complex weights) and a tall one, the coil expansion S (ishape != oshape, so the shapes
// must swap). expect_matches also checks their own normal(): A A^H for the adjoint, (A^H A)^2 for the
// normal operator.
TEST_P(Linops, AdjointAndNormalMatchDense) {
    const Shape s{5, 4}, ks{5, 4, 3};
    const CArray w = test::random_array(s, 61), maps = test::random_array(ks, 62);
    LinOp a = compose(fft_op(be, s, 3u), diag(be, s, w));
    LinOp c = sense(be, maps);
    const DenseMatrix da = dense_fft(s, 3u) * dense_diag(s.size(), test::to_double(w)), dc = dense_sense(maps);

    for (const auto& [op, d] : {std::pair<LinOp, DenseMatrix>{a, da}, std::pair<LinOp, DenseMatrix>{c, dc}}) {
        LinOp h = adjoint(op), n = normal(op);
        EXPECT_EQ(h->ishape(), op->oshape());
        EXPECT_EQ(h->oshape(), op->ishape());
        EXPECT_EQ(h->name(), "adjoint(" + op->name() + ")");
        EXPECT_EQ(n->ishape(), op->ishape());
        EXPECT_EQ(n->oshape(), op->ishape());
        EXPECT_EQ(n->name(), "normal(" + op->name() + ")");
        test::expect_adjoint(*h);
        test::expect_adjoint(*n);
        test::expect_matches(*h, d.adjoint());
        test::expect_matches(*n, d.adjoint() * d);
        // A A^H as the normal operator of A^H, and through normal() of the adjoint.
        test::expect_matches(*normal(h), d * d.adjoint());
        // The adjoint of the adjoint is A itself, not a third wrapper.
        EXPECT_EQ(adjoint(h), op);
    }
    test::expect_same_on_cpu(be, [&](std::shared_ptr<Backend> b) { return adjoint(sense(b, maps)); });
    test::expect_same_on_cpu(be, [&](std::shared_ptr<Backend> b) { return normal(sense(b, maps)); });
    EXPECT_THROW(adjoint(nullptr), std::invalid_argument);
    EXPECT_THROW(normal(nullptr), std::invalid_argument);
}

// normal(A) runs A's normal(), so an override of it is what the operator applies: with a stand-in
// N = 3 I deliberately unlike A^H A, forward, adjoint and normal of normal(A) give 3x, 3y and 9x.
TEST_P(Linops, NormalOperatorUsesTheOverride) {
    const Shape s{5, 4};
    LinOp a = diag(be, s, test::random_array(s, 63));
    LinOp n = normal(with_normal(a, scale(3.f, identity(be, s))));
    const CArray x = test::random_on(*be, s, 64);
    std::vector<cdouble> x3 = test::download(*be, x), x9 = x3;
    for (auto& v : x3) v *= 3.0;
    for (auto& v : x9) v *= 9.0;
    EXPECT_LE(test::relative_error(test::apply_forward(*n, x), x3), 1e-6);
    EXPECT_LE(test::relative_error(test::apply_adjoint(*n, x), x3), 1e-6);
    EXPECT_LE(test::relative_error(test::apply_normal(*n, x), x9), 1e-6);
}

// reshape(shape -> shape) is the identity matrix between two layouts of the same elements, and its
// forward writes into the caller's array: a view in the middle of a larger one is filled and nothing
// around it is touched (an operator that rebound y to its own storage would leave it unchanged).
TEST_P(Linops, ReshapeCopiesIntoTheCallersArray) {
    const Shape is{4, 6}, os{3, 8};
    LinOp r = reshape(be, is, os);
    EXPECT_EQ(r->ishape(), is);
    EXPECT_EQ(r->oshape(), os);
    test::expect_adjoint(*r);
    test::expect_matches(*r, DenseMatrix::identity(is.size()));
    test::expect_same_on_cpu(be, [&](std::shared_ptr<Backend> b) { return reshape(b, is, os); });

    const CArray x = test::random_on(*be, is, 65);
    CArray whole = be->zeros({60});
    CArray y = whole.view(3, os);
    const auto storage = y.storage();
    r->forward(x, y);
    EXPECT_EQ(y.storage(), storage);
    EXPECT_EQ(y.offset(), 3u);
    EXPECT_EQ(y.shape(), os);
    const auto got = test::download(*be, whole), want = test::download(*be, x);
    for (size_t i = 0; i < whole.size(); ++i)
        EXPECT_EQ(got[i], i < 3 || i >= 27 ? cdouble(0) : want[i - 3]) << "element " << i;
    CArray back = whole.view(30, is);  // the adjoint, into another view of the caller's
    r->adjoint(y, back);
    EXPECT_EQ(test::download(*be, back), want);

    expect_refused_naming([&] { reshape(be, {4, 6}, {5, 5}); }, {"[4x6]", "[5x5]"});
}

// reshape(A, ...) runs A on views of the caller's arrays: the same matrix as A (the flat order does not
// change), A's normal override passes through, and it equals the composition with two copying reshapes.
TEST_P(Linops, ReshapedOperatorMatchesDense) {
    const Shape s{5, 4}, ks{5, 4, 3};
    const CArray w = test::random_array(s, 66), maps = test::random_array(ks, 67);
    LinOp a = compose(fft_op(be, s, 3u), diag(be, s, w));
    const DenseMatrix da = dense_fft(s, 3u) * dense_diag(s.size(), test::to_double(w));
    LinOp ra = reshape(a, {20}, {2, 10});
    EXPECT_EQ(ra->ishape(), Shape({20}));
    EXPECT_EQ(ra->oshape(), Shape({2, 10}));
    test::expect_adjoint(*ra);
    test::expect_matches(*ra, da);
    test::expect_matches(*compose({reshape(be, s, {2, 10}), a, reshape(be, {20}, s)}), da);
    LinOp rc = reshape(sense(be, maps), {4, 5}, {60});  // tall
    test::expect_adjoint(*rc);
    test::expect_matches(*rc, dense_sense(maps));
    test::expect_same_on_cpu(be, [&](std::shared_ptr<Backend> b) { return reshape(sense(b, maps), {4, 5}, {60}); });

    // normal() is A's: a stand-in of 2 I survives the reshape.
    LinOp r2 = reshape(with_normal(a, scale(2.f, identity(be, s))), {20}, {20});
    const CArray x = test::random_on(*be, {20}, 68);
    std::vector<cdouble> x2 = test::download(*be, x);
    for (auto& v : x2) v *= 2.0;
    EXPECT_LE(test::relative_error(test::apply_normal(*r2, x), x2), 1e-6);

    expect_refused_naming([&] { reshape(a, {21}, {20}); }, {"[21]", "[5x4]"});
    expect_refused_naming([&] { reshape(a, {20}, {3, 7}); }, {"[3x7]", "[5x4]"});
    EXPECT_THROW(reshape(LinOp(), {20}, {20}), std::invalid_argument);
}

// with_normal(A, N): forward and adjoint are A's, normal() is N even where N is not A^H A (here 2 I,
// against A^H A = |w|^2 pointwise), and a composition that ends in it takes N: compose(with_normal(A,
// N), S).normal() = S^H N S. Told the truth (N = A^H A) it passes the ordinary checks.
TEST_P(Linops, WithNormalReplacesTheNormal) {
    const Shape s{5, 4}, ks{5, 4, 3};
    const CArray w = test::random_array(s, 71), maps = test::random_array(ks, 72);
    LinOp a = compose(fft_op(be, s, 3u), diag(be, s, w));
    const DenseMatrix da = dense_fft(s, 3u) * dense_diag(s.size(), test::to_double(w));
    LinOp two = scale(2.f, identity(be, s));
    LinOp wa = with_normal(a, two);
    EXPECT_EQ(wa->ishape(), s);
    EXPECT_EQ(wa->oshape(), s);
    EXPECT_EQ(wa->name(), "with_normal(" + a->name() + ", " + two->name() + ")");

    const CArray x = test::random_on(*be, s, 73), y = test::random_on(*be, s, 74);
    const auto xh = test::download(*be, x), yh = test::download(*be, y);
    EXPECT_LE(test::relative_error(test::apply_forward(*wa, x), da.apply(xh)), 1e-5);
    EXPECT_LE(test::relative_error(test::apply_adjoint(*wa, y), da.apply_adjoint(yh)), 1e-5);
    std::vector<cdouble> x2 = xh;
    for (auto& v : x2) v *= 2.0;
    EXPECT_LE(test::relative_error(test::apply_normal(*wa, x), x2), 1e-6);
    // The test tells the two apart: A's own normal is far from 2x.
    EXPECT_GT(test::relative_error(test::apply_normal(*a, x), x2), 0.1);

    // In a composition: A' = F D on coil images [5x4x3], then S^H (2 I) S = 2 S^H S.
    const CArray wk = test::random_array(s, 75);
    LinOp ak = compose(fft_op(be, ks, 3u), diag(be, ks, wk));
    LinOp c = compose(with_normal(ak, scale(2.f, identity(be, ks))), sense(be, maps));
    const DenseMatrix ds = dense_sense(maps);
    const DenseMatrix dak = dense_fft(ks, 3u) * dense_diag(ks.size(), test::to_double(wk));
    std::vector<cdouble> want = ds.apply_adjoint(ds.apply(xh));
    for (auto& v : want) v *= 2.0;
    EXPECT_LE(test::relative_error(test::apply_normal(*c, x), want), 1e-5);
    EXPECT_GT(test::relative_error(test::apply_normal(*c, x), ds.apply_adjoint(dak.apply_adjoint(dak.apply(ds.apply(xh))))),
              0.1);
    // Its forward and adjoint stay those of A' S.
    const CArray yk = test::random_on(*be, ks, 76);
    EXPECT_LE(test::relative_error(test::apply_forward(*c, x), (dak * ds).apply(xh)), 1e-5);
    EXPECT_LE(test::relative_error(test::apply_adjoint(*c, yk), (dak * ds).apply_adjoint(test::download(*be, yk))),
              1e-5);

    // Given the true A^H A (here as normal(A)), it is just A.
    LinOp honest = with_normal(a, normal(a));
    test::expect_adjoint(*honest);
    test::expect_matches(*honest, da);
    test::expect_same_on_cpu(be, [&](std::shared_ptr<Backend> b) {
        LinOp ab = compose(fft_op(b, s, 3u), diag(b, s, w));
        return with_normal(ab, normal(ab));
    });

    // N must be square on A's input and on A's backend.
    expect_refused_naming([&] { with_normal(a, identity(be, {4, 5})); }, {"[4x5]", "[5x4]"});
    expect_refused_naming([&] { with_normal(a, sense(be, maps)); }, {"[5x4x3]", a->describe()});
    expect_refused_naming([&] { with_normal(a, identity(make_cpu_backend(1), s)); }, {"different backends"});
    EXPECT_THROW(with_normal(a, nullptr), std::invalid_argument);
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
