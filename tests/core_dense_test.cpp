// The dense layer (core/dense/dense.h) against double-precision LAPACK (zheevd, zpotrf/zpotrs, zgesdd)
// on random matrices of orders 1 to 300 and batches of 1 to 64, on the CPU backend and (when a device
// exists; the tests skip otherwise) on CUDA, which covers each of its size classes (batched routines
// up to order 32, per-matrix ones above). Errors are measured relative to the matrix norm, as float
// LAPACK's backward stability bounds them: eigen- and singular values directly, eigen- and singular
// vectors (defined up to a phase) through the residuals ||A v - lambda v|| and orthonormality, solves
// through the residual and the double-precision solution. The inputs' upper triangles hold garbage
// where only the lower one may be read. Then the errors: a batch with matrices that are not positive
// definite names the first, shapes that disagree are named; and the host Cholesky of the noise
// prewhitener (core/dense/host_cholesky.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/dense/dense.h"
#include "core/dense/host_cholesky.h"
#include "core/dense/lapacke_cpp.h"

namespace larmor {
namespace {

using cdouble = std::complex<double>;

#define REQUIRE_CUDA() \
    if (!larmor::cuda_available()) GTEST_SKIP() << "no CUDA device"

// Float LAPACK's errors, relative to ||A||_F, for matrices of order n: its backward error bound is
// p(n) eps ||A|| with p a low-degree polynomial that is ~sqrt(n) in practice (rounding errors add up
// like a random walk). The factor leaves room for the Jacobi routines of the CUDA twin and for
// unlucky matrices; a wrong element, order, conjugation or layout gives errors of order 1.
double tol(size_t n) {
    return 64.0 * std::numeric_limits<float>::epsilon() * std::sqrt(double(std::max<size_t>(n, 1)));
}

// ---- Random inputs: host float arrays, and their exact double values for the references.
struct Rng {
    explicit Rng(uint64_t seed) : g(seed) {}
    cfloat next() { return cfloat(float(d(g)), float(d(g))); }
    std::mt19937_64 g;
    std::normal_distribution<double> d{0.0, 1.0};
};

CArray random_general(size_t m, size_t n, size_t batch, uint64_t seed) {
    CArray a = CArray::host({m, n, batch});
    Rng r(seed);
    for (size_t i = 0; i < a.size(); ++i) a.data()[i] = r.next();
    return a;
}

// Writes garbage into the strict upper triangle of each n x n matrix: only the lower one may be read.
void poison_upper(CArray& a, size_t n) {
    const size_t batch = a.size() / (n * n);
    for (size_t b = 0; b < batch; ++b)
        for (size_t j = 1; j < n; ++j)
            for (size_t i = 0; i < j; ++i) a.data()[b * n * n + i + j * n] = cfloat(1e3f, -7e2f);
}

// Hermitian (X + X^H) / 2, shifted to have eigenvalues of both signs; the upper triangle poisoned.
CArray random_hermitian(size_t n, size_t batch, uint64_t seed) {
    CArray x = random_general(n, n, batch, seed);
    CArray a = CArray::host({n, n, batch});
    for (size_t b = 0; b < batch; ++b)
        for (size_t j = 0; j < n; ++j)
            for (size_t i = 0; i < n; ++i) {
                const size_t o = b * n * n;
                a.data()[o + i + j * n] = 0.5f * (x.data()[o + i + j * n] + std::conj(x.data()[o + j + i * n]));
            }
    poison_upper(a, n);
    return a;
}

// Hermitian positive definite X X^H / n + I (eigenvalues in about [1, 5]: condition <= ~5), rounded
// to float; the upper triangle poisoned.
CArray random_hpd(size_t n, size_t batch, uint64_t seed) {
    CArray x = random_general(n, n, batch, seed);
    CArray a = CArray::host({n, n, batch});
    for (size_t b = 0; b < batch; ++b) {
        const cfloat* xb = x.data() + b * n * n;
        for (size_t j = 0; j < n; ++j)
            for (size_t i = j; i < n; ++i) {
                cdouble s = 0;
                for (size_t k = 0; k < n; ++k) s += cdouble(xb[i + k * n]) * std::conj(cdouble(xb[j + k * n]));
                s /= double(n);
                if (i == j) s = cdouble(s.real() + 1.0, 0.0);
                a.data()[b * n * n + i + j * n] = cfloat(s);
            }
    }
    poison_upper(a, n);
    return a;
}

// The full Hermitian matrix (double) of matrix b of a, from its lower triangle.
std::vector<cdouble> hermitian_from_lower(const CArray& a, size_t n, size_t b) {
    std::vector<cdouble> h(n * n);
    for (size_t j = 0; j < n; ++j)
        for (size_t i = j; i < n; ++i) {
            const cdouble v = a.data()[b * n * n + i + j * n];
            h[i + j * n] = i == j ? cdouble(v.real(), 0.0) : v;
            h[j + i * n] = std::conj(h[i + j * n]);
        }
    return h;
}

double fro(const cdouble* x, size_t count) {
    double s = 0;
    for (size_t i = 0; i < count; ++i) s += std::norm(x[i]);
    return std::sqrt(s);
}

// max |(Q^H Q - I)_ij| for the rows x cols column-major float matrix q.
double orthonormality_error(const cfloat* q, size_t rows, size_t cols) {
    double worst = 0;
    for (size_t a = 0; a < cols; ++a)
        for (size_t b = 0; b < cols; ++b) {
            cdouble s = 0;
            for (size_t i = 0; i < rows; ++i) s += std::conj(cdouble(q[i + a * rows])) * cdouble(q[i + b * rows]);
            worst = std::max(worst, std::abs(s - (a == b ? 1.0 : 0.0)));
        }
    return worst;
}

// ---- Backends: the CPU one, or a CUDA one with inputs uploaded and results downloaded.
CArray upload(Backend& be, const CArray& host) { return be.to_device(host); }
CArray host_of(Backend& be, const CArray& a) { return be.to_host(a); }
RArray host_of(Backend& be, const RArray& a) { return be.to_host(a); }

// ---- Hermitian eigendecomposition
struct EigErrors {
    double value = 0, residual = 0, orthonormality = 0;
    bool ascending = true;
};

EigErrors check_eig(const CArray& a, const RArray& values, const CArray& vectors, size_t n, size_t batch) {
    EigErrors e;
    for (size_t b = 0; b < batch; ++b) {
        std::vector<cdouble> h = hermitian_from_lower(a, n, b);
        const double norm = std::max(fro(h.data(), h.size()), 1e-30);
        std::vector<cdouble> ref = h;
        std::vector<double> w(n);
        EXPECT_EQ(LAPACKE_zheevd(LAPACK_COL_MAJOR, 'N', 'L', int(n), ref.data(), int(n), w.data()), 0);
        const float* lam = values.data() + b * n;
        const cfloat* v = vectors.data() + b * n * n;
        for (size_t j = 0; j < n; ++j) {
            e.value = std::max(e.value, std::abs(double(lam[j]) - w[j]) / norm);
            if (j + 1 < n && lam[j] > lam[j + 1]) e.ascending = false;
            double r = 0;  // ||A v_j - lambda_j v_j||
            for (size_t i = 0; i < n; ++i) {
                cdouble s = 0;
                for (size_t k = 0; k < n; ++k) s += h[i + k * n] * cdouble(v[k + j * n]);
                r += std::norm(s - double(lam[j]) * cdouble(v[i + j * n]));
            }
            e.residual = std::max(e.residual, std::sqrt(r) / norm);
        }
        e.orthonormality = std::max(e.orthonormality, orthonormality_error(v, n, n));
    }
    return e;
}

void eig_cases(Backend& be) {
    struct Case {
        size_t n, batch;
    };
    const Case cases[] = {{1, 1},  {1, 64}, {2, 1},  {2, 5},   {7, 1},  {7, 64}, {32, 1}, {32, 5},
                          {32, 64}, {33, 1}, {33, 5}, {100, 1}, {100, 3}, {300, 1}};
    uint64_t seed = 1;
    for (const Case& c : cases) {
        const CArray a = random_hermitian(c.n, c.batch, seed++);
        RArray values;
        CArray vectors;
        dense::hermitian_eig(be, upload(be, a), values, vectors);
        ASSERT_EQ(values.shape(), Shape({c.n, c.batch}));
        ASSERT_EQ(vectors.shape(), Shape({c.n, c.n, c.batch}));
        const EigErrors e = check_eig(a, host_of(be, values), host_of(be, vectors), c.n, c.batch);
        const double t = tol(c.n);
        const std::string what =
            "n " + std::to_string(c.n) + ", batch " + std::to_string(c.batch) + " on " + be.describe();
        EXPECT_TRUE(e.ascending) << what;
        EXPECT_LT(e.value, t) << what;
        EXPECT_LT(e.residual, t) << what;
        EXPECT_LT(e.orthonormality, t) << what;
        std::printf("[ dense ] eig     n %3zu x %2zu: value %.1e residual %.1e orthonormality %.1e (tol %.1e)\n", c.n,
                    c.batch, e.value, e.residual, e.orthonormality, t);
    }
}

TEST(CoreDense, HermitianEigMatchesLapackCpu) { eig_cases(*make_cpu_backend()); }

TEST(CoreDense, HermitianEigMatchesLapackCuda) {
    REQUIRE_CUDA();
    eig_cases(*make_cuda_backend(0));
}

// Batch axes spread over several axes (per-pixel matrices [n, n, X, Y]), outputs given by the caller,
// and vectors the very same view as a (in place): the same results as out of place.
void eig_batch_axes_and_in_place(Backend& be) {
    const size_t n = 5;
    const CArray a = random_hermitian(n, 12, 99);
    const CArray a4 = upload(be, a).reshaped({n, n, 4, 3});
    RArray values = be.empty_real({n, 4, 3});
    CArray vectors = be.empty({n, n, 4, 3});
    dense::hermitian_eig(be, a4, values, vectors);
    CArray in_place = be.empty({n, n, 4, 3});
    be.copy(a4, in_place);
    RArray values2;
    dense::hermitian_eig(be, in_place, values2, in_place);
    EXPECT_EQ(values2.shape(), Shape({n, 4, 3}));
    const RArray v1 = host_of(be, values), v2 = host_of(be, values2);
    for (size_t i = 0; i < v1.size(); ++i)
        EXPECT_NEAR(v1.data()[i], v2.data()[i], 1e-5 * (1 + std::abs(v1.data()[i]))) << i;
    const EigErrors e = check_eig(a, v2, host_of(be, in_place), n, 12);
    EXPECT_LT(e.residual, tol(n));
    EXPECT_LT(e.orthonormality, tol(n));
}

TEST(CoreDense, HermitianEigBatchAxesAndInPlaceCpu) { eig_batch_axes_and_in_place(*make_cpu_backend()); }

TEST(CoreDense, HermitianEigBatchAxesAndInPlaceCuda) {
    REQUIRE_CUDA();
    eig_batch_axes_and_in_place(*make_cuda_backend(0));
}

// ---- Cholesky solves
void cholesky_cases(Backend& be) {
    struct Case {
        size_t n, nrhs, batch;
    };
    const Case cases[] = {{1, 1, 1},  {1, 3, 64},  {2, 1, 5},  {7, 3, 1},   {7, 14, 64},  {32, 1, 1},
                          {32, 3, 64}, {33, 1, 1}, {33, 14, 5}, {100, 14, 3}, {300, 14, 1}, {300, 1, 2}};
    uint64_t seed = 100;
    for (const Case& c : cases) {
        const CArray a = random_hpd(c.n, c.batch, seed++);
        const CArray b = random_general(c.n, c.nrhs, c.batch, seed++);
        CArray x = upload(be, b);
        if (x.data() == b.data()) {  // the CPU backend hands back the same array: keep b for the checks
            x = be.empty(b.shape());
            be.copy(b, x);
        }
        dense::cholesky_solve(be, upload(be, a), x);
        const CArray xh = host_of(be, x);
        double residual = 0, error = 0;
        for (size_t k = 0; k < c.batch; ++k) {
            std::vector<cdouble> h = hermitian_from_lower(a, c.n, k);
            const double anorm = fro(h.data(), h.size());
            const size_t nb = c.n * c.nrhs;
            std::vector<cdouble> ref(b.data() + k * nb, b.data() + (k + 1) * nb), l = h;
            ASSERT_EQ(LAPACKE_zpotrf(LAPACK_COL_MAJOR, 'L', int(c.n), l.data(), int(c.n)), 0);
            ASSERT_EQ(LAPACKE_zpotrs(LAPACK_COL_MAJOR, 'L', int(c.n), int(c.nrhs), l.data(), int(c.n), ref.data(),
                                     int(c.n)),
                      0);
            const cfloat* xk = xh.data() + k * nb;
            std::vector<cdouble> xd(xk, xk + nb), r(nb);
            for (size_t j = 0; j < c.nrhs; ++j)
                for (size_t i = 0; i < c.n; ++i) {
                    cdouble s = -cdouble(b.data()[k * nb + i + j * c.n]);
                    for (size_t p = 0; p < c.n; ++p) s += h[i + p * c.n] * xd[p + j * c.n];
                    r[i + j * c.n] = s;
                }
            residual = std::max(residual, fro(r.data(), nb) / (anorm * fro(xd.data(), nb)));
            for (size_t i = 0; i < nb; ++i) xd[i] -= ref[i];
            error = std::max(error, fro(xd.data(), nb) / fro(ref.data(), nb));
        }
        const double t = tol(c.n);
        const std::string what = "n " + std::to_string(c.n) + ", nrhs " + std::to_string(c.nrhs) + ", batch " +
                                 std::to_string(c.batch) + " on " + be.describe();
        EXPECT_LT(residual, t) << what;
        EXPECT_LT(error, 10 * t) << what;  // the condition number is at most ~5
        std::printf("[ dense ] cholesky n %3zu nrhs %2zu x %2zu: residual %.1e error %.1e (tol %.1e)\n", c.n, c.nrhs,
                    c.batch, residual, error, t);
    }
}

TEST(CoreDense, CholeskySolveMatchesLapackCpu) { cholesky_cases(*make_cpu_backend()); }

TEST(CoreDense, CholeskySolveMatchesLapackCuda) {
    REQUIRE_CUDA();
    cholesky_cases(*make_cuda_backend(0));
}

// ---- SVD
void svd_cases(Backend& be) {
    struct Case {
        size_t m, n, batch;
    };
    const Case cases[] = {{1, 1, 1},   {2, 1, 5},   {1, 2, 5},   {7, 7, 64},  {7, 2, 64},  {2, 7, 64},
                          {32, 32, 5}, {33, 32, 1}, {32, 33, 5}, {40, 7, 3},  {7, 40, 3},  {100, 33, 2},
                          {33, 100, 1}, {300, 100, 1}, {100, 300, 1}};
    uint64_t seed = 200;
    for (const Case& c : cases) {
        const size_t k = std::min(c.m, c.n);
        const CArray a = random_general(c.m, c.n, c.batch, seed++);
        RArray s;
        CArray u, v;
        dense::svd(be, upload(be, a), s, u, v);
        ASSERT_EQ(s.shape(), Shape({k, c.batch}));
        ASSERT_EQ(u.shape(), Shape({c.m, k, c.batch}));
        ASSERT_EQ(v.shape(), Shape({c.n, k, c.batch}));
        const RArray sh = host_of(be, s);
        const CArray uh = host_of(be, u), vh = host_of(be, v);
        double value = 0, residual = 0, ortho = 0;
        bool descending = true;
        for (size_t b = 0; b < c.batch; ++b) {
            const cfloat* ab = a.data() + b * c.m * c.n;
            std::vector<cdouble> ad(ab, ab + c.m * c.n), ref = ad;
            const double norm = fro(ad.data(), ad.size());
            std::vector<double> sref(k);
            cdouble dummy[1];
            ASSERT_EQ(LAPACKE_zgesdd(LAPACK_COL_MAJOR, 'N', int(c.m), int(c.n), ref.data(), int(c.m), sref.data(),
                                     dummy, 1, dummy, 1),
                      0);
            const float* sb = sh.data() + b * k;
            const cfloat* ub = uh.data() + b * c.m * k;
            const cfloat* vb = vh.data() + b * c.n * k;
            for (size_t j = 0; j < k; ++j) {
                value = std::max(value, std::abs(double(sb[j]) - sref[j]) / norm);
                if (sb[j] < 0 || (j + 1 < k && sb[j] < sb[j + 1])) descending = false;
                double r1 = 0, r2 = 0;  // ||A v_j - s_j u_j||, ||A^H u_j - s_j v_j||
                for (size_t i = 0; i < c.m; ++i) {
                    cdouble t = 0;
                    for (size_t p = 0; p < c.n; ++p) t += ad[i + p * c.m] * cdouble(vb[p + j * c.n]);
                    r1 += std::norm(t - double(sb[j]) * cdouble(ub[i + j * c.m]));
                }
                for (size_t p = 0; p < c.n; ++p) {
                    cdouble t = 0;
                    for (size_t i = 0; i < c.m; ++i) t += std::conj(ad[i + p * c.m]) * cdouble(ub[i + j * c.m]);
                    r2 += std::norm(t - double(sb[j]) * cdouble(vb[p + j * c.n]));
                }
                residual = std::max(residual, std::sqrt(std::max(r1, r2)) / norm);
            }
            ortho = std::max({ortho, orthonormality_error(ub, c.m, k), orthonormality_error(vb, c.n, k)});
        }
        const double t = tol(std::max(c.m, c.n));
        const std::string what = std::to_string(c.m) + " x " + std::to_string(c.n) + ", batch " +
                                 std::to_string(c.batch) + " on " + be.describe();
        EXPECT_TRUE(descending) << what;
        EXPECT_LT(value, t) << what;
        EXPECT_LT(residual, t) << what;
        EXPECT_LT(ortho, t) << what;
        std::printf("[ dense ] svd     %3zu x %3zu x %2zu: value %.1e residual %.1e orthonormality %.1e (tol %.1e)\n",
                    c.m, c.n, c.batch, value, residual, ortho, t);
    }
}

TEST(CoreDense, SvdMatchesLapackCpu) { svd_cases(*make_cpu_backend()); }

TEST(CoreDense, SvdMatchesLapackCuda) {
    REQUIRE_CUDA();
    svd_cases(*make_cuda_backend(0));
}

// ---- Gram matrices
void gram_cases(Backend& be) {
    struct Case {
        size_t m, n, batch;
    };
    const Case cases[] = {{1, 1, 1},   {7, 2, 64},  {2, 7, 5},   {32, 32, 1},   {32, 32, 64},
                          {100, 33, 3}, {33, 100, 1}, {361, 504, 1}, {300, 100, 2}};
    uint64_t seed = 300;
    for (const Case& c : cases) {
        const CArray a = random_general(c.m, c.n, c.batch, seed++);
        CArray g;
        dense::gram(be, upload(be, a), g);
        ASSERT_EQ(g.shape(), Shape({c.n, c.n, c.batch}));
        const CArray gh = host_of(be, g);
        double error = 0;
        bool hermitian = true;
        for (size_t b = 0; b < c.batch; ++b) {
            const cfloat* ab = a.data() + b * c.m * c.n;
            const cfloat* gb = gh.data() + b * c.n * c.n;
            double norm2 = 0;
            for (size_t i = 0; i < c.m * c.n; ++i) norm2 += std::norm(cdouble(ab[i]));
            double e = 0;
            for (size_t j = 0; j < c.n; ++j)
                for (size_t i = 0; i < c.n; ++i) {
                    cdouble s = 0;
                    for (size_t p = 0; p < c.m; ++p)
                        s += std::conj(cdouble(ab[p + i * c.m])) * cdouble(ab[p + j * c.m]);
                    e += std::norm(cdouble(gb[i + j * c.n]) - s);
                    if (gb[i + j * c.n] != std::conj(gb[j + i * c.n])) hermitian = false;  // exactly
                }
            error = std::max(error, std::sqrt(e) / norm2);
        }
        const double t = tol(c.m);
        const std::string what = std::to_string(c.m) + " x " + std::to_string(c.n) + ", batch " +
                                 std::to_string(c.batch) + " on " + be.describe();
        EXPECT_TRUE(hermitian) << what;
        EXPECT_LT(error, t) << what;
        std::printf("[ dense ] gram    %3zu x %3zu x %2zu: error %.1e (tol %.1e)\n", c.m, c.n, c.batch, error, t);
    }
}

TEST(CoreDense, GramMatchesDoubleProductCpu) { gram_cases(*make_cpu_backend()); }

TEST(CoreDense, GramMatchesDoubleProductCuda) {
    REQUIRE_CUDA();
    gram_cases(*make_cuda_backend(0));
}

// ---- Errors
// Matrices 3 and 5 of 6 are not positive definite (a diagonal entry of -50 at index 2: the leading
// minor of order 3 is the first that is not positive); the error names matrix 3 and that minor.
void not_positive_definite(Backend& be, size_t n, size_t batch, size_t bad, size_t also_bad) {
    CArray a = random_hpd(n, batch, 400 + n);
    for (size_t b : {bad, also_bad}) a.data()[b * n * n + 2 + 2 * n] = cfloat(-50.f, 0.f);
    CArray x = be.to_device(random_general(n, 2, batch, 401));
    try {
        dense::cholesky_solve(be, be.to_device(a), x);
        ADD_FAILURE() << "matrices that are not positive definite were accepted on " << be.describe();
    } catch (const dense::NotPositiveDefinite& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("matrix " + std::to_string(bad) + " of " + std::to_string(batch)), std::string::npos) << m;
        EXPECT_NE(m.find("leading minor of order 3"), std::string::npos) << m;
        EXPECT_EQ(e.batch_index(), bad);
        EXPECT_EQ(e.minor(), 3u);
    }
}

TEST(CoreDense, CholeskyNamesTheFirstMatrixThatIsNotPositiveDefiniteCpu) {
    auto be = make_cpu_backend();
    not_positive_definite(*be, 7, 6, 3, 5);
    not_positive_definite(*be, 40, 3, 1, 2);
}

TEST(CoreDense, CholeskyNamesTheFirstMatrixThatIsNotPositiveDefiniteCuda) {
    REQUIRE_CUDA();
    auto be = make_cuda_backend(0);
    not_positive_definite(*be, 7, 6, 3, 5);   // potrfBatched
    not_positive_definite(*be, 40, 3, 1, 2);  // potrf per matrix
}

template <class F>
void expect_invalid(F&& f, const std::vector<std::string>& words) {
    try {
        f();
        ADD_FAILURE() << "accepted";
    } catch (const std::invalid_argument& e) {
        for (const std::string& w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
    }
}

TEST(CoreDense, ShapesThatDisagreeAreNamed) {
    auto be = make_cpu_backend();
    Backend& b = *be;
    const CArray sq = CArray::host({3, 3, 2}), rect = CArray::host({3, 4, 2});
    expect_invalid([&] { RArray v; CArray w; dense::hermitian_eig(b, rect, v, w); },
                   {"hermitian_eig", "a [3x4x2]", "square"});
    expect_invalid([&] { RArray v = RArray::host({3, 3}); CArray w; dense::hermitian_eig(b, sq, v, w); },
                   {"values [3x3]", "[3x2]"});
    expect_invalid([&] { RArray v; CArray w = CArray::host({3, 3, 3}); dense::hermitian_eig(b, sq, v, w); },
                   {"vectors [3x3x3]", "[3x3x2]"});
    expect_invalid([&] { CArray x = CArray::host({4, 1, 2}); dense::cholesky_solve(b, sq, x); },
                   {"cholesky_solve", "b [4x1x2]", "a [3x3x2]"});
    expect_invalid([&] { CArray x = CArray::host({3, 1, 3}); dense::cholesky_solve(b, sq, x); },
                   {"b [3x1x3]", "a [3x3x2]"});
    expect_invalid([&] { CArray x = CArray::host({3}); dense::cholesky_solve(b, sq, x); }, {"b [3]"});
    expect_invalid([&] { RArray s; CArray u = CArray::host({3, 4, 2}), v; dense::svd(b, rect, s, u, v); },
                   {"svd", "u [3x4x2]", "[3x3x2]"});
    expect_invalid([&] { RArray s; CArray u, v = CArray::host({3, 3, 2}); dense::svd(b, rect, s, u, v); },
                   {"v [3x3x2]", "[4x3x2]"});
    expect_invalid([&] { CArray g = CArray::host({3, 3, 2}); dense::gram(b, rect, g); },
                   {"gram", "g [3x3x2]", "[4x4x2]"});
    expect_invalid([&] { CArray g; dense::gram(b, CArray::host({5}), g); }, {"a [5]"});
    expect_invalid([&] { CArray g = rect.view(0, {3, 3, 2}); dense::gram(b, rect.reshaped({4, 3, 2}), g); },
                   {"g [3x3x2] overlaps a [4x3x2]"});
}

// ---- The noise prewhitener's host Cholesky (double, row-major).
TEST(CoreDense, HostCholeskyFactorsAndNamesTheFailingColumn) {
    const size_t n = 14;
    const CArray x = random_general(n, n, 1, 500);
    std::vector<cdouble> a(n * n);  // row-major X X^H / n + I
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < n; ++j) {
            cdouble s = 0;
            for (size_t k = 0; k < n; ++k) s += cdouble(x.data()[i + k * n]) * std::conj(cdouble(x.data()[j + k * n]));
            a[i * n + j] = s / double(n) + (i == j ? 1.0 : 0.0);
        }
    std::vector<cdouble> l = a;
    dense::host_cholesky_lower(l.data(), n);
    double worst = 0;
    for (size_t i = 0; i < n; ++i) {
        EXPECT_GT(l[i * n + i].real(), 0.0);
        EXPECT_EQ(l[i * n + i].imag(), 0.0);
        for (size_t j = 0; j < n; ++j) {
            if (j > i) {
                EXPECT_EQ(l[i * n + j], cdouble(0.0)) << i << "," << j;
            }
            cdouble s = 0;  // (L L^H)_ij
            for (size_t k = 0; k < n; ++k) s += l[i * n + k] * std::conj(l[j * n + k]);
            worst = std::max(worst, std::abs(s - a[i * n + j]));
        }
    }
    EXPECT_LT(worst, 1e-13 * fro(a.data(), a.size()));

    std::vector<cdouble> dead = a;  // channel 5 without noise
    for (size_t k = 0; k < n; ++k) dead[5 * n + k] = dead[k * n + 5] = 0;
    try {
        dense::host_cholesky_lower(dead.data(), n);
        ADD_FAILURE() << "a zero row was accepted";
    } catch (const dense::NotPositiveDefinite& e) {
        EXPECT_EQ(e.minor(), 6u);
        EXPECT_NE(std::string(e.what()).find("column 5"), std::string::npos) << e.what();
    }
    // An independent channel 1e-14 as noisy as the others: positive definite, but below a relative floor.
    std::vector<cdouble> faint = a;
    for (size_t k = 0; k < n; ++k) faint[8 * n + k] = faint[k * n + 8] = 0;
    faint[8 * n + 8] = 1e-14;
    std::vector<cdouble> f0 = faint;
    EXPECT_NO_THROW(dense::host_cholesky_lower(f0.data(), n));
    try {
        dense::host_cholesky_lower(faint.data(), n, 1e-12);
        ADD_FAILURE() << "a pivot below the relative floor was accepted";
    } catch (const dense::NotPositiveDefinite& e) {
        EXPECT_EQ(e.minor(), 9u) << e.what();
    }
}

}  // namespace
}  // namespace larmor
