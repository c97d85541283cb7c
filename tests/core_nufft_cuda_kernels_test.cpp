// The CUDA NUFFT kernels (core/linops/nufft_kernels.h, cuda/nufft_*.cu) against an exact
// double-precision spread / interpolation written here: a direct loop over the points and the
// width^dims grid points each covers, with the exponential-of-semicircle kernel of Barnett, Magland &
// af Klinteberg (2019) and periodic wrapping. 1D, 2D, 3D; widths 2..8 (and 12, 16); batch 1 and 4;
// random points, points at the grid edges, points clustered at the centre (the radial case: many
// points per bin, bins split into several sub-problems); both spreading methods (shared-memory tiles
// and GM-sort). Also interp is the adjoint of spread, and a second point set made after the first
// (its device blocks reused from the cache) gives the second set's exact result. Skipped without a
// CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <complex>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/linops/nufft_kernels.h"
#include "tests/support/backends.h"

#ifdef LARMOR_WITH_CUDA
#include "cuda/nufft_points.h"
#endif

namespace larmor {
namespace {

using cdouble = std::complex<double>;

enum class Layout { Random, Edges, Clustered };

const char* layout_name(Layout l) { return l == Layout::Random ? "random" : l == Layout::Edges ? "edges" : "clustered"; }

struct Case {
    int dims;
    long long n[3];
    int width;
    long long batch;
    long long points;
    Layout layout;

    NufftGrid grid() const {
        NufftGrid g;
        g.dims = dims;
        for (int a = 0; a < 3; ++a) g.n[a] = n[a];
        g.batch = batch;
        g.points = points;
        g.width = width;
        g.beta = 2.30f * static_cast<float>(width);  // sigma = 2 (Barnett et al. 2019, sec. 4)
        return g;
    }
    std::string name() const {
        std::string s = std::to_string(dims) + "D grid " + std::to_string(n[0]);
        for (int a = 1; a < dims; ++a) s += "x" + std::to_string(n[a]);
        return s + ", width " + std::to_string(width) + ", batch " + std::to_string(batch) + ", " +
               std::to_string(points) + " " + layout_name(layout) + " points";
    }
};

// Coordinates [dims, M] in grid units, in [0, n).
std::vector<float> make_points(const Case& c, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::vector<float> u(static_cast<size_t>(c.points * c.dims));
    for (long long m = 0; m < c.points; ++m) {
        for (int a = 0; a < c.dims; ++a) {
            const double n = static_cast<double>(c.n[a]);
            double v = 0;
            switch (c.layout) {
                case Layout::Random: v = unit(gen) * n; break;
                case Layout::Edges: {
                    // Within a hundredth of a grid point of 0 or of n, and some exactly 0 or just below n.
                    const double e = unit(gen) * 0.01;
                    const long long k = (m + a) % 4;
                    v = k == 0 ? e : k == 1 ? n - e : k == 2 ? 0.0 : static_cast<double>(std::nextafter(static_cast<float>(n), 0.f));
                    break;
                }
                case Layout::Clustered: v = n / 2 + (unit(gen) - 0.5) * 3.0; break;
            }
            float f = static_cast<float>(v);
            if (!(f < static_cast<float>(n))) f = std::nextafter(static_cast<float>(n), 0.f);
            u[static_cast<size_t>(m * c.dims + a)] = f;
        }
    }
    return u;
}

std::vector<cdouble> random_values(size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<double> nd;
    std::vector<cdouble> v(n);
    for (auto& x : v) x = cdouble(nd(gen), nd(gen));
    return v;
}

// The grid points point u covers along one axis (|g - u| < width / 2), wrapped, with their kernel values.
struct AxisTaps {
    std::vector<long long> index;
    std::vector<double> value;
};

AxisTaps taps(double u, long long n, int width, double beta) {
    AxisTaps t;
    const double half = width / 2.0;
    for (long long g = static_cast<long long>(std::floor(u - half)); g <= static_cast<long long>(std::ceil(u + half)); ++g) {
        const double z = 2.0 * (static_cast<double>(g) - u) / width;
        if (std::abs(z) >= 1.0) continue;
        t.index.push_back(((g % n) + n) % n);
        t.value.push_back(std::exp(beta * (std::sqrt(1.0 - z * z) - 1.0)));
    }
    return t;
}

// Calls f(grid index, kernel weight) for every grid point point m covers.
template <class F>
void for_each_tap(const Case& c, const std::vector<float>& u, long long m, double beta, F&& f) {
    AxisTaps t[3];
    for (int a = 0; a < 3; ++a)
        t[a] = a < c.dims ? taps(u[static_cast<size_t>(m * c.dims + a)], c.n[a], c.width, beta) : AxisTaps{{0}, {1.0}};
    for (size_t k = 0; k < t[2].index.size(); ++k)
        for (size_t j = 0; j < t[1].index.size(); ++j)
            for (size_t i = 0; i < t[0].index.size(); ++i)
                f(t[0].index[i] + c.n[0] * (t[1].index[j] + c.n[1] * t[2].index[k]), t[0].value[i] * t[1].value[j] * t[2].value[k]);
}

std::vector<cdouble> reference_spread(const Case& c, const std::vector<float>& u, const std::vector<cdouble>& samples) {
    const long long n = c.n[0] * c.n[1] * c.n[2];
    const double beta = c.grid().beta;
    std::vector<cdouble> grid(static_cast<size_t>(n * c.batch));
    for (long long m = 0; m < c.points; ++m)
        for_each_tap(c, u, m, beta, [&](long long g, double w) {
            for (long long b = 0; b < c.batch; ++b)
                grid[static_cast<size_t>(g + b * n)] += w * samples[static_cast<size_t>(m + b * c.points)];
        });
    return grid;
}

std::vector<cdouble> reference_interp(const Case& c, const std::vector<float>& u, const std::vector<cdouble>& grid) {
    const long long n = c.n[0] * c.n[1] * c.n[2];
    const double beta = c.grid().beta;
    std::vector<cdouble> samples(static_cast<size_t>(c.points * c.batch));
    for (long long m = 0; m < c.points; ++m)
        for_each_tap(c, u, m, beta, [&](long long g, double w) {
            for (long long b = 0; b < c.batch; ++b)
                samples[static_cast<size_t>(m + b * c.points)] += w * grid[static_cast<size_t>(g + b * n)];
        });
    return samples;
}

double relative_error(const std::vector<cdouble>& a, const std::vector<cdouble>& ref) {
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        num += std::norm(a[i] - ref[i]);
        den += std::norm(ref[i]);
    }
    return std::sqrt(num / den);
}

cdouble inner(const std::vector<cdouble>& a, const std::vector<cdouble>& b) {
    cdouble s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += std::conj(a[i]) * b[i];
    return s;
}

double norm(const std::vector<cdouble>& a) { return std::sqrt(std::real(inner(a, a))); }

class NufftCudaKernels : public ::testing::Test {
protected:
    void SetUp() override {
        be = test::backend_for(Device::Cuda);
        if (!be) GTEST_SKIP() << "no usable CUDA device";
    }

