// Tests of larmor-phantom (tools/phantom): the analytic transforms against independent numerical
// integrals, the coil model against a direct DFT of sensitivity x object, and the written ISMRMRD files.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <ismrmrd/dataset.h>
#include <ismrmrd/ismrmrd.h>
#include <ismrmrd/xml.h>
#include <unistd.h>

#include "tools/phantom/phantom.h"

namespace {

using namespace larmor::phantom;
constexpr double kPi = 3.14159265358979323846;

cdouble expi(double a) { return {std::cos(a), std::sin(a)}; }

// Gauss-Legendre nodes and weights on [a, b] (Newton on P_n, Golub-Welsch-free textbook version).
void gauss_legendre(int n, double a, double b, std::vector<double>& x, std::vector<double>& w) {
  x.assign(n, 0.0);
  w.assign(n, 0.0);
  for (int i = 0; i < (n + 1) / 2; ++i) {
    double z = std::cos(kPi * (i + 0.75) / (n + 0.5)), dp = 0.0;
    for (int it = 0; it < 100; ++it) {
      double p0 = 1.0, p1 = 0.0;
      for (int j = 0; j < n; ++j) {
        const double p2 = p1;
        p1 = p0;
        p0 = ((2.0 * j + 1.0) * z * p1 - j * p2) / (j + 1.0);
      }
      dp = n * (z * p0 - p1) / (z * z - 1.0);
      const double dz = p0 / dp;
      z -= dz;
      if (std::abs(dz) < 1e-16) break;
    }
    const double m = 0.5 * (a + b), h = 0.5 * (b - a);
    x[i] = m - h * z;
    x[n - 1 - i] = m + h * z;
    w[i] = w[n - 1 - i] = 2.0 * h / ((1.0 - z * z) * dp * dp);
  }
}

// Integral of exp(-i2pi kx x) over [c - hw, c + hw], exactly.
cdouble segment_ft(double kx, double c, double hw) {
  const double len = std::abs(kx) < 1e-300 ? 2.0 * hw : std::sin(2.0 * kPi * kx * hw) / (kPi * kx);
  return len * expi(-2.0 * kPi * kx * c);
}

// (A A^T)^-1 for the top-left d x d block of a row-major 3x3 A.
std::array<double, 9> quadric(const Ellipsoid& e) {
  const auto& a = e.matrix();
  const int d = e.dims();
  std::array<double, 9> m{};  // A A^T
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j)
      for (int l = 0; l < d; ++l) m[i * 3 + j] += a[i * 3 + l] * a[j * 3 + l];
  if (d == 2) m[8] = 1.0;
  const double det = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
                     m[2] * (m[3] * m[7] - m[4] * m[6]);
  return {(m[4] * m[8] - m[5] * m[7]) / det, (m[2] * m[7] - m[1] * m[8]) / det, (m[1] * m[5] - m[2] * m[4]) / det,
          (m[5] * m[6] - m[3] * m[8]) / det, (m[0] * m[8] - m[2] * m[6]) / det, (m[2] * m[3] - m[0] * m[5]) / det,
          (m[3] * m[7] - m[4] * m[6]) / det, (m[1] * m[6] - m[0] * m[7]) / det, (m[0] * m[4] - m[1] * m[3]) / det};
}

// Independent FT of a 2D ellipse: exact integral along x of each chord, Gauss-Legendre over y with
// y = c_y + Y sin(theta), which removes the square-root endpoints so the quadrature converges exponentially.
cdouble ellipse_ft_quadrature(const Ellipsoid& e, double kx, double ky, int n) {
  const auto q = quadric(e);
  const double q00 = q[0], q01 = q[1], q11 = q[4], detq = q00 * q11 - q01 * q01;
  const double ymax = std::sqrt(q00 / detq);
  std::vector<double> th, w;
  gauss_legendre(n, -kPi / 2, kPi / 2, th, w);
  cdouble f = 0.0;
  for (int i = 0; i < n; ++i) {
    const double dy = ymax * std::sin(th[i]), jac = ymax * std::cos(th[i]);
    const double hw = std::sqrt(std::max(0.0, q00 - dy * dy * detq)) / q00;
    const double xm = e.centre()[0] - q01 * dy / q00;
    f += w[i] * jac * segment_ft(kx, xm, hw) * expi(-2.0 * kPi * ky * (e.centre()[1] + dy));
  }
  return e.intensity() * f;
}

