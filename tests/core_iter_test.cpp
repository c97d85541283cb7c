// Solvers of core/iter on every backend: CG against a direct solve of a dense SPD system, CG on the
// normal equations of a small SENSE problem, the proximal maps.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/iter/cg.h"
#include "core/iter/prox.h"
#include "core/linops/algebra.h"
#include "core/linops/diag.h"
#include "core/linops/fft_op.h"
#include "core/linops/sense.h"
#include "tests/support/backends.h"
#include "tests/support/operator_checks.h"
#include "tests/support/reference_dft.h"

namespace larmor {
namespace {

using test::cdouble;
using test::DenseMatrix;

class Iter : public test::BackendTest {};
LARMOR_INSTANTIATE_BACKEND_TEST(Iter);

// A dense matrix as an operator: applied in double on the host, whatever the backend (test only).
class DenseOperator final : public LinearOperator {
public:
    DenseOperator(std::shared_ptr<Backend> be, DenseMatrix m)
        : LinearOperator(std::move(be), Shape{m.cols}, Shape{m.rows}, "dense"), m_(std::move(m)) {}

protected:
    void apply_forward(const CArray& x, CArray& y) override { put(m_.apply(test::download(backend(), x)), y); }
    void apply_adjoint(const CArray& y, CArray& x) override { put(m_.apply_adjoint(test::download(backend(), y)), x); }

private:
    void put(const std::vector<cdouble>& v, CArray& out) { backend().copy(test::from_double(v, out.shape()), out); }
    DenseMatrix m_;
};

// Gaussian elimination with partial pivoting in double: the direct reference.
std::vector<cdouble> solve(DenseMatrix a, std::vector<cdouble> b) {
    const size_t n = a.rows;
    for (size_t k = 0; k < n; ++k) {
        size_t p = k;
        for (size_t r = k + 1; r < n; ++r)
            if (std::abs(a.at(r, k)) > std::abs(a.at(p, k))) p = r;
        for (size_t c = 0; c < n; ++c) std::swap(a.at(k, c), a.at(p, c));
        std::swap(b[k], b[p]);
        for (size_t r = k + 1; r < n; ++r) {
            const cdouble f = a.at(r, k) / a.at(k, k);
            for (size_t c = k; c < n; ++c) a.at(r, c) -= f * a.at(k, c);
            b[r] -= f * b[k];
        }
    }
    std::vector<cdouble> x(n);
    for (size_t k = n; k-- > 0;) {
        cdouble s = b[k];
        for (size_t c = k + 1; c < n; ++c) s -= a.at(k, c) * x[c];
        x[k] = s / a.at(k, k);
    }
    return x;
}

DenseMatrix random_spd(size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<double> nd;
    DenseMatrix g(n, n);
    for (auto& v : g.a) v = cdouble(nd(gen), nd(gen)) / std::sqrt(2.0 * n);
    DenseMatrix spd = g.adjoint() * g;
    for (size_t i = 0; i < n; ++i) spd.at(i, i) += 0.5;  // eigenvalues in [0.5, ~4.5]
    return spd;
}

TEST_P(Iter, CgSolvesDenseSpdSystemAgainstDirectSolve) {
    const size_t n = 24;
    const DenseMatrix a = random_spd(n, 3);
    const CArray bh = test::random_array({n}, 4);
    const auto want = solve(a, test::to_double(bh));
    const CArray b = be->to_device(bh);
    ConjugateGradient cg(std::make_shared<DenseOperator>(be, a), b, be->zeros({n}), {200, 1e-7});
    const int iters = run(cg);
    EXPECT_LT(test::relative_error(test::download(*be, cg.x()), want), 1e-5) << iters << " iterations";
    EXPECT_LT(iters, 200);
    ASSERT_EQ(cg.residuals().size(), size_t(iters) + 1);
    EXPECT_DOUBLE_EQ(cg.residuals().front(), 1.0);  // x0 = 0: r0 = b
    EXPECT_LE(cg.residual(), 1e-7);
}

TEST_P(Iter, CgStopsOnIterationCountAndResidualIsRecorded) {
    const size_t n = 24;
    const DenseMatrix a = random_spd(n, 5);
    const CArray b = be->to_device(test::random_array({n}, 6));
    ConjugateGradient cg(std::make_shared<DenseOperator>(be, a), b, be->zeros({n}), {5, 0.0});
    EXPECT_EQ(run(cg), 5);
    EXPECT_TRUE(cg.done());
    cg.update();  // a finished solver does nothing more
    EXPECT_EQ(cg.iteration(), 5);
    for (size_t k = 1; k < cg.residuals().size(); ++k) EXPECT_GT(cg.residuals()[k], 0.0);
    EXPECT_LT(cg.residual(), cg.residuals().front());
}

// min ||M F S x - y||^2 + lambda ||x||^2 by CG equals the dense solution of the normal equations.
TEST_P(Iter, CgLeastSquaresOnSenseEncodingMatchesDenseNormalEquations) {
    const Shape img{6, 6}, ks{6, 6, 4};
    const CArray maps = test::random_array(ks, 7);
    RArray mask = RArray::host({6, 6});
    for (size_t x = 0; x < 6; ++x)
        for (size_t y = 0; y < 6; y += 2) mask.data()[x + 6 * y] = 1.f;  // R = 2 along y
    LinOp e = compose({sampling_mask(be, ks, mask), fft_op(be, ks, 3u), sense(be, maps)});
    const CArray yh = test::random_array(ks, 8);
    const float lambda = 0.05f;
    auto cg = cg_least_squares(e, be->to_device(yh), be->zeros(img), lambda, {100, 1e-7});
    run(*cg);

    DenseMatrix de = DenseMatrix::from_columns(img.size(), [&](const std::vector<cdouble>& v) {
        return test::apply_forward(*e, be->to_device(test::from_double(v, img)));
    });
    DenseMatrix n = de.adjoint() * de;
    for (size_t i = 0; i < img.size(); ++i) n.at(i, i) += lambda;
    const auto want = solve(n, de.apply_adjoint(test::to_double(yh)));
    EXPECT_LT(test::relative_error(test::download(*be, cg->x()), want), 1e-4) << cg->iteration() << " iterations";
}

TEST_P(Iter, SoftThresholdProxAndDataConsistencyProjection) {
    const Shape s{10, 3};
    const CArray x = test::random_on(*be, s, 9);
    auto st = soft_threshold_prox(be, s, 2.f, 3);
    CArray out = be->empty(s);
    st->apply(0.25f, x, out);  // threshold 0.5, joint over the 3 trailing entries
    CArray direct = be->empty(s);
    be->soft_threshold(0.5f, x, direct, 3);
    EXPECT_EQ(test::download(*be, out), test::download(*be, direct));

    RArray mask = RArray::host({10});
    for (size_t i = 0; i < 10; i += 3) mask.data()[i] = 1.f;
    const CArray y = test::random_on(*be, s, 10);
    auto dc = data_consistency_projection(be, mask, y);
    CArray p = be->empty(s);
    dc->apply(1.f, x, p);
    const auto ph = test::download(*be, p), xh = test::download(*be, x), yh = test::download(*be, y);
    // Sampled entries take the data exactly, the rest keep x exactly.
    for (size_t i = 0; i < 30; ++i) EXPECT_EQ(ph[i], mask.data()[i % 10] == 1.f ? yh[i] : xh[i]) << i;
    CArray q = be->empty(s);
    dc->apply(1.f, p, q);  // a projection is idempotent
    EXPECT_EQ(test::download(*be, q), ph);
    dc->apply(1.f, q, q);  // in place
    EXPECT_EQ(test::download(*be, q), ph);
}

}  // namespace
}  // namespace larmor
