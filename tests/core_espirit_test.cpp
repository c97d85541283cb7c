// ESPIRiT (core/coils/espirit.h) against references it does not share code with: the calibration
// matrix against its definition, the kernels' singular values and signal subspace against a
// double-precision SVD of that matrix (LAPACKE_zgesdd), the maps against larmor-phantom's analytic coil
// sensitivities on both backends, and the CUDA maps against the CPU's.
#include <gtest/gtest.h>

#include "core/dense/lapacke_cpp.h"

#include <cmath>
#include <complex>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/coils/calibration_matrix.h"
#include "core/coils/espirit.h"
#include "tests/support/backends.h"
#include "tools/phantom/phantom.h"

namespace larmor {
namespace {

using cdouble = std::complex<double>;

phantom::PhantomSpec spec_of(int coils) {
    phantom::PhantomSpec s;
    s.nx = s.ny = 128;
    s.coils = coils;
    s.fov_mm[0] = s.fov_mm[1] = 240.0;
    s.ro_oversampling = 1;
    return s;
}

// The phantom's analytic k-space [RO, E1, 1, C] as a host array.
CArray kspace_of(const phantom::Phantom& ph) {
    const phantom::PhantomSpec& s = ph.spec();
    const std::vector<std::complex<float>> k = ph.kspace_all();
    CArray a = CArray::host({size_t(s.nx), size_t(s.ny), 1, size_t(s.coils)});
    std::copy(k.begin(), k.end(), a.data());
    return a;
}

// The 24 central lines, as the ACS block of a scan.
constexpr size_t kAcsLo = 64 - 12, kAcsHi = 64 + 12;

TEST(CalibrationMatrix, RowsAreTheKernelWindows) {
    const size_t cx = 5, cy = 4, coils = 2;
    CArray block = CArray::host({cx, cy, coils});
    for (size_t c = 0; c < coils; ++c)
        for (size_t y = 0; y < cy; ++y)
            for (size_t x = 0; x < cx; ++x) block.data()[x + cx * (y + cy * c)] = cfloat(float(x + 10 * y), float(c));
    const int k = 3;
    const CArray a = coils::calibration_matrix(block, k);
    const size_t wx = cx - k + 1, wy = cy - k + 1, rows = wx * wy;
    ASSERT_EQ(a.shape(), Shape({rows, size_t(k * k) * coils}));
    for (size_t c = 0; c < coils; ++c)
        for (size_t py = 0; py < size_t(k); ++py)
            for (size_t px = 0; px < size_t(k); ++px)
                for (size_t y = 0; y < wy; ++y)
                    for (size_t x = 0; x < wx; ++x)
                        EXPECT_EQ(a.data()[(x + wx * y) + rows * (px + k * py + k * k * c)],
                                  cfloat(float(x + px + 10 * (y + py)), float(c)));
    try {
        coils::calibration_matrix(block, 5);
        FAIL() << "a kernel wider than the block was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("does not fit"), std::string::npos) << e.what();
    }
}

// Double-precision thin SVD of a column-major m x n matrix: singular values and V^H (k x n).
void reference_svd(const CArray& a, std::vector<double>& s, std::vector<cdouble>& vt) {
    const size_t m = a.shape()[0], n = a.shape()[1], k = std::min(m, n);
    std::vector<cdouble> ad(a.data(), a.data() + a.size()), u(m * k);
    s.assign(k, 0.0);
    vt.assign(k * n, 0.0);
    const lapack_int info =
        LAPACKE_zgesdd(LAPACK_COL_MAJOR, 'S', lapack_int(m), lapack_int(n), reinterpret_cast<lapack_complex_double*>(ad.data()),
                       lapack_int(m), s.data(), reinterpret_cast<lapack_complex_double*>(u.data()), lapack_int(m),
                       reinterpret_cast<lapack_complex_double*>(vt.data()), lapack_int(k));
    ASSERT_EQ(info, 0);
}

// || y - Q Q^H y || for orthonormal columns Q (n x r, column-major), y of n.
double off_subspace(const std::vector<cdouble>& q, size_t n, size_t r, const std::vector<cdouble>& y) {
    std::vector<cdouble> rest = y;
    for (size_t j = 0; j < r; ++j) {
        cdouble dot = 0;
        for (size_t i = 0; i < n; ++i) dot += std::conj(q[i + n * j]) * y[i];
        for (size_t i = 0; i < n; ++i) rest[i] -= q[i + n * j] * dot;
    }
    double r2 = 0;
    for (const cdouble& v : rest) r2 += std::norm(v);
    return std::sqrt(r2);
}

// The kernels come from the float Gram matrix's eigendecomposition on the backend; a double SVD of
// the calibration matrix is the reference (the paper's definition). The windows x_w lie in the span
// of the rows of V^H (A's rows are x_w^T), which is what the kernels must span.
// Both ways to the subspace: the 24 x 24 block has more windows than kernel entries (361 > 288: the
// eigenproblem of B^H B), the 16 x 16 block of a 3D scan's readout position fewer (121 < 288: that of
// B B^H, then the span of B^H u_j).
TEST(Espirit, KernelsMatchADoubleSvdOfTheCalibrationMatrix) {
    auto cpu = make_cpu_backend();
    const phantom::Phantom ph(spec_of(8));
    for (const size_t size : {size_t(24), size_t(16)}) {
        const CArray block = coils::calibration_block(kspace_of(ph), kAcsLo, kAcsHi, size, size);
        coils::EspiritSettings s;
        const coils::EspiritKernels kern = coils::espirit_kernels(*cpu, block, s);

        std::vector<double> sd;
        std::vector<cdouble> vt;
        reference_svd(coils::calibration_matrix(block, s.kernel), sd, vt);
        double peak = 0;  // the kernels' singular values are those of A over the block's largest magnitude
        for (size_t i = 0; i < block.size(); ++i) peak = std::max(peak, double(std::abs(block.data()[i])));
        for (double& v : sd) v /= peak;
        const size_t n = size_t(s.kernel * s.kernel) * 8, k = sd.size();
        ASSERT_EQ(kern.singular_values.size(), n);
        for (size_t j = 0; j < n; ++j)
            EXPECT_NEAR(kern.singular_values[j], j < k ? sd[j] : 0.0, 2e-3 * sd[0]) << size << ": singular value " << j;
        size_t lo = 0, hi = 0;  // kept counts at a threshold 5 % above and below
        while (lo < k && sd[lo] >= 1.05 * s.threshold * sd[0]) ++lo;
        while (hi < k && sd[hi] >= 0.95 * s.threshold * sd[0]) ++hi;
        EXPECT_GE(kern.kept, lo);
        EXPECT_LE(kern.kept, hi);
        std::printf("[ espirit ] 8 coils, %zu x %zu block, 6 x 6 kernel: %zu of %zu singular vectors kept (sigma_max %.4g)\n",
                    size, size, kern.kept, n, sd[0]);

        std::vector<cdouble> mine(kern.subspace.data(), kern.subspace.data() + kern.subspace.size());
        // The basis is orthonormal (the maps' projection P = V V^H relies on it).
        double worst = 0;
        for (size_t p = 0; p < kern.kept; ++p)
            for (size_t q = 0; q <= p; ++q) {
                cdouble dot = 0;
                for (size_t i = 0; i < n; ++i) dot += std::conj(mine[i + n * q]) * mine[i + n * p];
                worst = std::max(worst, std::abs(dot - cdouble(p == q ? 1.0 : 0.0)));
            }
        EXPECT_LT(worst, 1e-5) << size << ": V^H V - I";
        std::vector<cdouble> ref(n * hi);
        for (size_t j = 0; j < hi; ++j)
            for (size_t i = 0; i < n; ++i) ref[i + n * j] = vt[j + k * i];  // row j of V^H as a column
        // Every well-determined reference vector lies in the kernels' span, and every kernel vector of
        // a well-determined singular value in the reference's.
        for (size_t j = 0; j < k && sd[j] >= 10 * s.threshold * sd[0]; ++j) {
            std::vector<cdouble> y(ref.begin() + n * j, ref.begin() + n * (j + 1));
            EXPECT_LT(off_subspace(mine, n, kern.kept, y), 1e-2) << size << ": reference vector " << j;
            std::vector<cdouble> z(mine.begin() + n * j, mine.begin() + n * (j + 1));
            EXPECT_LT(off_subspace(ref, n, hi, z), 1e-2) << size << ": kernel vector " << j;
        }
    }
}

class EspiritMaps : public test::BackendTest {};

// The maps against the phantom's coil sensitivities S_c(r), which are analytic (plane-wave sums) and
// not what the data were made with numerically (the k-space is the exact transform, no FFT): inside
// the object each map is S(r) / |S(r)| up to one phase per pixel, so |<m, S>| / (|m| |S|) is 1.
TEST_P(EspiritMaps, MatchThePhantomsCoilSensitivities) {
    const phantom::PhantomSpec spec = spec_of(8);
    const phantom::Phantom ph(spec);
    coils::EspiritSettings s;
    const coils::EspiritMaps m = coils::espirit_maps(*be, be->to_device(kspace_of(ph)), kAcsLo, kAcsHi, s);
    ASSERT_EQ(m.maps.shape(), Shape({128, 128, 1, 8}));
    const CArray maps = be->to_host(m.maps);
    const RArray ev = be->to_host(m.eigenvalues);
    const std::vector<double> object = ph.image(0);
    const size_t nx = 128, ny = 128, coils = 8, pixels = nx * ny;
    auto inside = [&](long x, long y) {
        for (long dy = -2; dy <= 2; ++dy)
            for (long dx = -2; dx <= 2; ++dx) {
                const long u = x + dx, v = y + dy;
                if (u < 0 || v < 0 || u >= long(nx) || v >= long(ny) || !(object[size_t(u) + nx * size_t(v)] > 0)) return false;
            }
        return true;
    };
    size_t interior = 0, good = 0, unit = 0, high = 0;
    double sum = 0, worst = 1;
    for (size_t y = 0; y < ny; ++y)
        for (size_t x = 0; x < nx; ++x) {
            if (!inside(long(x), long(y))) continue;
            ++interior;
            const double px = (double(x) - nx / 2.0) * spec.fov_mm[0] / nx, py = (double(y) - ny / 2.0) * spec.fov_mm[1] / ny;
            cdouble dot = 0;
            double nm = 0, ns = 0;
            for (size_t c = 0; c < coils; ++c) {
                const cdouble sc = ph.sensitivity(int(c), px, py);
                const cdouble mc = cdouble(maps.data()[x + nx * y + pixels * c]);
                dot += std::conj(mc) * sc;
                nm += std::norm(mc);
                ns += std::norm(sc);
            }
            const double corr = nm > 0 ? std::abs(dot) / std::sqrt(nm * ns) : 0.0;
            sum += corr;
            worst = std::min(worst, corr);
            good += corr > 0.98;
            unit += std::abs(std::sqrt(nm) - 1.0) < 1e-3;
            high += ev.data()[x + nx * y] > 0.9f;
        }
    ASSERT_GT(interior, pixels / 4);
    std::printf("[ espirit ] %s: %zu interior pixels: mean |<m, S>| / |m| |S| %.5f, worst %.4f, > 0.98: %.2f %%, "
                "unit norm %.2f %%, eigenvalue > 0.9: %.2f %%\n",
                device_name(be->device()), interior, sum / interior, worst, 100.0 * good / interior,
                100.0 * unit / interior, 100.0 * high / interior);
    EXPECT_GT(sum / interior, 0.995);
    EXPECT_GT(double(good) / interior, 0.99);
    EXPECT_GT(double(unit) / interior, 0.99);
    EXPECT_GT(double(high) / interior, 0.99);
}

// 3D: 48^3, 8 coils, a 16 x 16 calibration region in (e1, e2); maps per readout position after the
// inverse FFT along it, checked against the analytic sensitivities as in 2D. With two sets the first is
// the same map, and the second, of the same shape, is empty almost everywhere (the FOV covers the object).
TEST_P(EspiritMaps, ThreeDimensionalMapsMatchThePhantomsCoilSensitivities) {
    phantom::PhantomSpec spec;
    spec.dims = 3;
    spec.nx = spec.ny = spec.nz = 48;
    spec.coils = 8;
    spec.fov_mm[0] = spec.fov_mm[1] = spec.fov_mm[2] = 200.0;
    spec.ro_oversampling = 1;
    const phantom::Phantom ph(spec);
    const size_t n = 48, coils = 8, voxels = n * n * n;
    const std::vector<std::complex<float>> k = ph.kspace_all();
    CArray kh = CArray::host({n, n, n, coils});
    std::copy(k.begin(), k.end(), kh.data());
    for (int sets : {1, 2}) {
        coils::EspiritSettings s;
        s.calibration = 16;
        s.sets = sets;
        const coils::EspiritMaps m = coils::espirit_maps_3d(*be, be->to_device(kh), 16, 32, 16, 32, s);
        ASSERT_EQ(m.maps.shape(), Shape({n, n, n, coils}));
        const CArray maps = be->to_host(m.maps);
        if (sets == 2) {
            ASSERT_EQ(m.second.shape(), Shape({n, n, n, coils}));
            ASSERT_EQ(m.second_eigenvalues.shape(), Shape({n, n, n}));
            const CArray second = be->to_host(m.second);
            size_t nonzero = 0;
            for (size_t v = 0; v < voxels; ++v) {
                double e = 0;
                for (size_t c = 0; c < coils; ++c) e += std::norm(second.data()[v + voxels * c]);
                nonzero += e > 0;
            }
            std::printf("[ espirit ] 3D %s, two sets: second set non-zero in %.2f %% of the voxels\n",
                        device_name(be->device()), 100.0 * double(nonzero) / double(voxels));
            EXPECT_LT(double(nonzero) / double(voxels), 0.05);
        }
        const std::vector<double> object = ph.image(0);
        auto at = [&](long x, long y, long z) {
            if (x < 0 || y < 0 || z < 0 || x >= long(n) || y >= long(n) || z >= long(n)) return 0.0;
            return object[size_t(x) + n * (size_t(y) + n * size_t(z))];
        };
        size_t interior = 0, good = 0;
        double sum = 0;
        for (size_t z = 0; z < n; ++z)
            for (size_t y = 0; y < n; ++y)
                for (size_t x = 0; x < n; ++x) {
                    bool inside = true;
                    for (long d = -2; d <= 2 && inside; ++d)
                        inside = at(long(x) + d, long(y), long(z)) > 0 && at(long(x), long(y) + d, long(z)) > 0 &&
                                 at(long(x), long(y), long(z) + d) > 0;
                    if (!inside) continue;
                    ++interior;
                    const double f = spec.fov_mm[0] / double(n);
                    cdouble dot = 0;
                    double nm = 0, ns = 0;
                    for (size_t c = 0; c < coils; ++c) {
                        const cdouble sc = ph.sensitivity(int(c), (double(x) - n / 2.0) * f, (double(y) - n / 2.0) * f,
                                                          (double(z) - n / 2.0) * f);
                        const cdouble mc = cdouble(maps.data()[x + n * (y + n * z) + voxels * c]);
                        dot += std::conj(mc) * sc;
                        nm += std::norm(mc);
                        ns += std::norm(sc);
                    }
                    const double corr = nm > 0 ? std::abs(dot) / std::sqrt(nm * ns) : 0.0;
                    sum += corr;
                    good += corr > 0.98;
                }
        ASSERT_GT(interior, voxels / 10);
        std::printf("[ espirit ] 3D %s, %d set(s): %zu interior voxels: mean |<m, S>| / |m| |S| %.5f, > 0.98: %.2f %%\n",
                    device_name(be->device()), sets, interior, sum / interior, 100.0 * good / interior);
        EXPECT_GT(sum / interior, 0.999) << sets;
        EXPECT_GT(double(good) / interior, 0.99) << sets;
    }
}

// Two sets where the FOV covers the object: the first set is the one-set maps, and the second is empty
// (G has one eigenvalue near 1 and the rest below the crop) almost everywhere: on the CPU 3.6 % of the
// pixels keep a second eigenvalue above the crop.
TEST_P(EspiritMaps, TwoSetsOnAFullFovLeaveTheSecondEmpty) {
    const phantom::Phantom ph(spec_of(8));
    coils::EspiritSettings one, two;
    two.sets = 2;
    const CArray k = be->to_device(kspace_of(ph));
    const coils::EspiritMaps a = coils::espirit_maps(*be, k, kAcsLo, kAcsHi, one);
    const coils::EspiritMaps b = coils::espirit_maps(*be, k, kAcsLo, kAcsHi, two);
    ASSERT_TRUE(a.second.empty());
    ASSERT_EQ(b.second.shape(), Shape({128, 128, 1, 8}));
    ASSERT_EQ(b.second_eigenvalues.shape(), Shape({128, 128}));
    const CArray ma = be->to_host(a.maps), mb = be->to_host(b.maps), m2 = be->to_host(b.second);
    double diff = 0;
    for (size_t i = 0; i < ma.size(); ++i) diff = std::max(diff, double(std::abs(ma.data()[i] - mb.data()[i])));
    EXPECT_EQ(diff, 0.0) << "the first of two sets is the one-set map";
    size_t nonzero = 0;
    const size_t pixels = 128 * 128;
    for (size_t i = 0; i < pixels; ++i) {
        double e = 0;
        for (size_t c = 0; c < 8; ++c) e += std::norm(m2.data()[i + pixels * c]);
        nonzero += e > 0;
    }
    std::printf("[ espirit ] %s, two sets, full FOV: second set non-zero in %.2f %% of the pixels\n",
                device_name(be->device()), 100.0 * double(nonzero) / double(pixels));
    EXPECT_LT(double(nonzero) / double(pixels), 0.05);
}

// Half the FOV along y (every other k-space line of the 128^2 phantom): pixel y' of the 64-line image
// holds the object at Y' and at Y' +- 64 (pixels from the centre), so its coil vector is
// d = rho(Y') S(Y') + rho(Y' +- 64) S(Y' +- 64). One set of maps holds d only in part where both places
// lie inside the object; two sets span it (Uecker et al. 2014, "Relation to SENSE"). Measured on the
// CPU: the first set keeps 98.2 % of |d|^2 on average, both sets 100.0 %. (BART's `ecalib -m 2` on the
// same data keeps 98.8 % with its first set and crops its second, whose eigenvalues there stay below 0.75.)
TEST_P(EspiritMaps, TwoSetsSpanTheCoilVectorsOfAFoldedObject) {
    const phantom::PhantomSpec spec = spec_of(8);
    const phantom::Phantom ph(spec);
    const CArray full = kspace_of(ph);
    const size_t nx = 128, ny = 64, coils = 8, pixels = nx * ny;
    CArray half = CArray::host({nx, ny, 1, coils});
    for (size_t c = 0; c < coils; ++c)
        for (size_t y = 0; y < ny; ++y)
            std::copy_n(full.data() + nx * (2 * y + 128 * c), nx, half.data() + nx * (y + ny * c));
    coils::EspiritSettings s;
    s.sets = 2;
    const coils::EspiritMaps m = coils::espirit_maps(*be, be->to_device(half), 32 - 12, 32 + 12, s);
    const CArray m1 = be->to_host(m.maps), m2 = be->to_host(m.second);
    const double mm = spec.fov_mm[0] / 128.0;  // pixel size, unchanged along y (half the lines, half the FOV)
    size_t overlap = 0;
    double kept_one = 0, kept_two = 0;
    for (size_t y = 0; y < ny; ++y)
        for (size_t x = 0; x < nx; ++x) {
            const double px = (double(x) - 64.0) * mm;
            const long yp = long(y) - 32, other = yp < 0 ? yp + 64 : yp - 64;
            bool both = true;
            for (long d = -3; d <= 3 && both; ++d)
                both = ph.image_value(px, double(yp + d) * mm) > 0 && ph.image_value(px, double(other + d) * mm) > 0 &&
                       ph.image_value(px + double(d) * mm, double(yp) * mm) > 0 &&
                       ph.image_value(px + double(d) * mm, double(other) * mm) > 0;
            if (!both) continue;
            ++overlap;
            std::vector<cdouble> d(coils);
            for (long at : {yp, other})
                for (size_t c = 0; c < coils; ++c)
                    d[c] += ph.image_value(px, double(at) * mm) * ph.sensitivity(int(c), px, double(at) * mm);
            // |m^H d|^2 / |d|^2 for each set (the sets are orthonormal where both are non-zero).
            cdouble d1 = 0, d2 = 0;
            double nd = 0;
            for (size_t c = 0; c < coils; ++c) {
                d1 += std::conj(cdouble(m1.data()[x + nx * y + pixels * c])) * d[c];
                d2 += std::conj(cdouble(m2.data()[x + nx * y + pixels * c])) * d[c];
                nd += std::norm(d[c]);
            }
            kept_one += std::norm(d1) / nd;
            kept_two += (std::norm(d1) + std::norm(d2)) / nd;
        }
    ASSERT_GT(overlap, 200u) << "the folded object should overlap itself";
    kept_one /= double(overlap);
    kept_two /= double(overlap);
    std::printf("[ espirit ] %s, half FOV, %zu overlap pixels: share of the coil vector's energy in the first set "
                "%.4f, in both sets %.4f\n",
                device_name(be->device()), overlap, kept_one, kept_two);
    EXPECT_LT(std::abs(1.0 - kept_two), 0.005);
    EXPECT_GT(1.0 - kept_one, 3.0 * std::abs(1.0 - kept_two)) << "the second set should hold what the first misses";
}

LARMOR_INSTANTIATE_BACKEND_TEST(EspiritMaps);

// The two backends run the same algorithm in the same order up to float rounding: the maps agree
// wherever the eigenvalue is not at the crop threshold (where one may keep a pixel the other drops).
TEST(Espirit, CudaMapsMatchTheCpus) {
    auto gpu = test::backend_for(Device::Cuda);
    if (!gpu) GTEST_SKIP() << "no usable CUDA device";
    auto cpu = make_cpu_backend();
    const phantom::Phantom ph(spec_of(12));
    const CArray k = kspace_of(ph);
    coils::EspiritSettings s;
    const coils::EspiritMaps a = coils::espirit_maps(*cpu, k, kAcsLo, kAcsHi, s);
    const coils::EspiritMaps b = coils::espirit_maps(*gpu, gpu->to_device(k), kAcsLo, kAcsHi, s);
    const CArray mb = gpu->to_host(b.maps);
    const RArray eb = gpu->to_host(b.eigenvalues);
    const size_t pixels = 128 * 128;
    double worst_map = 0, worst_ev = 0;
    for (size_t p = 0; p < pixels; ++p) {
        worst_ev = std::max(worst_ev, double(std::abs(a.eigenvalues.data()[p] - eb.data()[p])));
        if (std::abs(a.eigenvalues.data()[p] - s.crop) < 0.02f) continue;
        for (size_t c = 0; c < 12; ++c)
            worst_map = std::max(worst_map, double(std::abs(a.maps.data()[p + pixels * c] - mb.data()[p + pixels * c])));
    }
    std::printf("[ espirit ] CUDA vs CPU, 12 coils: largest map difference %.3g, eigenvalue %.3g\n", worst_map, worst_ev);
    EXPECT_LT(worst_map, 2e-3);
    EXPECT_LT(worst_ev, 1e-3);
}

// Two sets on a folded object (half the FOV): where the two eigenvalues are both near 1 the individual
// vectors are any basis of their plane, so CPU and CUDA are compared by the projector onto the two sets,
// m1 m1^H + m2 m2^H, and by the eigenvalues.
TEST(Espirit, TwoSetsCudaMatchesTheCpu) {
    auto gpu = test::backend_for(Device::Cuda);
    if (!gpu) GTEST_SKIP() << "no usable CUDA device";
    auto cpu = make_cpu_backend();
    const phantom::Phantom ph(spec_of(8));
    const CArray full = kspace_of(ph);
    const size_t nx = 128, ny = 64, c = 8, pixels = nx * ny;
    CArray half = CArray::host({nx, ny, 1, c});
    for (size_t q = 0; q < c; ++q)
        for (size_t y = 0; y < ny; ++y) std::copy_n(full.data() + nx * (2 * y + 128 * q), nx, half.data() + nx * (y + ny * q));
    coils::EspiritSettings s;
    s.sets = 2;
    const coils::EspiritMaps a = coils::espirit_maps(*cpu, half, 20, 44, s);
    const coils::EspiritMaps b = coils::espirit_maps(*gpu, gpu->to_device(half), 20, 44, s);
    const CArray b1 = gpu->to_host(b.maps), b2 = gpu->to_host(b.second);
    const RArray e1 = gpu->to_host(b.eigenvalues), e2 = gpu->to_host(b.second_eigenvalues);
    size_t compared = 0, close = 0;
    double worst_ev = 0;
    for (size_t p = 0; p < pixels; ++p) {
        worst_ev = std::max({worst_ev, double(std::abs(a.eigenvalues.data()[p] - e1.data()[p])),
                             double(std::abs(a.second_eigenvalues.data()[p] - e2.data()[p]))});
        if (std::abs(a.eigenvalues.data()[p] - s.crop) < 0.02f || std::abs(a.second_eigenvalues.data()[p] - s.crop) < 0.02f)
            continue;
        ++compared;
        double d = 0;
        for (size_t i = 0; i < c; ++i)
            for (size_t j = 0; j < c; ++j) {
                auto proj = [&](const cfloat* m1, const cfloat* m2) {
                    return cdouble(m1[p + pixels * i]) * std::conj(cdouble(m1[p + pixels * j])) +
                           cdouble(m2[p + pixels * i]) * std::conj(cdouble(m2[p + pixels * j]));
                };
                d += std::norm(proj(a.maps.data(), a.second.data()) - proj(b1.data(), b2.data()));
            }
        close += std::sqrt(d) < 1e-2;
    }
    std::printf("[ espirit ] CUDA vs CPU, two sets, half FOV: projector within 1e-2 in %.2f %% of %zu pixels, "
                "largest eigenvalue difference %.3g\n",
                100.0 * double(close) / double(compared), compared, worst_ev);
    EXPECT_GT(double(close) / double(compared), 0.99);
    EXPECT_LT(worst_ev, 2e-3);
}

TEST(Espirit, SettingsOutsideTheirRangeAreRefusedByName) {
    auto expect_refused = [](coils::EspiritSettings s, const std::string& what) {
        try {
            coils::check(s);
            ADD_FAILURE() << what << " was accepted";
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
    };
    coils::EspiritSettings s;
    s.kernel = 1;
    expect_refused(s, "kernel 1");
    s = {};
    s.calibration = 6;
    expect_refused(s, "calibration size 6");
    s = {};
    s.threshold = 0.f;
    expect_refused(s, "threshold 0");
    s = {};
    s.crop = 1.f;
    expect_refused(s, "crop 1");
    s = {};
    s.iterations = 0;
    expect_refused(s, "iterations 0");
    s = {};
    s.sets = 3;
    expect_refused(s, "sets 3");
}

// The subspace and the maps do not depend on the data's scale, even where the Gram matrix of the raw
// data would underflow or overflow float (its entries are squares of samples).
TEST(Espirit, MapsDoNotDependOnTheDataScale) {
    auto cpu = make_cpu_backend();
    const phantom::Phantom ph(spec_of(4));
    const CArray k = kspace_of(ph);
    coils::EspiritSettings s;
    const coils::EspiritMaps ref = coils::espirit_maps(*cpu, k, kAcsLo, kAcsHi, s);
    for (float scale : {0x1p-80f, 0x1p+80f}) {  // powers of two: exact, so the maps must not move at all
        CArray ks = CArray::host(k.shape());
        for (size_t i = 0; i < k.size(); ++i) ks.data()[i] = k.data()[i] * scale;
        const coils::EspiritMaps m = coils::espirit_maps(*cpu, ks, kAcsLo, kAcsHi, s);
        double worst = 0;
        for (size_t i = 0; i < m.maps.size(); ++i)
            worst = std::max(worst, double(std::abs(m.maps.data()[i] - ref.maps.data()[i])));
        EXPECT_LT(worst, 1e-6) << "scale " << scale;
    }
    CArray bad = CArray::host(k.shape());
    std::copy(k.data(), k.data() + k.size(), bad.data());
    bad.data()[64 + 128 * 64] = cfloat(INFINITY, 0.f);
    try {
        coils::espirit_maps(*cpu, bad, kAcsLo, kAcsHi, s);
        FAIL() << "a block with an infinite sample gave maps";
    } catch (const coils::EspiritError& e) {
        EXPECT_NE(std::string(e.what()).find("overflowed"), std::string::npos) << e.what();
    }
}

TEST(Espirit, ACalibrationBlockWithoutSignalIsRefused) {
    auto cpu = make_cpu_backend();
    const CArray block = CArray::host({24, 24, 4});
    try {
        coils::espirit_kernels(*cpu, block, {});
        FAIL() << "an all-zero block gave kernels";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("no usable signal"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace larmor