// Independent FT of a 3D ellipsoid: exact chord integrals along x over its shadow on the y-z plane, the
// shadow parametrised as d = L r (cos t, sin t), r = sin(psi) (Gauss-Legendre in psi, trapezoid in t).
cdouble ellipsoid_ft_quadrature(const Ellipsoid& e, double kx, double ky, double kz, int npsi, int nt) {
  const auto q = quadric(e);
  const double q00 = q[0];
  const double s00 = (q00 * q[4] - q[1] * q[1]) / q00, s01 = (q00 * q[5] - q[1] * q[2]) / q00,
               s11 = (q00 * q[8] - q[2] * q[2]) / q00;
  const double ds = s00 * s11 - s01 * s01;
  const double i00 = s11 / ds, i01 = -s01 / ds, i11 = s00 / ds;  // S^-1 = L L^T
  const double l00 = std::sqrt(i00), l10 = i01 / l00, l11 = std::sqrt(i11 - l10 * l10);
  std::vector<double> ps, w;
  gauss_legendre(npsi, 0.0, kPi / 2, ps, w);
  const auto& c = e.centre();
  cdouble f = 0.0;
  for (int i = 0; i < npsi; ++i) {
    const double r = std::sin(ps[i]), jac = l00 * l11 * r * std::cos(ps[i]);
    const double hw = std::cos(ps[i]) / std::sqrt(q00);
    for (int j = 0; j < nt; ++j) {
      const double t = 2.0 * kPi * j / nt;
      const double u0 = r * std::cos(t), u1 = r * std::sin(t);
      const double dy = l00 * u0, dz = l10 * u0 + l11 * u1;
      const double xm = c[0] - (q[1] * dy + q[2] * dz) / q00;
      f += (w[i] * jac * 2.0 * kPi / nt) * segment_ft(kx, xm, hw) *
           expi(-2.0 * kPi * (ky * (c[1] + dy) + kz * (c[2] + dz)));
    }
  }
  return e.intensity() * f;
}

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("larmor_phantom_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

struct FileContents {
  ISMRMRD::IsmrmrdHeader header;
  std::string xml;
  std::vector<ISMRMRD::Acquisition> acqs;
};

FileContents read_file(const std::string& path) {
  FileContents out;
  ISMRMRD::Dataset d(path.c_str(), "dataset", false);
  d.readHeader(out.xml);
  ISMRMRD::deserialize(out.xml.c_str(), out.header);
  const uint32_t n = d.getNumberOfAcquisitions();
  out.acqs.resize(n);
  for (uint32_t i = 0; i < n; ++i) d.readAcquisition(i, out.acqs[i]);
  return out;
}

bool flag(const ISMRMRD::Acquisition& a, int f) { return (a.getHead().flags >> (f - 1)) & 1u; }

PhantomSpec small2d(int n, int coils) {
  PhantomSpec s;
  s.nx = s.ny = n;
  s.coils = coils;
  return s;
}

// Centred, orthonormal inverse DFT of an (n0, n1, n2) array (x fastest), samples at k = (n - N/2)/FOV,
// pixels at (j - N/2) FOV/N: the design's FFT convention, done as exact sums.
std::vector<cdouble> idft(std::vector<cdouble> a, const std::array<int, 3>& n) {
  const std::size_t stride[3] = {1, std::size_t(n[0]), std::size_t(n[0]) * n[1]};
  for (int axis = 0; axis < 3; ++axis) {
    const int len = n[axis];
    if (len == 1) continue;
    std::vector<cdouble> e(static_cast<std::size_t>(len) * len), in(len);
    for (int j = 0; j < len; ++j)
      for (int m = 0; m < len; ++m) e[j * len + m] = expi(2.0 * kPi * double(m - len / 2) * (j - len / 2) / len) / std::sqrt(double(len));
    for (std::size_t base = 0; base < a.size(); ++base) {
      if ((base / stride[axis]) % len != 0) continue;  // one start per line along this axis
      for (int m = 0; m < len; ++m) in[m] = a[base + m * stride[axis]];
      for (int j = 0; j < len; ++j) {
        cdouble s = 0.0;
        for (int m = 0; m < len; ++m) s += e[j * len + m] * in[m];
        a[base + j * stride[axis]] = s;
      }
    }
  }
  return a;
}

// ---------------------------------------------------------------------------------------------------------
// Analytic transforms

TEST(PhantomTransforms, UnitShapes) {
  EXPECT_DOUBLE_EQ(unit_disk_ft(0.0), kPi);
  EXPECT_DOUBLE_EQ(unit_ball_ft(0.0), 4.0 * kPi / 3.0);
  // The J1 in use against the C++17 special function, and the small-argument series against the closed
  // forms where both are accurate (just above the switch points).
  for (double q = 1e-3; q < 300.0; q *= 1.37)
    EXPECT_NEAR(unit_disk_ft(q), std::cyl_bessel_j(1.0, 2.0 * kPi * q) / q, 1e-11) << q;
  for (double z : {0.0999999, 0.1000001}) {
    const double q = z / (2.0 * kPi);
    const double closed = 4.0 * kPi * (std::sin(z) - z * std::cos(z)) / (z * z * z);
    EXPECT_NEAR(unit_ball_ft(q), closed, 1e-12);
  }
  for (double z : {0.000999, 0.001001}) {
    const double q = z / (2.0 * kPi);
    EXPECT_NEAR(unit_disk_ft(q), std::cyl_bessel_j(1.0, z) / q, 1e-13);
  }
}

TEST(PhantomTransforms, EllipseMatchesChordQuadrature) {
  // A rotated, shifted ellipse (Toft's ellipse 3 scaled to a 256 mm FOV) and a generic one.
  const auto sl = modified_shepp_logan_2d(128.0, 128.0);
  const Ellipsoid generic = Ellipsoid::ellipse(0.7, -13.0, 21.0, 37.0, 11.0, 0.4);
  for (const Ellipsoid& e : {sl[2], sl[3], generic}) {
    EXPECT_NEAR(std::abs(e.ft(0, 0)), std::abs(e.intensity()) * e.measure(), 1e-12 * e.measure());
    const double scale = std::abs(e.intensity()) * e.measure();
    for (auto k : std::vector<std::array<double, 2>>{{0, 0}, {0.01, 0}, {0, -0.02}, {0.013, 0.027}, {-0.11, 0.07}, {0.25, -0.31}}) {
      const cdouble a = e.ft(k[0], k[1]);
      const cdouble b = ellipse_ft_quadrature(e, k[0], k[1], 400);
      EXPECT_LT(std::abs(a - b), 1e-11 * scale) << k[0] << "," << k[1] << " " << a << " vs " << b;
    }
  }
}

TEST(PhantomTransforms, EllipsoidMatchesChordQuadrature) {
  // Ellipsoids 3 and 4 of the 3D phantom are rotated by Euler angles and shifted; add an oblique one.
  const auto sl = modified_shepp_logan_3d(120.0, 128.0, 100.0);
  const double c = std::cos(0.5), s = std::sin(0.5), c2 = std::cos(0.3), s2 = std::sin(0.3);
  // R = Rz(0.5) Rx(0.3)
  const std::array<double, 9> rot = {c, -s * c2, s * s2, s, c * c2, -c * s2, 0.0, s2, c2};
  const Ellipsoid oblique = Ellipsoid::ellipsoid(-0.3, {5.0, -7.0, 11.0}, {30.0, 18.0, 12.0}, rot);
  for (const Ellipsoid& e : {sl[2], sl[4], oblique}) {
    const double scale = std::abs(e.intensity()) * e.measure();
    EXPECT_NEAR(e.ft(0, 0, 0).real(), e.intensity() * e.measure(), 1e-12 * scale);
    for (auto k : std::vector<std::array<double, 3>>{{0, 0, 0}, {0.01, 0, 0}, {0, 0.015, -0.01}, {0.02, -0.03, 0.025}}) {
      const cdouble a = e.ft(k[0], k[1], k[2]);
      const cdouble b = ellipsoid_ft_quadrature(e, k[0], k[1], k[2], 96, 192);
      EXPECT_LT(std::abs(a - b), 1e-10 * scale) << k[0] << "," << k[1] << "," << k[2] << " " << a << " vs " << b;
    }
  }
}

TEST(PhantomTransforms, DiskMatchesRasterisedDft) {
  // The brief's reference: an exact double-precision DFT of a fine rasterisation. Pixel-centre sampling of
  // the indicator errs only in boundary pixels (~2 pi R / h of them, each by at most h^2, with random signs),
  // so at h = R/320 the relative error is ~1e-5; allow 1e-4.
  const double radius = 40.0, h = radius / 320.0;
  const Ellipsoid disk = Ellipsoid::ellipse(1.0, 0.0, 0.0, radius, radius, 0.0);
  const int n = 2 * static_cast<int>(std::ceil(1.05 * radius / h));
  std::vector<double> xs(n);
  for (int i = 0; i < n; ++i) xs[i] = (i - n / 2 + 0.5) * h;
  const double f0 = kPi * radius * radius;
  for (auto k : std::vector<std::array<double, 2>>{{0, 0}, {0.005, 0.0}, {0.01, -0.02}, {0.04, 0.03}}) {
    std::vector<cdouble> ex(n), ey(n);
    for (int i = 0; i < n; ++i) {
      ex[i] = expi(-2.0 * kPi * k[0] * xs[i]);
      ey[i] = expi(-2.0 * kPi * k[1] * xs[i]);
    }
    cdouble sum = 0.0;
    for (int iy = 0; iy < n; ++iy) {
      cdouble row = 0.0;
      for (int ix = 0; ix < n; ++ix)
        if (xs[ix] * xs[ix] + xs[iy] * xs[iy] <= radius * radius) row += ex[ix];
      sum += row * ey[iy];
    }
    sum *= h * h;
    EXPECT_LT(std::abs(sum - disk.ft(k[0], k[1])), 1e-4 * f0) << k[0] << "," << k[1];
  }
  EXPECT_NEAR(disk.ft(0, 0).real(), f0, 1e-12 * f0);  // F(0) = area x intensity, exactly
}

TEST(PhantomTransforms, SectionsOfEllipsoidsAreExact) {
  const auto sl = modified_shepp_logan_3d(128.0, 128.0, 128.0);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-130.0, 130.0);
  for (const auto& e : sl)
    for (double z : {-40.0, -3.0, 0.0, 17.0, 33.0}) {
      const auto sec = e.section_z(z);
      for (int i = 0; i < 2000; ++i) {
        const double x = u(rng), y = u(rng);
        EXPECT_EQ(sec ? sec->contains(x, y) : false, e.contains(x, y, z)) << x << "," << y << "," << z;
      }
    }
}