    void TearDown() override {
        if (worst_spread.first > 0 || worst_interp.first > 0)
            std::printf("[   INFO   ] largest relative L2 errors: spread %.2e (%s), interp %.2e (%s)\n",
                        worst_spread.first, worst_spread.second.c_str(), worst_interp.first, worst_interp.second.c_str());
    }

    static void note(std::pair<double, std::string>& worst, double err, const std::string& name) {
        if (!(err <= worst.first)) worst = {err, name};
    }

    std::shared_ptr<Backend> be;
    std::pair<double, std::string> worst_spread{0.0, ""}, worst_interp{0.0, ""};

    CArray upload(const std::vector<cdouble>& v, const Shape& s) {
        CArray h = CArray::host(s);
        for (size_t i = 0; i < v.size(); ++i) h.data()[i] = cfloat(static_cast<float>(v[i].real()), static_cast<float>(v[i].imag()));
        return be->to_device(h);
    }
    RArray upload(const std::vector<float>& v, const Shape& s) {
        RArray h = RArray::host(s);
        for (size_t i = 0; i < v.size(); ++i) h.data()[i] = v[i];
        return be->to_device(h);
    }
    std::vector<cdouble> download(const CArray& a) {
        CArray h = be->to_host(a);
        return std::vector<cdouble>(h.data(), h.data() + h.size());
    }

    static Shape grid_shape(const Case& c) {
        Shape s;
        for (int a = 0; a < c.dims; ++a) s.push_back(static_cast<size_t>(c.n[a]));
        s.push_back(static_cast<size_t>(c.batch));
        return s;
    }
    static Shape sample_shape(const Case& c) { return {static_cast<size_t>(c.points), static_cast<size_t>(c.batch)}; }

