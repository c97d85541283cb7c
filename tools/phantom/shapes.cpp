// Ellipses, ellipsoids and their exact Fourier transforms; the modified Shepp-Logan tables.
#include <cmath>
#include <stdexcept>

#include "tools/phantom/phantom.h"
#include "core/constants.h"

#if defined(__GLIBC__)
#include <math.h>  // ::j1 (POSIX)
#endif

namespace larmor::phantom {
namespace {

// J1 for the 2D transform. glibc's j1 is ~40 ns and agrees with std::cyl_bessel_j(1, x) to ~5e-13 absolute
// over [0, 2000]; std::cyl_bessel_j takes ~2 us here, which would dominate the generation of large datasets.
double bessel_j1(double z) {
#if defined(__GLIBC__)
  return ::j1(z);
#else
  return std::cyl_bessel_j(1.0, z);
#endif
}

double det3(const std::array<double, 9>& m) {
  return m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
         m[2] * (m[3] * m[7] - m[4] * m[6]);
}

std::array<double, 9> inverse3(const std::array<double, 9>& m) {
  const double d = det3(m);
  if (d == 0.0 || !std::isfinite(d)) throw std::invalid_argument("phantom: singular ellipsoid matrix");
  std::array<double, 9> r{};
  r[0] = (m[4] * m[8] - m[5] * m[7]) / d;
  r[1] = (m[2] * m[7] - m[1] * m[8]) / d;
  r[2] = (m[1] * m[5] - m[2] * m[4]) / d;
  r[3] = (m[5] * m[6] - m[3] * m[8]) / d;
  r[4] = (m[0] * m[8] - m[2] * m[6]) / d;
  r[5] = (m[2] * m[3] - m[0] * m[5]) / d;
  r[6] = (m[3] * m[7] - m[4] * m[6]) / d;
  r[7] = (m[1] * m[6] - m[0] * m[7]) / d;
  r[8] = (m[0] * m[4] - m[1] * m[3]) / d;
  return r;
}

// Euler matrix (z-x-z, phi/theta/psi in degrees) of Schabel's phantom3d, the usual source of the
// "3D modified Shepp-Logan": it rotates coordinates, u' = alpha u, before the centre is subtracted.
std::array<double, 9> euler_zxz(double phi_deg, double theta_deg, double psi_deg) {
  const double ph = phi_deg * kPi / 180.0, th = theta_deg * kPi / 180.0, ps = psi_deg * kPi / 180.0;
  const double cph = std::cos(ph), sph = std::sin(ph), cth = std::cos(th), sth = std::sin(th);
  const double cps = std::cos(ps), sps = std::sin(ps);
  return {cps * cph - cth * sph * sps,  cps * sph + cth * cph * sps,  sps * sth,
          -sps * cph - cth * sph * cps, -sps * sph + cth * cph * cps, cps * sth,
          sth * sph,                    -sth * cph,                   cth};
}

}  // namespace

double unit_disk_ft(double q) {
  // Integral of exp(-i2pi kappa.v) over |v| <= 1 with |kappa| = q: J1(2pi q)/q = 2pi J1(z)/z, z = 2pi q.
  const double z = 2.0 * kPi * std::abs(q);
  if (z < 1e-3) {
    const double z2 = z * z;
    return 2.0 * kPi * (0.5 - z2 / 16.0 + z2 * z2 / 384.0);
  }
  return 2.0 * kPi * bessel_j1(z) / z;
}

double unit_ball_ft(double q) {
  // 4pi j1(z)/z with j1(z) = (sin z - z cos z)/z^2 (Bracewell; Koay et al. 2007, eq. 5). Below z = 0.1 the
  // closed form loses digits to cancellation, so use its Taylor series (next term z^10/1.9e8 < 1e-18).
  const double z = 2.0 * kPi * std::abs(q);
  if (z < 0.1) {
    const double z2 = z * z;
    return 4.0 * kPi *
           (1.0 / 3.0 + z2 * (-1.0 / 30.0 + z2 * (1.0 / 840.0 + z2 * (-1.0 / 45360.0 + z2 / 3991680.0))));
  }
  return 4.0 * kPi * (std::sin(z) - z * std::cos(z)) / (z * z * z);
}

Ellipsoid Ellipsoid::from_matrix(int dims, double intensity, const std::array<double, 3>& centre,
                                 const std::array<double, 9>& a) {
  if (dims != 2 && dims != 3) throw std::invalid_argument("phantom: ellipsoid dims must be 2 or 3");
  Ellipsoid e;
  e.dims_ = dims;
  e.intensity_ = intensity;
  e.centre_ = centre;
  e.a_ = a;
  if (dims == 2) {
    // Embed the 2x2 block in a 3x3 matrix with a unit z axis so one inverse serves both cases.
    e.centre_[2] = 0.0;
    e.a_[2] = e.a_[5] = e.a_[6] = e.a_[7] = 0.0;
    e.a_[8] = 1.0;
  }
  e.ainv_ = inverse3(e.a_);
  e.det_ = std::abs(det3(e.a_));
  return e;
}

Ellipsoid Ellipsoid::ellipse(double intensity, double cx, double cy, double a, double b, double phi) {
  const double c = std::cos(phi), s = std::sin(phi);
  // A = R(phi) diag(a, b): the ellipse's axes are the rotated x and y axes.
  return from_matrix(2, intensity, {cx, cy, 0.0}, {a * c, -b * s, 0.0, a * s, b * c, 0.0, 0.0, 0.0, 1.0});
}

Ellipsoid Ellipsoid::ellipsoid(double intensity, const std::array<double, 3>& centre,
                               const std::array<double, 3>& semi_axes, const std::array<double, 9>& rotation) {
  std::array<double, 9> a{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) a[i * 3 + j] = rotation[i * 3 + j] * semi_axes[j];
  return from_matrix(3, intensity, centre, a);
}

double Ellipsoid::measure() const { return (dims_ == 2 ? kPi : 4.0 * kPi / 3.0) * det_; }

bool Ellipsoid::contains(double x, double y, double z) const {
  const double d[3] = {x - centre_[0], y - centre_[1], dims_ == 3 ? z - centre_[2] : 0.0};
  double r2 = 0.0;
  for (int i = 0; i < dims_; ++i) {
    const double v = ainv_[i * 3 + 0] * d[0] + ainv_[i * 3 + 1] * d[1] + ainv_[i * 3 + 2] * d[2];
    r2 += v * v;
  }
  return r2 <= 1.0;
}

cdouble Ellipsoid::ft(double kx, double ky, double kz) const {
  // x = c + A v: F(k) = rho |det A| exp(-i2pi k.c) B(|A^T k|), B the unit disk / ball transform.
  if (dims_ == 2) kz = 0.0;
  const double k[3] = {kx, ky, kz};
  double q2 = 0.0;
  for (int i = 0; i < dims_; ++i) {
    const double q = a_[0 * 3 + i] * k[0] + a_[1 * 3 + i] * k[1] + a_[2 * 3 + i] * k[2];
    q2 += q * q;
  }
  const double q = std::sqrt(q2);
  const double mag = intensity_ * det_ * (dims_ == 2 ? unit_disk_ft(q) : unit_ball_ft(q));
  const double arg = -2.0 * kPi * (k[0] * centre_[0] + k[1] * centre_[1] + k[2] * centre_[2]);
  return mag * cdouble(std::cos(arg), std::sin(arg));
}

std::optional<Ellipsoid> Ellipsoid::section_z(double z) const {
  if (dims_ != 3) throw std::logic_error("phantom: section_z needs a 3D ellipsoid");
  // (x - c)^T Q (x - c) <= 1 with Q = A^-T A^-1. Fixing z (d = z - c_z) and completing the square in
  // w = (x, y): (w - m)^T Q2 (w - m) <= t, m = c_w - d Q2^-1 q, t = 1 - d^2 (Q33 - q^T Q2^-1 q).
  std::array<double, 9> qm{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      double s = 0.0;
      for (int l = 0; l < 3; ++l) s += ainv_[l * 3 + i] * ainv_[l * 3 + j];
      qm[i * 3 + j] = s;
    }
  const double d = z - centre_[2];
  const double q00 = qm[0], q01 = qm[1], q11 = qm[4];
  const double det2 = q00 * q11 - q01 * q01;
  const double i00 = q11 / det2, i01 = -q01 / det2, i11 = q00 / det2;  // Q2^-1
  const double qx = qm[2], qy = qm[5];
  const double sx = i00 * qx + i01 * qy, sy = i01 * qx + i11 * qy;  // Q2^-1 q
  const double t = 1.0 - d * d * (qm[8] - (qx * sx + qy * sy));
  if (t <= 0.0) return std::nullopt;
  // The section is { m + A2 v : |v| <= 1 } with A2 A2^T = t Q2^-1; take A2 as its Cholesky factor.
  const double m00 = t * i00, m01 = t * i01, m11 = t * i11;
  const double l00 = std::sqrt(m00), l10 = m01 / l00, l11 = std::sqrt(m11 - l10 * l10);
  return from_matrix(2, intensity_, {centre_[0] - d * sx, centre_[1] - d * sy, 0.0},
                     {l00, 0.0, 0.0, l10, l11, 0.0, 0.0, 0.0, 1.0});
}

std::vector<Ellipsoid> modified_shepp_logan_2d(double half_x, double half_y) {
  // Shepp & Logan 1974 geometry with Toft's (1996, p. 199) higher-contrast intensities, as in MATLAB's
  // phantom('Modified Shepp-Logan'): intensity, semi-axes a, b, centre x0, y0 (unit square), phi (degrees).
  static const double kTable[10][6] = {
      {1.0, 0.69, 0.92, 0.0, 0.0, 0.0},        {-0.8, 0.6624, 0.874, 0.0, -0.0184, 0.0},
      {-0.2, 0.11, 0.31, 0.22, 0.0, -18.0},    {-0.2, 0.16, 0.41, -0.22, 0.0, 18.0},
      {0.1, 0.21, 0.25, 0.0, 0.35, 0.0},       {0.1, 0.046, 0.046, 0.0, 0.1, 0.0},
      {0.1, 0.046, 0.046, 0.0, -0.1, 0.0},     {0.1, 0.046, 0.023, -0.08, -0.605, 0.0},
      {0.1, 0.023, 0.023, 0.0, -0.606, 0.0},   {0.1, 0.023, 0.046, 0.06, -0.605, 0.0}};
  std::vector<Ellipsoid> out;
  out.reserve(10);
  for (const auto& r : kTable) {
    const double phi = r[5] * kPi / 180.0, c = std::cos(phi), s = std::sin(phi);
    // x = H (c0 + R D v): scaling each axis to the FOV keeps the phantom filling it, like MATLAB's phantom.
    out.push_back(Ellipsoid::from_matrix(
        2, r[0], {r[3] * half_x, r[4] * half_y, 0.0},
        {half_x * r[1] * c, -half_x * r[2] * s, 0.0, half_y * r[1] * s, half_y * r[2] * c, 0.0, 0.0, 0.0, 1.0}));
  }
  return out;
}

std::vector<Ellipsoid> modified_shepp_logan_3d(double half_x, double half_y, double half_z) {
  // The 3D extension of Shepp-Logan used by Koay et al. 2007 and by Schabel's phantom3d (and its ports):
  // intensity, semi-axes a, b, c, centre x0, y0, z0, Euler angles phi, theta, psi (degrees); Toft's
  // intensities ("modified").
  static const double kTable[10][10] = {
      {1.0, 0.69, 0.92, 0.81, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0},
      {-0.8, 0.6624, 0.874, 0.78, 0.0, -0.0184, 0.0, 0.0, 0.0, 0.0},
      {-0.2, 0.11, 0.31, 0.22, 0.22, 0.0, 0.0, -18.0, 0.0, 10.0},
      {-0.2, 0.16, 0.41, 0.28, -0.22, 0.0, 0.0, 18.0, 0.0, 10.0},
      {0.1, 0.21, 0.25, 0.41, 0.0, 0.35, -0.15, 0.0, 0.0, 0.0},
      {0.1, 0.046, 0.046, 0.05, 0.0, 0.1, 0.25, 0.0, 0.0, 0.0},
      {0.1, 0.046, 0.046, 0.05, 0.0, -0.1, 0.25, 0.0, 0.0, 0.0},
      {0.1, 0.046, 0.023, 0.05, -0.08, -0.605, 0.0, 0.0, 0.0, 0.0},
      {0.1, 0.023, 0.023, 0.02, 0.0, -0.606, 0.0, 0.0, 0.0, 0.0},
      {0.1, 0.023, 0.046, 0.02, 0.06, -0.605, 0.0, 0.0, 0.0, 0.0}};
  const double h[3] = {half_x, half_y, half_z};
  std::vector<Ellipsoid> out;
  out.reserve(10);
  for (const auto& r : kTable) {
    // phantom3d's membership test is |D^-1 (alpha u - c0)| <= 1, i.e. u = alpha^T (c0 + D v): the tabulated
    // centre lives in the rotated frame. Reproduce that exactly, then scale by H: x = H u.
    const auto alpha = euler_zxz(r[7], r[8], r[9]);
    const double c0[3] = {r[4], r[5], r[6]}, dv[3] = {r[1], r[2], r[3]};
    std::array<double, 3> centre{};
    std::array<double, 9> a{};
    for (int i = 0; i < 3; ++i) {
      double s = 0.0;
      for (int j = 0; j < 3; ++j) {
        s += alpha[j * 3 + i] * c0[j];
        a[i * 3 + j] = h[i] * alpha[j * 3 + i] * dv[j];
      }
      centre[i] = h[i] * s;
    }
    out.push_back(Ellipsoid::from_matrix(3, r[0], centre, a));
  }
  return out;
}

}  // namespace larmor::phantom