TEST(PhantomTransforms, SheppLoganTables) {
  // 2D: Toft's intensities; the centre is 1 - 0.8 = 0.2 and the top ellipse adds 0.1.
  const auto p2 = modified_shepp_logan_2d(1.0, 1.0);
  ASSERT_EQ(p2.size(), 10u);
  auto value = [](const std::vector<Ellipsoid>& p, double x, double y, double z) {
    double v = 0.0;
    for (const auto& e : p)
      if (e.contains(x, y, z)) v += e.intensity();
    return v;
  };
  EXPECT_NEAR(value(p2, 0.0, 0.0, 0.0), 0.2, 1e-15);
  EXPECT_NEAR(value(p2, 0.0, 0.35, 0.0), 0.3, 1e-15);
  EXPECT_NEAR(value(p2, 0.0, 0.9, 0.0), 1.0, 1e-15);   // skull
  EXPECT_NEAR(value(p2, 0.22, 0.0, 0.0), 0.0, 1e-15);  // right ventricle: 1 - 0.8 - 0.2
  const auto p3 = modified_shepp_logan_3d(1.0, 1.0, 1.0);
  ASSERT_EQ(p3.size(), 10u);
  EXPECT_NEAR(value(p3, 0.0, 0.0, 0.0), 0.2, 1e-15);
  EXPECT_NEAR(value(p3, 0.0, 0.0, 0.8), 1.0, 1e-15);
  EXPECT_NEAR(value(p3, 0.0, 0.1, 0.25), 0.3, 1e-15);
}

// ---------------------------------------------------------------------------------------------------------
// Coils and the grid

TEST(PhantomCoils, SensitivityIsItsPlaneWaveSum) {
  for (int dims : {2, 3}) {
    PhantomSpec s = small2d(32, 6);
    if (dims == 3) {
      s.dims = 3;
      s.nz = 16;
      s.fov_mm[2] = 128.0;
    }
    const Phantom ph(s);
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<double> u(-140.0, 140.0);
    double rss_centre = 0.0;
    for (int c = 0; c < s.coils; ++c) {
      const auto waves = ph.plane_waves(c);
      EXPECT_LE(waves.size(), dims == 2 ? 25u : 125u);
      for (int i = 0; i < 50; ++i) {
        const double x = u(rng), y = u(rng), z = dims == 3 ? u(rng) : 0.0;
        cdouble sum = 0.0;
        for (const auto& w : waves) sum += w.amplitude * expi(2.0 * kPi * (w.k[0] * x + w.k[1] * y + w.k[2] * z));
        EXPECT_LT(std::abs(sum - ph.sensitivity(c, x, y, z)), 1e-12);
      }
      rss_centre += std::norm(ph.sensitivity(c, 0, 0, 0));
    }
    EXPECT_NEAR(rss_centre, 1.0, 1e-12);  // normalised root-sum-of-squares at isocentre
    // Coils must differ: sensitivity near coil 0's position dominates coil 0's own value elsewhere.
    const double near = std::abs(ph.sensitivity(0, 0.0, 110.0, 0.0)), far = std::abs(ph.sensitivity(0, 0.0, -110.0, 0.0));
    if (dims == 2) {
      EXPECT_GT(near, 5.0 * far);
    }
  }
}

TEST(PhantomCoils, GridKspaceEqualsPlaneWaveShiftSum) {
  // The streamed, separable convolution on the fine grid must equal sum_j a_j F(k - k_j) at every
  // encoding-grid point, for 2D (single and multi-slice, both oversampling factors) and 3D.
  struct Case {
    int dims, nx, ny, nz, coils, os, slices;
  };
  for (const Case& cs : {Case{2, 24, 20, 1, 4, 2, 1}, Case{2, 16, 18, 1, 3, 1, 3}, Case{3, 12, 10, 8, 3, 2, 1},
                         Case{3, 10, 8, 7, 1, 1, 1}}) {
    PhantomSpec s;
    s.dims = cs.dims;
    s.nx = cs.nx;
    s.ny = cs.ny;
    s.nz = cs.nz;
    s.coils = cs.coils;
    s.ro_oversampling = cs.os;
    s.slices = cs.slices;
    s.fov_mm[0] = 220.0;
    s.fov_mm[1] = 200.0;
    s.fov_mm[2] = cs.dims == 3 ? 160.0 : 4.0;
    const Phantom ph(s);
    const int nxe = ph.encoded_nx(), nze = ph.encoded_nz();
    for (int slice = 0; slice < cs.slices; ++slice)
      for (int c = 0; c < s.coils; ++c) {
        const auto k = ph.kspace(c, slice);
        ASSERT_EQ(k.size(), static_cast<std::size_t>(nxe) * s.ny * nze);
        double peak = 0.0, err = 0.0;
        for (int iz = 0; iz < nze; ++iz)
          for (int iy = 0; iy < s.ny; ++iy)
            for (int ix = 0; ix < nxe; ++ix) {
              const cdouble ref = ph.kspace_scale() * ph.coil_ft(c, slice, ph.k_of_index(0, ix), ph.k_of_index(1, iy),
                                                                 ph.k_of_index(2, iz));
              peak = std::max(peak, std::abs(ref));
              err = std::max(err, std::abs(ref - k[(static_cast<std::size_t>(iz) * s.ny + iy) * nxe + ix]));
            }
        EXPECT_LT(err, 1e-12 * peak) << "dims " << cs.dims << " coil " << c << " slice " << slice;
      }
    // kspace_all is the float32 copy of the same values.
    const auto all = ph.kspace_all(0);
    const auto k0 = ph.kspace(s.coils - 1, 0);
    const std::size_t vol = k0.size();
    for (std::size_t i = 0; i < vol; ++i)  // float rounding: 2^-24 relative per component
      EXPECT_LE(std::abs(cdouble(all[vol * (s.coils - 1) + i]) - k0[i]), 1.0e-7 * std::abs(k0[i]));
  }
}

