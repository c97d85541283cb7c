#include "tests/support/operator_checks.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/support/reference_dft.h"

namespace larmor::test {

std::vector<cdouble> DenseMatrix::apply(const std::vector<cdouble>& x) const {
    std::vector<cdouble> y(rows);
    for (size_t r = 0; r < rows; ++r) {
        cdouble s = 0;
        for (size_t c = 0; c < cols; ++c) s += at(r, c) * x[c];
        y[r] = s;
    }
    return y;
}

std::vector<cdouble> DenseMatrix::apply_adjoint(const std::vector<cdouble>& y) const {
    std::vector<cdouble> x(cols);
    for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < cols; ++c) x[c] += std::conj(at(r, c)) * y[r];
    return x;
}

DenseMatrix DenseMatrix::adjoint() const {
    DenseMatrix h(cols, rows);
    for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < cols; ++c) h.at(c, r) = std::conj(at(r, c));
    return h;
}

DenseMatrix DenseMatrix::operator*(const DenseMatrix& b) const {
    DenseMatrix p(rows, b.cols);
    for (size_t r = 0; r < rows; ++r)
        for (size_t k = 0; k < cols; ++k) {
            const cdouble v = at(r, k);
            if (v == cdouble(0)) continue;
            for (size_t c = 0; c < b.cols; ++c) p.at(r, c) += v * b.at(k, c);
        }
    return p;
}

DenseMatrix DenseMatrix::operator+(const DenseMatrix& b) const {
    DenseMatrix s = *this;
    for (size_t i = 0; i < a.size(); ++i) s.a[i] += b.a[i];
    return s;
}

DenseMatrix DenseMatrix::identity(size_t n) {
    DenseMatrix m(n, n);
    for (size_t i = 0; i < n; ++i) m.at(i, i) = 1.0;
    return m;
}

DenseMatrix DenseMatrix::from_columns(size_t n,
                                      const std::function<std::vector<cdouble>(const std::vector<cdouble>&)>& f) {
    DenseMatrix m;
    for (size_t j = 0; j < n; ++j) {
        std::vector<cdouble> e(n);
        e[j] = 1.0;
        const std::vector<cdouble> col = f(e);
        if (j == 0) m = DenseMatrix(col.size(), n);
        for (size_t r = 0; r < col.size(); ++r) m.at(r, j) = col[r];
    }
    return m;
}

CArray random_on(Backend& be, const Shape& shape, unsigned seed) { return be.to_device(random_array(shape, seed)); }

std::vector<cdouble> download(Backend& be, const CArray& a) { return to_double(be.to_host(a)); }

std::vector<cdouble> apply_forward(LinearOperator& op, const CArray& x) {
    CArray y = op.backend().empty(op.oshape());
    op.forward(x, y);
    return download(op.backend(), y);
}

std::vector<cdouble> apply_adjoint(LinearOperator& op, const CArray& y) {
    CArray x = op.backend().empty(op.ishape());
    op.adjoint(y, x);
    return download(op.backend(), x);
}

std::vector<cdouble> apply_normal(LinearOperator& op, const CArray& x) {
    CArray z = op.backend().empty(op.ishape());
    op.normal(x, z);
    return download(op.backend(), z);
}

namespace {

cdouble dot(const std::vector<cdouble>& a, const std::vector<cdouble>& b) {
    cdouble s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += std::conj(a[i]) * b[i];
    return s;
}

double norm(const std::vector<cdouble>& a) { return std::sqrt(dot(a, a).real()); }

}  // namespace

void expect_adjoint(LinearOperator& op, double tol, unsigned seed) {
    Backend& be = op.backend();
    const CArray x = random_on(be, op.ishape(), seed);
    const CArray y = random_on(be, op.oshape(), seed + 1);
    const auto ax = apply_forward(op, x);
    const auto ahy = apply_adjoint(op, y);
    const auto xh = download(be, x), yh = download(be, y);
    const cdouble lhs = dot(ax, yh), rhs = dot(xh, ahy);
    EXPECT_LE(std::abs(lhs - rhs), tol * norm(ax) * norm(yh))
        << op.describe() << ": <A x, y> = " << lhs << ", <x, A^H y> = " << rhs;
    // normal() (possibly overridden) against the adjoint of the forward result.
    CArray axd = be.to_device(from_double(ax, op.oshape()));
    const auto want = apply_adjoint(op, axd);
    const auto got = apply_normal(op, x);
    EXPECT_LE(relative_error(got, want), tol) << op.describe() << ": normal() differs from A^H A";
}

void expect_matches(LinearOperator& op, const DenseMatrix& dense, double tol, unsigned seed) {
    ASSERT_EQ(dense.rows, op.oshape().size()) << op.describe();
    ASSERT_EQ(dense.cols, op.ishape().size()) << op.describe();
    Backend& be = op.backend();
    const CArray x = random_on(be, op.ishape(), seed);
    const CArray y = random_on(be, op.oshape(), seed + 1);
    const auto xh = download(be, x), yh = download(be, y);
    EXPECT_LE(relative_error(apply_forward(op, x), dense.apply(xh)), tol) << op.describe() << " forward";
    EXPECT_LE(relative_error(apply_adjoint(op, y), dense.apply_adjoint(yh)), tol) << op.describe() << " adjoint";
    EXPECT_LE(relative_error(apply_normal(op, x), dense.apply_adjoint(dense.apply(xh))), tol)
        << op.describe() << " normal";
}

void expect_same_on_cpu(const std::shared_ptr<Backend>& be, const std::function<LinOp(std::shared_ptr<Backend>)>& make,
                        double tol) {
    if (be->device() == Device::Cpu) return;
    LinOp a = make(be), b = make(make_cpu_backend());
    const CArray xc = random_array(a->ishape(), 21), yc = random_array(a->oshape(), 22);
    const CArray xa = be->to_device(xc), ya = be->to_device(yc);
    EXPECT_LE(relative_error(apply_forward(*a, xa), apply_forward(*b, xc)), tol) << a->describe() << " forward";
    EXPECT_LE(relative_error(apply_adjoint(*a, ya), apply_adjoint(*b, yc)), tol) << a->describe() << " adjoint";
    EXPECT_LE(relative_error(apply_normal(*a, xa), apply_normal(*b, xc)), tol) << a->describe() << " normal";
}

}  // namespace larmor::test