    // Spread (each method) and interp of case c against the references; also the adjoint identity.
    void check_case(const Case& c, unsigned seed) {
        SCOPED_TRACE(c.name());
        const NufftGrid g = c.grid();
        const std::vector<float> u = make_points(c, seed);
        const std::vector<cdouble> y = random_values(static_cast<size_t>(c.points * c.batch), seed + 1);
        const std::vector<cdouble> x = random_values(static_cast<size_t>(g.grid_size() * c.batch), seed + 2);
        auto points = cuda::nufft_bin_points(*be, g, upload(u, Shape{static_cast<size_t>(c.dims), static_cast<size_t>(c.points)}));
        const CArray y_dev = upload(y, sample_shape(c)), x_dev = upload(x, grid_shape(c));

        const std::vector<cdouble> spread_ref = reference_spread(c, u, y);
        CArray grid = be->empty(grid_shape(c));
#ifdef LARMOR_WITH_CUDA
        const cuda::SpreadMethod methods[] = {cuda::SpreadMethod::Auto, cuda::SpreadMethod::SharedTiles,
                                              cuda::SpreadMethod::GlobalSorted, cuda::SpreadMethod::OwnedPlanes};
        const char* method_names[] = {"auto", "shared tiles", "GM-sort", "owned planes"};
        for (int k = 0; k < 4; ++k) {
            if (methods[k] == cuda::SpreadMethod::OwnedPlanes && (c.dims != 3 || c.width > 8)) {
                EXPECT_THROW(cuda::nufft_spread_with(*be, g, *points, y_dev, grid, methods[k]), std::invalid_argument);
                continue;  // 3D and widths up to 8 only: Auto never picks it elsewhere
            }
            cuda::nufft_spread_with(*be, g, *points, y_dev, grid, methods[k]);
            const double err = relative_error(download(grid), spread_ref);
            note(worst_spread, err, c.name() + ", " + method_names[k]);
            EXPECT_LE(err, 1e-5) << c.name() << ": spread (" << method_names[k] << ") relative L2 error " << err;
        }
#endif
        cuda::nufft_spread(*be, g, *points, y_dev, grid);
        const std::vector<cdouble> spread = download(grid);
        const double spread_err = relative_error(spread, spread_ref);
        note(worst_spread, spread_err, c.name());
        EXPECT_LE(spread_err, 1e-5) << c.name() << ": spread relative L2 error " << spread_err;

        CArray samples = be->empty(sample_shape(c));
#ifdef LARMOR_WITH_CUDA
        const cuda::InterpMethod interp_methods[] = {cuda::InterpMethod::SharedTiles, cuda::InterpMethod::GlobalSorted,
                                                     cuda::InterpMethod::TileRows};
        const char* interp_names[] = {"shared tiles", "GM-sort", "tile rows"};
        const std::vector<cdouble> interp_ref = reference_interp(c, u, x);
        for (int k = 0; k < 3; ++k) {
            const bool tiled = interp_methods[k] != cuda::InterpMethod::GlobalSorted;
            if (tiled && cuda::nufft_tiling(g).tile_size() * 8 > cuda::kMaxTileBytes)
                continue;  // no tile fits: Auto never picks it
            if (interp_methods[k] == cuda::InterpMethod::TileRows && (c.dims != 3 || c.width > 8)) {
                EXPECT_THROW(cuda::nufft_interp_with(*be, g, *points, x_dev, samples, interp_methods[k]), std::invalid_argument);
                continue;  // 3D and widths up to 8 only: Auto never picks it elsewhere
            }
            cuda::nufft_interp_with(*be, g, *points, x_dev, samples, interp_methods[k]);
            const double err = relative_error(download(samples), interp_ref);
            note(worst_interp, err, c.name() + ", " + interp_names[k]);
            EXPECT_LE(err, 1e-5) << c.name() << ": interp (" << interp_names[k] << ") relative L2 error " << err;
        }
#endif
        cuda::nufft_interp(*be, g, *points, x_dev, samples);
        const std::vector<cdouble> interp = download(samples);
        const double interp_err = relative_error(interp, reference_interp(c, u, x));
        note(worst_interp, interp_err, c.name());
        EXPECT_LE(interp_err, 1e-5) << c.name() << ": interp relative L2 error " << interp_err;

        // <C^H y, x> = <y, C x>: spread is C^H, interp is C.
        const cdouble lhs = inner(spread, x), rhs = inner(y, interp);
        const double scale = norm(spread) * norm(x);
        EXPECT_LE(std::abs(lhs - rhs), 1e-5 * scale) << c.name() << ": <spread y, x> = " << lhs << " but <y, interp x> = " << rhs;
    }
};

TEST_F(NufftCudaKernels, MatchExactReference1D) {
    unsigned seed = 100;
    for (int w = 2; w <= 8; ++w)
        for (long long batch : {1LL, 4LL})
            for (Layout l : {Layout::Random, Layout::Edges, Layout::Clustered})
                check_case(Case{1, {200, 1, 1}, w, batch, 1237, l}, seed++);
    check_case(Case{1, {2100, 1, 1}, 16, 2, 3001, Layout::Random}, seed++);  // several 1024-point bins
    check_case(Case{1, {5, 1, 1}, 12, 1, 77, Layout::Random}, seed++);       // a grid narrower than the kernel
}

TEST_F(NufftCudaKernels, MatchExactReference2D) {
    unsigned seed = 200;
    for (int w = 2; w <= 8; ++w)
        for (long long batch : {1LL, 4LL})
            for (Layout l : {Layout::Random, Layout::Edges, Layout::Clustered})
                check_case(Case{2, {72, 40, 1}, w, batch, l == Layout::Clustered ? 2603 : 1237, l}, seed++);
    check_case(Case{2, {64, 64, 1}, 12, 2, 999, Layout::Random}, seed++);
    check_case(Case{2, {48, 36, 1}, 16, 1, 999, Layout::Clustered}, seed++);
}

TEST_F(NufftCudaKernels, MatchExactReference3D) {
    unsigned seed = 300;
    for (int w = 2; w <= 8; ++w)
        for (long long batch : {1LL, 4LL})
            for (Layout l : {Layout::Random, Layout::Edges, Layout::Clustered})
                check_case(Case{3, {24, 20, 18}, w, batch, l == Layout::Clustered ? 2201 : 613, l}, seed++);
    check_case(Case{3, {20, 20, 20}, 16, 1, 211, Layout::Random}, seed++);  // 4x4x4 bins: the 64 KiB tile
}

TEST_F(NufftCudaKernels, NoPoints) {
    const Case c{2, {32, 32, 1}, 4, 2, 0, Layout::Random};
    const NufftGrid g = c.grid();
    auto points = cuda::nufft_bin_points(*be, g, be->empty_real(Shape{2, 0}));
    CArray grid = be->empty(grid_shape(c)), samples = be->empty(sample_shape(c));
    be->fill(grid, cfloat(1.f, 1.f));
    cuda::nufft_spread(*be, g, *points, samples, grid);
    for (const cdouble& v : download(grid)) ASSERT_EQ(v, cdouble(0)) << "spread of no points must clear the grid";
    cuda::nufft_interp(*be, g, *points, grid, samples);
}

// A sliding window bins new points every frame; the second point set (its device blocks taken from
// the cache the first one's returned to) must not see anything of the first.
TEST_F(NufftCudaKernels, NewPointSetMatchesFresh) {
    const Case first{2, {64, 64, 1}, 6, 3, 4001, Layout::Clustered}, second{2, {64, 64, 1}, 6, 3, 4001, Layout::Random};
    const NufftGrid g = second.grid();
    const Shape us{2, 4001};
    const std::vector<cdouble> y = random_values(static_cast<size_t>(4001 * 3), 5);
    const CArray y_dev = upload(y, sample_shape(second));
    CArray grid = be->empty(grid_shape(second));
    {
        auto p1 = cuda::nufft_bin_points(*be, g, upload(make_points(first, 1), us));
        cuda::nufft_spread(*be, g, *p1, y_dev, grid);
    }
    const std::vector<float> u2 = make_points(second, 2);
    auto p2 = cuda::nufft_bin_points(*be, g, upload(u2, us));
    cuda::nufft_spread(*be, g, *p2, y_dev, grid);
    const double err = relative_error(download(grid), reference_spread(second, u2, y));
    EXPECT_LE(err, 1e-5) << "spread with a second point set: relative L2 error " << err;
}

TEST_F(NufftCudaKernels, RejectsMismatchedArguments) {
    const Case c{2, {32, 32, 1}, 4, 1, 10, Layout::Random};
    NufftGrid g = c.grid();
    auto points = cuda::nufft_bin_points(*be, g, upload(make_points(c, 3), Shape{2, 10}));
    CArray grid = be->empty(grid_shape(c)), samples = be->zeros(sample_shape(c));
    NufftGrid other = g;
    other.width = 6;
    EXPECT_THROW(cuda::nufft_spread(*be, other, *points, samples, grid), std::invalid_argument);
    other = g;
    other.batch = 2;
    EXPECT_THROW(cuda::nufft_interp(*be, other, *points, grid, samples), std::invalid_argument);
    other = g;
    other.width = 17;
    EXPECT_THROW(cuda::nufft_bin_points(*be, other, upload(make_points(c, 3), Shape{2, 10})), std::invalid_argument);
    EXPECT_THROW(cuda::nufft_bin_points(*be, g, be->zeros_real(Shape{2, 9})), std::invalid_argument);
}

}  // namespace
}  // namespace larmor