TEST(PhantomCoils, CoilKspaceMatchesDftOfSensitivityTimesImage) {
  // A small object (an oblique ellipse and a disk) and 4 coils: the analytic coil transform against a
  // double-precision DFT of sensitivity x rasterised object (pixel centres, h = 0.1 mm).
  // Tolerance consistent with discretisation: because S_c is a finite sum of plane waves, the raster DFT
  // of S_c rho is exactly sum_j a_j R(k - k_j), R the raster DFT of rho alone, so
  //   |DFT(S_c rho)(k) - sum_j a_j F(k - k_j)| <= sum_j |a_j| |R(k - k_j) - F(k - k_j)|,
  // the right side being the rasterisation error of the object measured at the same shifted frequencies.
  // A wrong amplitude, shift sign or frequency breaks the inequality by orders of magnitude.
  PhantomSpec s = small2d(32, 4);
  s.fov_mm[0] = s.fov_mm[1] = 64.0;
  const std::vector<Ellipsoid> object = {Ellipsoid::ellipse(1.0, 2.0, -3.0, 14.0, 8.0, 0.6),
                                         Ellipsoid::ellipse(-0.5, -4.0, 5.0, 5.0, 5.0, 0.0)};
  const Phantom ph(s, object);
  const double h = 0.1, extent = 20.0;
  const int n = static_cast<int>(2 * extent / h);
  std::vector<double> xs(n), rho(static_cast<std::size_t>(n) * n);
  for (int i = 0; i < n; ++i) xs[i] = -extent + (i + 0.5) * h;
  for (int iy = 0; iy < n; ++iy)
    for (int ix = 0; ix < n; ++ix) rho[static_cast<std::size_t>(iy) * n + ix] = ph.image_value(xs[ix], xs[iy]);
  auto raster_dft = [&](const std::vector<cdouble>& img, double kx, double ky) {
    std::vector<cdouble> ex(n), ey(n);
    for (int i = 0; i < n; ++i) {
      ex[i] = expi(-2.0 * kPi * kx * xs[i]);
      ey[i] = expi(-2.0 * kPi * ky * xs[i]);
    }
    cdouble sum = 0.0;
    for (int iy = 0; iy < n; ++iy) {
      cdouble row = 0.0;
      for (int ix = 0; ix < n; ++ix) row += img[static_cast<std::size_t>(iy) * n + ix] * ex[ix];
      sum += row * ey[iy];
    }
    return sum * h * h;
  };
  const std::vector<cdouble> object_raster(rho.begin(), rho.end());
  double worst_ratio = 0.0;
  for (int c = 0; c < s.coils; ++c) {
    std::vector<cdouble> img(rho.size());
    for (int iy = 0; iy < n; ++iy)
      for (int ix = 0; ix < n; ++ix) {
        const double r = rho[static_cast<std::size_t>(iy) * n + ix];
        img[static_cast<std::size_t>(iy) * n + ix] = r == 0.0 ? cdouble(0.0) : r * ph.sensitivity(c, xs[ix], xs[iy]);
      }
    const double scale = std::abs(ph.coil_ft(c, 0, 0, 0));
    for (auto k : std::vector<std::array<double, 2>>{{0, 0}, {1.0 / 64, 0}, {0, -3.0 / 64}, {5.0 / 64, 7.0 / 64}, {-0.25, 0.1}}) {
      const double err = std::abs(raster_dft(img, k[0], k[1]) - ph.coil_ft(c, 0, k[0], k[1]));
      double bound = 0.0;
      for (const auto& w : ph.plane_waves(c)) {
        const double kx = k[0] - w.k[0], ky = k[1] - w.k[1];
        bound += std::abs(w.amplitude) * std::abs(raster_dft(object_raster, kx, ky) - ph.object_ft(0, kx, ky));
      }
      EXPECT_LE(err, bound * (1.0 + 1e-9) + 1e-12 * scale) << "coil " << c << " k " << k[0] << "," << k[1];
      EXPECT_LT(err, 5e-3 * scale) << "coil " << c << " k " << k[0] << "," << k[1];  // and it is small
      worst_ratio = std::max(worst_ratio, err / scale);
    }
  }
  RecordProperty("worst_relative_error", std::to_string(worst_ratio));
}

TEST(PhantomGrid, ParsevalOnTheEncodingGrid) {
  // Grid samples are sqrt(N)/V x the Fourier-series coefficients of the (periodised) object, so
  // sum |s|^2 = (N/V) sum |c_n|^2 tends to integral |rho|^2 / dV from below; for a disk the missing tail is
  // ~ 1/(pi^2 R K) of the energy (|F|^2 ~ R/(2 pi^2 k^3)), K the grid's maximum |k|.
  for (int os : {1, 2}) {
    PhantomSpec s = small2d(128, 1);
    s.ro_oversampling = os;
    const double radius = 70.0, rho = 0.7;
    const Phantom ph(s, {Ellipsoid::ellipse(rho, 9.0, -6.0, radius, radius, 0.0)});
    const auto k = ph.kspace(0);
    double energy = 0.0;
    for (const auto& v : k) energy += std::norm(v);
    const double dv = (s.fov_mm[0] / s.nx) * (s.fov_mm[1] / s.ny);
    const double exact = rho * rho * kPi * radius * radius / dv;
    const double kmax = s.nx / (2.0 * s.fov_mm[0]);
    const double tail = 1.0 / (kPi * kPi * radius * kmax);
    EXPECT_LT(energy, exact);
    EXPECT_GT(energy, exact * (1.0 - 2.0 * tail)) << "tail estimate " << tail << ", found " << 1.0 - energy / exact;
  }
}

TEST(PhantomGrid, InverseDftGivesCoilImage) {
  // Scaling and sign conventions: the centred orthonormal inverse DFT of the full grid is the coil image
  // (up to Gibbs ringing at edges).
  PhantomSpec s = small2d(64, 2);
  const Phantom ph(s);
  const int nxe = ph.encoded_nx();
  for (int c = 0; c < s.coils; ++c) {
    const auto rec = idft(ph.kspace(c), {nxe, s.ny, 1});
    const auto ref = ph.coil_image(c, 0, 4);
    double err2 = 0.0, ref2 = 0.0;
    for (int y = 0; y < s.ny; ++y)
      for (int x = 0; x < s.nx; ++x) {
        const cdouble r = rec[y * nxe + x + (nxe - s.nx) / 2], a = ref[y * s.nx + x];
        err2 += std::norm(r - a);
        ref2 += std::norm(a);
      }
    EXPECT_LT(std::sqrt(err2 / ref2), 0.2) << "coil " << c;  // Gibbs ringing at 64^2
    // Mean over the flat centre (0.2 inside the brain) within 2%, and the top ellipse (+y) where it belongs.
    cdouble mr = 0.0, ma = 0.0;
    for (int y = s.ny / 2 - 4; y < s.ny / 2 + 4; ++y)
      for (int x = s.nx / 2 - 4; x < s.nx / 2 + 4; ++x) {
        mr += rec[y * nxe + x + (nxe - s.nx) / 2];
        ma += ref[y * s.nx + x];
      }
    EXPECT_LT(std::abs(mr - ma), 0.02 * std::abs(ma));
  }
  const auto obj = ph.image();
  EXPECT_NEAR(obj[(s.ny / 2) * s.nx + s.nx / 2], 0.2, 1e-12);
  const int y_top = s.ny / 2 + static_cast<int>(0.35 * s.ny / 2);  // ellipse 5 at y = +0.35
  EXPECT_NEAR(obj[y_top * s.nx + s.nx / 2], 0.3, 1e-12);
}

TEST(PhantomGrid, InverseDftGivesObject3D) {
  // 3D encoding: k_z axis, partition order, orientation and the sqrt(N)/V scaling. With a uniform coil the
  // reconstruction is the object.
  PhantomSpec s;
  s.dims = 3;
  s.nx = 40;
  s.ny = 36;
  s.nz = 32;
  s.fov_mm[0] = 240.0;
  s.fov_mm[1] = 220.0;
  s.fov_mm[2] = 200.0;
  s.coils = 1;
  const int nxe = 2 * s.nx;
  auto voxel = [&](const std::vector<cdouble>& rec, double x, double y, double z) {
    const int ix = static_cast<int>(std::lround(x * s.nx / s.fov_mm[0])) + s.nx / 2;
    const int iy = static_cast<int>(std::lround(y * s.ny / s.fov_mm[1])) + s.ny / 2;
    const int iz = static_cast<int>(std::lround(z * s.nz / s.fov_mm[2])) + s.nz / 2;
    return rec[(std::size_t(iz) * s.ny + iy) * nxe + ix + (nxe - s.nx) / 2];
  };
  {
    // Orientation: three spheres of distinct intensity on the +x, +y and +z axes, nothing at the mirror
    // positions. A sign error in any k axis (or a swapped axis) moves a sphere.
    const std::array<double, 9> eye = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    const std::vector<Ellipsoid> spheres = {Ellipsoid::ellipsoid(1.0, {55.0, 0.0, 0.0}, {22.0, 22.0, 22.0}, eye),
                                            Ellipsoid::ellipsoid(0.5, {0.0, 50.0, 0.0}, {22.0, 22.0, 22.0}, eye),
                                            Ellipsoid::ellipsoid(0.25, {0.0, 0.0, 45.0}, {22.0, 22.0, 22.0}, eye)};
    const Phantom ph(s, spheres);
    const auto rec = idft(ph.kspace(0), {nxe, s.ny, s.nz});
    for (const auto& e : spheres) {
      const auto& c = e.centre();
      EXPECT_NEAR(voxel(rec, c[0], c[1], c[2]).real(), e.intensity(), 0.08 * e.intensity()) << c[0] << c[1] << c[2];
      EXPECT_LT(std::abs(voxel(rec, -c[0], -c[1], -c[2])), 0.05) << c[0] << c[1] << c[2];
    }
  }
  // The Shepp-Logan head: on voxels whose 3x3x3 neighbourhood is uniform (Gibbs ringing is small away
  // from edges) the reconstruction matches the object.
  const Phantom ph(s);
  const auto rec = idft(ph.kspace(0), {nxe, s.ny, s.nz});
  double sum = 0.0;
  int count = 0;
  auto value = [&](int x, int y, int z) {
    return ph.image_value((x - s.nx / 2) * s.fov_mm[0] / s.nx, (y - s.ny / 2) * s.fov_mm[1] / s.ny,
                          (z - s.nz / 2) * s.fov_mm[2] / s.nz);
  };
  for (int z = 1; z < s.nz - 1; ++z)
    for (int y = 1; y < s.ny - 1; ++y)
      for (int x = 1; x < s.nx - 1; ++x) {
        const double v = value(x, y, z);
        bool uniform = true;
        for (int d = 0; d < 27 && uniform; ++d) uniform = value(x + d % 3 - 1, y + d / 3 % 3 - 1, z + d / 9 - 1) == v;
        if (!uniform) continue;
        sum += std::abs(rec[(std::size_t(z) * s.ny + y) * nxe + x + (nxe - s.nx) / 2] - v);
        ++count;
      }
  RecordProperty("mean_abs_error_interior", std::to_string(sum / count));
  EXPECT_GT(count, 1000);
  EXPECT_LT(sum / count, 0.03);  // of a 0.2 brain / 1.0 skull
}

TEST(PhantomGrid, MultiSliceSectionsMatchImageValue) {
  PhantomSpec s = small2d(48, 1);
  s.slices = 4;
  const Phantom ph(s);
  std::set<double> distinct;
  for (int sl = 0; sl < s.slices; ++sl) {
    const auto img = ph.image(sl);
    double sum = 0.0;
    for (int y = 0; y < s.ny; ++y)
      for (int x = 0; x < s.nx; ++x) {
        const double px = (x - s.nx / 2) * s.fov_mm[0] / s.nx, py = (y - s.ny / 2) * s.fov_mm[1] / s.ny;
        EXPECT_DOUBLE_EQ(img[y * s.nx + x], ph.image_value(px, py, ph.slice_position(sl)));
        sum += img[y * s.nx + x];
      }
    distinct.insert(sum);
  }
  EXPECT_EQ(distinct.size(), 4u);  // slices differ
}

TEST(PhantomGrid, Timing256x32Coils) {
  // The brief's budget: 256^2 x 32 coils "well under a minute" on 2 cores. Checked loosely (shared CI).
  PhantomSpec s = small2d(256, 32);
  const auto t0 = std::chrono::steady_clock::now();
  const Phantom ph(s);
  std::size_t planes = 0;
  ph.generate_planes(0, [&](int, const cdouble*) { ++planes; });
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(planes, 1u);
  EXPECT_LT(sec, 30.0);
  RecordProperty("seconds_256x256x32", std::to_string(sec));
}

// ---------------------------------------------------------------------------------------------------------
// Sampling

TEST(PhantomSampling, UniformLatticeAndAcs) {
  PhantomSpec s = small2d(96, 1);
  s.sampling = Sampling::uniform;
  s.accel_y = 3;
  s.acs_lines = 20;
  const auto p = sampling_pattern(s);
  std::set<int> lines;
  for (const auto& e : p) {
    lines.insert(e.e1);
    EXPECT_EQ(e.imaging, (e.e1 - 48) % 3 == 0);
    EXPECT_EQ(e.calibration, e.e1 >= 38 && e.e1 < 58);
  }
  EXPECT_EQ(lines.size(), p.size());
  EXPECT_EQ(p.size(), 32u + 20u - 7u);  // 32 lattice lines, 20 ACS, 7 shared (39, 42, ..., 57)
}

TEST(PhantomSampling, PoissonDensityAcsAndDeterminism) {
  for (int dims : {2, 3}) {
    PhantomSpec s = small2d(dims == 2 ? 128 : 32, 1);
    s.sampling = Sampling::poisson;
    s.accel_y = dims == 2 ? 3 : 2;
    s.acs_lines = dims == 2 ? 16 : 8;
    if (dims == 3) {
      s.dims = 3;
      s.ny = 48;
      s.nz = 40;
      s.accel_z = 2;
    }
    const auto p = sampling_pattern(s);
    const int nz = dims == 3 ? s.nz : 1;
    const double target = double(s.ny) * nz / (s.accel_y * s.accel_z);
    EXPECT_NEAR(double(p.size()), target, 0.05 * target) << dims;
    int acs = 0;
    std::set<std::pair<int, int>> seen;
    for (const auto& e : p) {
      EXPECT_TRUE(e.imaging);
      EXPECT_TRUE(seen.insert({e.e2, e.e1}).second);
      acs += e.calibration;
    }
    EXPECT_EQ(acs, s.acs_lines * (dims == 3 ? std::min(s.acs_lines, s.nz) : 1));
    // Variable density: the central half of k-space is sampled more densely than the outer half.
    int inner = 0, outer = 0;
    for (const auto& e : p) {
      const double u = (e.e1 - s.ny / 2) / (s.ny / 2.0), v = dims == 3 ? (e.e2 - nz / 2) / (nz / 2.0) : 0.0;
      const bool in_acs = e.calibration;
      if (in_acs) continue;
      (std::max(std::abs(u), std::abs(v)) < 0.5 ? inner : outer) += 1;
    }
    EXPECT_GT(inner, outer / (dims == 2 ? 2 : 4));
    // Same seed, same pattern; another seed, another pattern.
    const auto again = sampling_pattern(s);
    ASSERT_EQ(again.size(), p.size());
    for (std::size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(again[i].e1 == p[i].e1 && again[i].e2 == p[i].e2);
    s.seed = 99;
    const auto other = sampling_pattern(s);
    bool differs = other.size() != p.size();
    for (std::size_t i = 0; !differs && i < p.size(); ++i) differs = other[i].e1 != p[i].e1 || other[i].e2 != p[i].e2;
    EXPECT_TRUE(differs);
  }
}

TEST(PhantomSpec, Validation) {
  auto bad = [](auto mutate) {
    PhantomSpec s;
    mutate(s);
    return s;
  };
  EXPECT_THROW(validate(bad([](PhantomSpec& s) { s.dims = 4; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](PhantomSpec& s) { s.nz = 4; })), std::invalid_argument);  // 2D
  EXPECT_THROW(validate(bad([](PhantomSpec& s) { s.ro_oversampling = 3; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](PhantomSpec& s) { s.accel_z = 2; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](PhantomSpec& s) { s.coils = 0; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](PhantomSpec& s) { s.noise_scan = true; })), std::invalid_argument);  // snr 0
  EXPECT_THROW(validate(bad([](PhantomSpec& s) { s.dims = 3; s.nz = 8; s.slices = 2; })), std::invalid_argument);
  EXPECT_THROW(sampling_from_string("radial"), std::invalid_argument);
  EXPECT_NO_THROW(validate(PhantomSpec{}));
}

// ---------------------------------------------------------------------------------------------------------
// Written files

TEST(PhantomFile, FullySampledMultiSliceRepetitions) {
  TempDir dir;
  PhantomSpec s = small2d(32, 4);
  s.slices = 2;
  s.repetitions = 2;
  s.fov_mm[0] = 240.0;
  s.fov_mm[1] = 200.0;
  const std::string path = dir.file("full.h5");
  const WriteResult r = write_dataset(s, path);
  const FileContents f = read_file(path);
  EXPECT_EQ(r.imaging_acquisitions, 32u * 2 * 2);
  EXPECT_EQ(r.noise_acquisitions, 0u);
  ASSERT_EQ(f.acqs.size(), 32u * 2 * 2);

  // Header round trip: what make_header() built is what deserialize() reads back.
  std::ostringstream xml;
  ISMRMRD::serialize(make_header(s), xml);
  ISMRMRD::IsmrmrdHeader expected;
  ISMRMRD::deserialize(xml.str().c_str(), expected);
  const auto& h = f.header;
  ASSERT_EQ(h.encoding.size(), 1u);
  const auto& e = h.encoding[0];
  EXPECT_EQ(e.encodedSpace.matrixSize.x, 64);
  EXPECT_EQ(e.encodedSpace.matrixSize.y, 32);
  EXPECT_EQ(e.encodedSpace.matrixSize.z, 1);
  EXPECT_FLOAT_EQ(e.encodedSpace.fieldOfView_mm.x, 480.0f);
  EXPECT_FLOAT_EQ(e.encodedSpace.fieldOfView_mm.y, 200.0f);
  EXPECT_FLOAT_EQ(e.encodedSpace.fieldOfView_mm.z, 5.0f);
  EXPECT_EQ(e.reconSpace.matrixSize.x, 32);
  EXPECT_FLOAT_EQ(e.reconSpace.fieldOfView_mm.x, 240.0f);
  EXPECT_EQ(e.encodingLimits.kspace_encoding_step_1->minimum, 0);
  EXPECT_EQ(e.encodingLimits.kspace_encoding_step_1->maximum, 31);
  EXPECT_EQ(e.encodingLimits.kspace_encoding_step_1->center, 16);
  EXPECT_EQ(e.encodingLimits.kspace_encoding_step_2->maximum, 0);
  EXPECT_EQ(e.encodingLimits.slice->maximum, 1);
  EXPECT_EQ(e.encodingLimits.repetition->maximum, 1);
  EXPECT_EQ(e.trajectory, ISMRMRD::TrajectoryType::CARTESIAN);
  EXPECT_FALSE(e.parallelImaging.is_present());
  EXPECT_EQ(expected.encoding[0].encodedSpace.matrixSize.x, e.encodedSpace.matrixSize.x);
  ASSERT_TRUE(h.acquisitionSystemInformation.is_present());
  EXPECT_EQ(*h.acquisitionSystemInformation->receiverChannels, 4);
  EXPECT_FLOAT_EQ(*h.acquisitionSystemInformation->relativeReceiverNoiseBandwidth, 0.793f);
  EXPECT_EQ(h.acquisitionSystemInformation->coilLabel.size(), 4u);

  const Phantom ph(s);
  std::vector<std::vector<std::complex<float>>> clean = {ph.kspace_all(0), ph.kspace_all(1)};
  std::size_t i = 0;
  for (int rep = 0; rep < 2; ++rep)
    for (int sl = 0; sl < 2; ++sl)
      for (int e1 = 0; e1 < 32; ++e1, ++i) {
        const auto& a = f.acqs[i];
        const auto& hd = a.getHead();
        EXPECT_EQ(hd.number_of_samples, 64);
        EXPECT_EQ(hd.active_channels, 4);
        EXPECT_EQ(hd.available_channels, 4);
        // Fields wider than 2 bytes are copied before EXPECT_EQ binds references: the header is packed.
        EXPECT_EQ(uint64_t{hd.channel_mask[0]}, 0xFu);
        EXPECT_EQ(hd.center_sample, 32);
        EXPECT_EQ(hd.idx.kspace_encode_step_1, e1);
        EXPECT_EQ(hd.idx.kspace_encode_step_2, 0);
        EXPECT_EQ(hd.idx.slice, sl);
        EXPECT_EQ(hd.idx.repetition, rep);
        EXPECT_EQ(uint32_t{hd.scan_counter}, i + 1);
        EXPECT_FLOAT_EQ(hd.read_dir[0], 1.0f);
        EXPECT_FLOAT_EQ(hd.phase_dir[1], 1.0f);
        EXPECT_FLOAT_EQ(hd.slice_dir[2], 1.0f);
        EXPECT_FLOAT_EQ(hd.position[2], static_cast<float>(ph.slice_position(sl)));
        if (i > 0) {
          EXPECT_GT(uint32_t{hd.acquisition_time_stamp}, uint32_t{f.acqs[i - 1].getHead().acquisition_time_stamp});
        }
        EXPECT_EQ(flag(a, 1), e1 == 0);   // FIRST_IN_ENCODE_STEP1
        EXPECT_EQ(flag(a, 2), e1 == 31);  // LAST_IN_ENCODE_STEP1
        EXPECT_EQ(flag(a, 3), e1 == 0);   // FIRST_IN_ENCODE_STEP2
        EXPECT_EQ(flag(a, 4), e1 == 31);  // LAST_IN_ENCODE_STEP2
        EXPECT_EQ(flag(a, 7), e1 == 0);   // FIRST_IN_SLICE
        EXPECT_EQ(flag(a, 8), e1 == 31);  // LAST_IN_SLICE
        EXPECT_EQ(flag(a, 14), e1 == 31 && sl == 1);
        EXPECT_EQ(flag(a, 25), e1 == 31 && sl == 1 && rep == 1);
        EXPECT_FALSE(flag(a, 19) || flag(a, 20) || flag(a, 21));
        // Noiseless data are the analytic k-space in float32.
        const std::size_t vol = 64u * 32u;
        for (int c = 0; c < 4; ++c)
          for (int x = 0; x < 64; ++x)
            EXPECT_EQ(a.getDataPtr()[c * 64 + x], clean[sl][vol * c + e1 * 64 + x]);
      }
}

TEST(PhantomFile, UniformR3WithEmbeddedAcs) {
  TempDir dir;
  PhantomSpec s = small2d(48, 3);
  s.sampling = Sampling::uniform;
  s.accel_y = 3;
  s.acs_lines = 12;
  const std::string path = dir.file("grappa.h5");
  write_dataset(s, path);
  const FileContents f = read_file(path);
  const auto& e = f.header.encoding[0];
  ASSERT_TRUE(e.parallelImaging.is_present());
  EXPECT_EQ(e.parallelImaging->accelerationFactor.kspace_encoding_step_1, 3);
  EXPECT_EQ(e.parallelImaging->accelerationFactor.kspace_encoding_step_2, 1);
  EXPECT_EQ(*e.parallelImaging->calibrationMode, "embedded");
  bool found = false;
  for (const auto& p : f.header.userParameters->userParameterLong)
    if (p.name == "EmbeddedRefLinesE1") found = p.value == 12;
  EXPECT_TRUE(found);
  // Lattice through the centre (24): 0, 3, ..., 45 (16 lines); ACS 18..29 adds 8 more (18..27 step 3 shared).
  ASSERT_EQ(f.acqs.size(), 16u + 12u - 4u);
  int prev = -1, n20 = 0, n21 = 0;
  for (std::size_t i = 0; i < f.acqs.size(); ++i) {
    const auto& a = f.acqs[i];
    const int e1 = a.getHead().idx.kspace_encode_step_1;
    EXPECT_GT(e1, prev);
    prev = e1;
    const bool lattice = (e1 - 24) % 3 == 0, acs = e1 >= 18 && e1 < 30;
    EXPECT_TRUE(lattice || acs) << e1;
    EXPECT_EQ(flag(a, 20), acs && !lattice) << e1;
    EXPECT_EQ(flag(a, 21), acs && lattice) << e1;
    n20 += flag(a, 20);
    n21 += flag(a, 21);
    EXPECT_EQ(flag(a, 1), i == 0);
    EXPECT_EQ(flag(a, 2) && flag(a, 8) && flag(a, 14) && flag(a, 25), i + 1 == f.acqs.size());
  }
  EXPECT_EQ(n20, 8);
  EXPECT_EQ(n21, 4);
}

TEST(PhantomFile, PoissonAndUniform3D) {
  TempDir dir;
  for (Sampling sampling : {Sampling::poisson, Sampling::uniform}) {
    PhantomSpec s;
    s.dims = 3;
    s.nx = 16;
    s.ny = 24;
    s.nz = 20;
    s.fov_mm[2] = 200.0;
    s.coils = 2;
    s.sampling = sampling;
    s.accel_y = 2;
    s.accel_z = 2;
    s.acs_lines = 6;
    const std::string path = dir.file(std::string(to_string(sampling)) + ".h5");
    write_dataset(s, path);
    const FileContents f = read_file(path);
    const auto pattern = sampling_pattern(s);
    ASSERT_EQ(f.acqs.size(), pattern.size());
    const auto& e = f.header.encoding[0];
    EXPECT_EQ(e.encodedSpace.matrixSize.z, 20);
    EXPECT_EQ(e.encodingLimits.kspace_encoding_step_2->maximum, 19);
    EXPECT_EQ(e.encodingLimits.kspace_encoding_step_2->center, 10);
    EXPECT_EQ(e.parallelImaging->accelerationFactor.kspace_encoding_step_2, 2);
    int first2 = 0, last2 = 0;
    std::map<int, int> first1, last1;
    for (std::size_t i = 0; i < f.acqs.size(); ++i) {
      const auto& a = f.acqs[i];
      const auto& idx = a.getHead().idx;
      EXPECT_EQ(idx.kspace_encode_step_1, pattern[i].e1);
      EXPECT_EQ(idx.kspace_encode_step_2, pattern[i].e2);
      EXPECT_EQ(flag(a, 21), pattern[i].calibration && pattern[i].imaging);
      EXPECT_EQ(flag(a, 20), pattern[i].calibration && !pattern[i].imaging);
      if (sampling == Sampling::poisson) {
        EXPECT_FALSE(flag(a, 20));
      }
      first2 += flag(a, 3);
      last2 += flag(a, 4);
      first1[idx.kspace_encode_step_2] += flag(a, 1);
      last1[idx.kspace_encode_step_2] += flag(a, 2);
    }
    EXPECT_TRUE(flag(f.acqs.front(), 3));
    EXPECT_TRUE(flag(f.acqs.back(), 4) && flag(f.acqs.back(), 25));
    EXPECT_EQ(first2, 1);
    EXPECT_EQ(last2, 1);
    for (const auto& [e2, n] : first1) EXPECT_EQ(n, 1) << e2;  // one FIRST/LAST_IN_ENCODE_STEP1 per partition
    for (const auto& [e2, n] : last1) EXPECT_EQ(n, 1) << e2;
  }
}

TEST(PhantomFile, NoiseScanCovarianceAndSnr) {
  TempDir dir;
  const int n = 128;
  PhantomSpec s = small2d(n, 8);
  s.snr = 20.0;
  s.noise_scan = true;
  s.noise_samples = 400;
  const std::string path = dir.file("noise.h5");
  const WriteResult r = write_dataset(s, path);
  const FileContents f = read_file(path);
  ASSERT_EQ(r.noise_acquisitions, 400u);
  ASSERT_EQ(f.acqs.size(), 400u + n);
  const int nc = 8, ns = 2 * n;
  std::map<std::string, std::string> params;
  for (const auto& p : f.header.userParameters->userParameterString) params[p.name] = p.value;
  EXPECT_EQ(std::stod(params.at("larmor.phantom.noise_sigma")), r.noise_sigma);
  EXPECT_EQ(std::stod(params.at("larmor.phantom.signal_level")), r.signal_level);
  EXPECT_DOUBLE_EQ(r.noise_sigma * 20.0, r.signal_level);
  const float dwell = f.acqs.back().getHead().sample_time_us;
  EXPECT_GT(dwell, 0.0f);

  // The noise scan comes first, flag 19 only, with the imaging dwell time.
  std::vector<cdouble> cov(nc * nc, 0.0);
  for (int i = 0; i < 400; ++i) {
    const auto& a = f.acqs[i];
    EXPECT_TRUE(flag(a, 19));
    EXPECT_EQ(uint64_t{a.getHead().flags}, 1ull << 18);  // copied: the header is packed
    EXPECT_FLOAT_EQ(a.getHead().sample_time_us, dwell);
    for (int x = 0; x < ns; ++x)
      for (int c = 0; c < nc; ++c)
        for (int d = 0; d < nc; ++d)
          cov[c * nc + d] += cdouble(a.getDataPtr()[c * ns + x]) * std::conj(cdouble(a.getDataPtr()[d * ns + x]));
  }
  for (auto& v : cov) v /= 400.0 * ns;
  for (std::size_t i = 400; i < f.acqs.size(); ++i) EXPECT_FALSE(flag(f.acqs[i], 19));

  // Its covariance is the model's (~1e5 samples: ~1% statistical error) and far from identity-like.
  const Phantom ph(s);
  const auto psi = ph.noise_covariance();
  double num = 0.0, den = 0.0, offdiag = 0.0, mean_var = 0.0;
  for (int c = 0; c < nc; ++c)
    for (int d = 0; d < nc; ++d) {
      num += std::norm(cov[c * nc + d] - psi[c * nc + d]);
      den += std::norm(psi[c * nc + d]);
      if (c != d) offdiag = std::max(offdiag, std::abs(psi[c * nc + d]) / std::sqrt(psi[c * nc + c].real() * psi[d * nc + d].real()));
      if (c == d) mean_var += cov[c * nc + c].real() / nc;
    }
  EXPECT_LT(std::sqrt(num / den), 0.05);
  EXPECT_GT(offdiag, 0.1);  // correlated channels
  EXPECT_NEAR(std::sqrt(mean_var), r.noise_sigma, 0.02 * r.noise_sigma);

  // SNR measured the way a user would: reconstruct the noisy coil images (orthonormal DFT, so the noise
  // std per pixel is the k-space std), take the mean over the central box (|x| <= FOV/8) of the
  // rms-over-coils magnitude, noise power removed, and divide by the noise-scan std. The spec's SNR uses
  // the analytic object at pixel centres; Gibbs ringing at the ventricle edges inside the box raises the
  // measured mean magnitude by ~4% at 128^2 (14% at 64^2), well inside the 20% allowed.
  std::vector<std::vector<cdouble>> ks(nc, std::vector<cdouble>(static_cast<std::size_t>(ns) * n));
  for (std::size_t i = 400; i < f.acqs.size(); ++i) {
    const auto& a = f.acqs[i];
    const int e1 = a.getHead().idx.kspace_encode_step_1;
    for (int c = 0; c < nc; ++c)
      for (int x = 0; x < ns; ++x) ks[c][e1 * ns + x] = cdouble(a.getDataPtr()[c * ns + x]);
  }
  std::vector<std::vector<cdouble>> img(nc);
  for (int c = 0; c < nc; ++c) img[c] = idft(ks[c], {ns, n, 1});
  double signal = 0.0;
  int count = 0;
  for (int y = n / 2 - n / 8; y <= n / 2 + n / 8; ++y)
    for (int x = n / 2 - n / 8; x <= n / 2 + n / 8; ++x) {
      double s2 = 0.0;
      for (int c = 0; c < nc; ++c) s2 += std::norm(img[c][y * ns + x + n / 2]);
      signal += std::sqrt(std::max(0.0, s2 / nc - mean_var));
      ++count;
    }
  signal /= count;
  const double snr = signal / std::sqrt(mean_var);
  EXPECT_NEAR(snr, 20.0, 0.2 * 20.0);
  RecordProperty("measured_snr", std::to_string(snr));

  // Imaging noise has the same covariance: noisy minus noiseless, pooled over lines.
  const auto clean = ph.kspace_all(0);
  std::vector<cdouble> icov(nc * nc, 0.0);
  for (std::size_t i = 400; i < f.acqs.size(); ++i) {
    const auto& a = f.acqs[i];
    const int e1 = a.getHead().idx.kspace_encode_step_1;
    for (int x = 0; x < ns; ++x)
      for (int c = 0; c < nc; ++c)
        for (int d = 0; d < nc; ++d) {
          const cdouble nc_ = cdouble(a.getDataPtr()[c * ns + x]) - cdouble(clean[std::size_t(c) * ns * n + e1 * ns + x]);
          const cdouble nd = cdouble(a.getDataPtr()[d * ns + x]) - cdouble(clean[std::size_t(d) * ns * n + e1 * ns + x]);
          icov[c * nc + d] += nc_ * std::conj(nd);
        }
  }
  num = 0.0;
  for (int i = 0; i < nc * nc; ++i) num += std::norm(icov[i] / (double(n) * ns) - psi[i]);
  EXPECT_LT(std::sqrt(num / den), 0.08);
}

TEST(PhantomFile, DeterministicInSeed) {
  TempDir dir;
  PhantomSpec s = small2d(32, 4);
  s.snr = 10.0;
  s.sampling = Sampling::poisson;
  s.accel_y = 2;
  s.acs_lines = 8;
  write_dataset(s, dir.file("a.h5"));
  write_dataset(s, dir.file("a.h5"));  // overwrite, not append
  write_dataset(s, dir.file("b.h5"));
  s.seed = 2;
  write_dataset(s, dir.file("c.h5"));
  const auto a = read_file(dir.file("a.h5")), b = read_file(dir.file("b.h5")), c = read_file(dir.file("c.h5"));
  ASSERT_EQ(a.acqs.size(), b.acqs.size());
  for (std::size_t i = 0; i < a.acqs.size(); ++i) {
    EXPECT_EQ(a.acqs[i].getHead().idx.kspace_encode_step_1, b.acqs[i].getHead().idx.kspace_encode_step_1);
    EXPECT_TRUE(std::equal(a.acqs[i].data_begin(), a.acqs[i].data_end(), b.acqs[i].data_begin()));
  }
  bool differs = a.acqs.size() != c.acqs.size();
  for (std::size_t i = 0; !differs && i < a.acqs.size(); ++i)
    differs = !std::equal(a.acqs[i].data_begin(), a.acqs[i].data_end(), c.acqs[i].data_begin());
  EXPECT_TRUE(differs);
}

}  // namespace
