// Phantom: object + plane-wave coils + noise model, and the analytic k-space on the encoding grid.
//
// Grid evaluation. Coil c's k-space is sum_j a_cj F(k - k_cj). We choose every coil frequency k_cj on a
// "fine" grid that contains the encoding grid: along each axis the taps are j / L with L = 2 x the
// reconstruction FOV, and the encoding grid has spacing 1 / FOV_enc with FOV_enc = L / ratio, ratio an
// integer (2, or 1 along an oversampled readout). So F is evaluated once per slice on the fine grid (the
// only transcendental work: one Bessel function per ellipse per point) and each coil's k-space is an exact
// discrete convolution of that grid with the coil's taps. The taps are separable (a product of 1D series
// per axis), so the convolution is one short 1D pass per axis. 3D volumes are streamed plane by plane in
// k_z with a window of fine planes, so memory stays at a few planes.
#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "tools/phantom/phantom.h"
#include "core/constants.h"
#include "tools/phantom/random.h"

namespace larmor::phantom {
namespace {

constexpr double kTwoPi = 2.0 * kPi;
// Coil series length: taps m = -kTaps..kTaps per axis (plus a +-1 phase-ramp shift).
constexpr int kTaps = 2;

cdouble expi(double a) { return {std::cos(a), std::sin(a)}; }

// acc += a * b. GCC implements std::complex<double> products through __muldc3 (Annex G inf/nan
// handling) unless -fcx-limited-range is on, which costs ~10x in the hot loops; the operands here are
// always finite, so spell the product out.
inline void cmac(double* acc, const double* a, const double* b) {
  acc[0] += a[0] * b[0] - a[1] * b[1];
  acc[1] += a[0] * b[1] + a[1] * b[0];
}
inline cdouble cmul(cdouble a, cdouble b) {
  return {a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real()};
}
// dst[0..n) += w * src[0..n) over interleaved complex arrays.
inline void caxpy(std::size_t n, cdouble w, const cdouble* src, cdouble* dst) {
  const double wr = w.real(), wi = w.imag();
  const double* s = reinterpret_cast<const double*>(src);
  double* d = reinterpret_cast<double*>(dst);
  for (std::size_t i = 0; i < n; ++i) {
    const double sr = s[2 * i], si = s[2 * i + 1];
    d[2 * i] += wr * sr - wi * si;
    d[2 * i + 1] += wr * si + wi * sr;
  }
}

}  // namespace

Phantom::Phantom(const PhantomSpec& spec) : spec_(spec) {
  validate(spec_);
  init({}, false);
}

Phantom::Phantom(const PhantomSpec& spec, std::vector<Ellipsoid> object) : spec_(spec) {
  validate(spec_);
  init(std::move(object), true);
}

double Phantom::slice_position(int slice) const {
  if (spec_.dims == 3) return 0.0;
  // Slices evenly spread over the middle half of the object's z extent (|u_z| < 0.5).
  return (slice - (spec_.slices - 1) / 2.0) * (half_[2] / spec_.slices);
}

double Phantom::k_of_index(int axis, int n) const {
  const Axis& a = axes_.at(axis);
  return (n - a.n / 2) / a.fov_enc;
}

const std::vector<Ellipsoid>& Phantom::object(int slice) const {
  return objects_.at(spec_.dims == 3 ? 0 : slice);
}

void Phantom::init(std::vector<Ellipsoid> object, bool custom) {
  const PhantomSpec& s = spec_;
  // The object fills the reconstruction FOV ([-1, 1] -> [-fov/2, fov/2] per axis). A 2D multi-slice stack
  // is cut from a 3D head as tall as it is deep in y.
  half_ = {s.fov_mm[0] / 2.0, s.fov_mm[1] / 2.0, s.dims == 3 ? s.fov_mm[2] / 2.0 : s.fov_mm[1] / 2.0};
  for (int a = 0; a < 3; ++a) axes_[a].period = 4.0 * half_[a];  // coil period L = 2 x recon FOV
  if (!custom) {
    if (s.dims == 2 && s.slices == 1)
      object = modified_shepp_logan_2d(half_[0], half_[1]);
    else
      object = modified_shepp_logan_3d(half_[0], half_[1], half_[2]);
  }
  if (object.empty()) throw std::invalid_argument("phantom: empty object");
  const int odims = object.front().dims();
  for (const auto& e : object)
    if (e.dims() != odims) throw std::invalid_argument("phantom: object mixes 2D and 3D shapes");
  if (s.dims == 3 && odims != 3) throw std::invalid_argument("phantom: a 3D spec needs a 3D object");

  if (s.dims == 3 || odims == 2) {
    objects_.assign(s.dims == 3 ? 1 : s.slices, object);
  } else {
    // 2D encoding of a 3D object: every slice sees the exact planar section (an ellipse) of each ellipsoid,
    // so slices differ and each is still analytic.
    source3d_ = object;
    objects_.resize(s.slices);
    for (int sl = 0; sl < s.slices; ++sl)
      for (const auto& e : source3d_)
        if (auto sec = e.section_z(slice_position(sl))) objects_[sl].push_back(*sec);
  }

  build_coils();

  // Encoding axes and the fine grid each needs (see the comment at the top of this file).
  const int nz_enc = encoded_nz();
  const int n[3] = {encoded_nx(), s.ny, nz_enc};
  const double fov_enc[3] = {s.fov_mm[0] * s.ro_oversampling, s.fov_mm[1], s.fov_mm[2]};
  double volume = 1.0;
  long long total = 1;
  for (int a = 0; a < 3; ++a) {
    Axis& ax = axes_[a];
    ax.n = n[a];
    ax.fov_enc = fov_enc[a];
    int jmin = 0, jmax = 0;
    for (const auto& c : coils_)
      for (const auto& t : c.taps[a]) {
        jmin = std::min(jmin, t.j);
        jmax = std::max(jmax, t.j);
      }
    const bool trivial = jmin == 0 && jmax == 0;
    if (a == 2 && s.dims == 2) {
      ax.ratio = 1;
      ax.fmin = 0;
      ax.count = 1;
      continue;
    }
    ax.ratio = trivial ? 1 : static_cast<int>(std::lround(ax.period / ax.fov_enc));
    ax.fmin = ax.ratio * (0 - ax.n / 2) - jmax;
    ax.count = ax.ratio * (ax.n - 1 - ax.n / 2) - jmin - ax.fmin + 1;
    volume *= ax.fov_enc;
    total *= ax.n;
  }
  // Unitary-DFT scaling: sum_j rho_j e^{-i2pi k x_j} ~ F(k) / dV, times 1/sqrt(N): sqrt(N) / V.
  kscale_ = std::sqrt(static_cast<double>(total)) / volume;

  compute_signal_level();
  build_noise();
}

void Phantom::build_coils() {
  const PhantomSpec& s = spec_;
  coils_.assign(s.coils, Coil{});
  if (s.coils == 1) {
    // A single coil is a uniform body coil, so its k-space is exactly the object's.
    for (auto& t : coils_[0].taps) t = {Tap{0, {1.0, 0.0}}};
    return;
  }
  // Each coil is a smooth blob centred on the FOV boundary (a ring in 2D, a Fibonacci sphere in 3D): the
  // periodic Gaussian exp(-|x - p|^2 / 2 sigma^2), truncated to its Fourier series terms |m| <= kTaps with
  // period L = 2 FOV, times a linear phase ramp (one step along the coil's direction) and a random phase.
  // Truncation makes it a sum of (2 kTaps + 1)^dims plane waves; the sensitivity IS that finite sum, so
  // nothing is approximated. With sigma = 0.3 FOV it falls to ~25% at the centre and ~2% across the object,
  // like a surface coil.
  detail::Rng rng(detail::mix(s.seed, 0x636f696c73ULL));  // "coils"
  const double golden = kPi * (3.0 - std::sqrt(5.0));
  double rss0 = 0.0;
  for (int c = 0; c < s.coils; ++c) {
    double dir[3];
    if (s.dims == 2) {
      const double th = kTwoPi * c / s.coils + kPi / 2.0;
      dir[0] = std::cos(th);
      dir[1] = std::sin(th);
      dir[2] = 0.0;
    } else {
      const double z = 1.0 - (2.0 * c + 1.0) / s.coils, r = std::sqrt(std::max(0.0, 1.0 - z * z));
      dir[0] = r * std::cos(golden * c);
      dir[1] = r * std::sin(golden * c);
      dir[2] = z;
    }
    Coil& coil = coils_[c];
    cdouble at_centre = 1.0;
    for (int a = 0; a < 3; ++a) {
      if (a == 2 && s.dims == 2) {
        coil.taps[a] = {Tap{0, {1.0, 0.0}}};  // 2D coils do not vary through the slice stack
        continue;
      }
      const double period = axes_[a].period, p = half_[a] * dir[a], sigma = 0.6 * half_[a];
      const int ramp = static_cast<int>(std::lround(dir[a]));
      cdouble sum = 0.0;
      for (int m = -kTaps; m <= kTaps; ++m) {
        const double g = std::exp(-2.0 * kPi * kPi * (sigma / period) * (sigma / period) * m * m);
        const cdouble w = g * expi(-kTwoPi * m * p / period);
        coil.taps[a].push_back(Tap{m + ramp, w});
        sum += w;
      }
      at_centre *= sum;
    }
    coil.gain = expi(kTwoPi * rng.uniform());
    rss0 += std::norm(at_centre);
  }
  // Normalise so the root-sum-of-squares sensitivity at isocentre is 1.
  for (auto& c : coils_) c.gain /= std::sqrt(rss0);
}

cdouble Phantom::axis_factor(int coil, int axis, double x) const {
  cdouble s = 0.0;
  for (const auto& t : coils_.at(coil).taps[axis]) s += t.w * expi(kTwoPi * t.j * x / axes_[axis].period);
  return s;
}

cdouble Phantom::sensitivity(int coil, double x, double y, double z) const {
  return coils_.at(coil).gain * axis_factor(coil, 0, x) * axis_factor(coil, 1, y) * axis_factor(coil, 2, z);
}

std::vector<PlaneWave> Phantom::plane_waves(int coil) const {
  const Coil& c = coils_.at(coil);
  std::vector<PlaneWave> out;
  for (const auto& tx : c.taps[0])
    for (const auto& ty : c.taps[1])
      for (const auto& tz : c.taps[2]) {
        PlaneWave p;
        p.k = {tx.j / axes_[0].period, ty.j / axes_[1].period, tz.j / axes_[2].period};
        p.amplitude = c.gain * tx.w * ty.w * tz.w;
        out.push_back(p);
      }
  return out;
}

double Phantom::image_value(double x, double y, double z) const {
  const auto& shapes = !source3d_.empty() ? source3d_ : objects_.front();
  double v = 0.0;
  for (const auto& e : shapes)
    if (e.contains(x, y, z)) v += e.intensity();
  return v;
}

cdouble Phantom::object_ft(int slice, double kx, double ky, double kz) const {
  cdouble f = 0.0;
  for (const auto& e : object(slice)) f += e.ft(kx, ky, kz);
  return f;
}

cdouble Phantom::coil_ft(int coil, int slice, double kx, double ky, double kz) const {
  // S_c rho has transform sum_j a_j F(k - k_j). In 2D the slice is a plane at z_s, so a wave's k_z only
  // contributes the phase exp(i2pi k_z z_s).
  const double zs = slice_position(slice);
  cdouble f = 0.0;
  for (const auto& p : plane_waves(coil)) {
    if (spec_.dims == 3)
      f += p.amplitude * object_ft(slice, kx - p.k[0], ky - p.k[1], kz - p.k[2]);
    else
      f += p.amplitude * expi(kTwoPi * p.k[2] * zs) * object_ft(slice, kx - p.k[0], ky - p.k[1]);
  }
  return f;
}

void Phantom::compute_fine_plane(int slice, double kz, std::vector<cdouble>& out, bool parallel) const {
  const Axis& ax = axes_[0];
  const Axis& ay = axes_[1];
  const double dkx = 1.0 / (ax.ratio * ax.fov_enc), dky = 1.0 / (ay.ratio * ay.fov_enc);
  const auto& shapes = object(slice);
  const int ne = static_cast<int>(shapes.size());
  const bool three_d = spec_.dims == 3;

  // Per-ellipse, per-axis tables: the contribution of k_a to A^T k (row a of A, times k_a) and the shift
  // phase exp(-i2pi k_a c_a). A^T k and the phase are separable over axes, so each point only needs
  // additions, one norm, one Bessel function and one complex product per ellipse.
  struct Table {
    std::vector<double> vx;   // 3 per x sample
    std::vector<cdouble> px;  // per x sample
    std::vector<double> vy;   // 3 per y sample
    std::vector<cdouble> py;
    double vz[3];
    cdouble pz;
    double amp;
  };
  std::vector<Table> tabs(ne);
  for (int e = 0; e < ne; ++e) {
    const auto& a = shapes[e].matrix();
    const auto& c = shapes[e].centre();
    Table& t = tabs[e];
    t.vx.resize(3 * ax.count);
    t.px.resize(ax.count);
    t.vy.resize(3 * ay.count);
    t.py.resize(ay.count);
    for (int i = 0; i < ax.count; ++i) {
      const double k = (ax.fmin + i) * dkx;
      for (int j = 0; j < 3; ++j) t.vx[3 * i + j] = k * a[0 * 3 + j];
      t.px[i] = expi(-kTwoPi * k * c[0]);
    }
    for (int i = 0; i < ay.count; ++i) {
      const double k = (ay.fmin + i) * dky;
      for (int j = 0; j < 3; ++j) t.vy[3 * i + j] = k * a[1 * 3 + j];
      t.py[i] = expi(-kTwoPi * k * c[1]);
    }
    for (int j = 0; j < 3; ++j) t.vz[j] = three_d ? kz * a[2 * 3 + j] : 0.0;
    t.pz = three_d ? expi(-kTwoPi * kz * c[2]) : cdouble(1.0);
    t.amp = shapes[e].intensity() * shapes[e].abs_det();
  }

  out.assign(static_cast<std::size_t>(ax.count) * ay.count, cdouble(0.0));
#pragma omp parallel for schedule(static) if (parallel)
  for (int iy = 0; iy < ay.count; ++iy) {
    cdouble* row = out.data() + static_cast<std::size_t>(iy) * ax.count;
    for (const Table& t : tabs) {
      const double by0 = t.vy[3 * iy + 0] + t.vz[0], by1 = t.vy[3 * iy + 1] + t.vz[1],
                   by2 = t.vy[3 * iy + 2] + t.vz[2];
      const cdouble phy = cmul(t.py[iy], t.pz) * t.amp;
      const double pr = phy.real(), pi = phy.imag();
      const double* px = reinterpret_cast<const double*>(t.px.data());
      double* r = reinterpret_cast<double*>(row);
      for (int ix = 0; ix < ax.count; ++ix) {
        const double q0 = t.vx[3 * ix + 0] + by0, q1 = t.vx[3 * ix + 1] + by1;
        double b;
        if (three_d) {
          const double q2 = t.vx[3 * ix + 2] + by2;
          b = unit_ball_ft(std::sqrt(q0 * q0 + q1 * q1 + q2 * q2));
        } else {
          b = unit_disk_ft(std::sqrt(q0 * q0 + q1 * q1));
        }
        const double xr = px[2 * ix], xi = px[2 * ix + 1];
        r[2 * ix] += b * (xr * pr - xi * pi);
        r[2 * ix + 1] += b * (xr * pi + xi * pr);
      }
    }
  }
}

void Phantom::xy_convolve(int c, const std::vector<cdouble>& fine, cdouble* dst) const {
  // x then y pass of the separable tap convolution, from the fine grid to the encoding grid:
  // dst(n) = sum_j w_j fine(ratio (n - N/2) - j).
  const Axis& ax = axes_[0];
  const Axis& ay = axes_[1];
  const Coil& coil = coils_[c];
  std::vector<cdouble> tmp(static_cast<std::size_t>(ax.n) * ay.count);
  for (int fy = 0; fy < ay.count; ++fy) {
    const cdouble* src = fine.data() + static_cast<std::size_t>(fy) * ax.count;
    cdouble* t = tmp.data() + static_cast<std::size_t>(fy) * ax.n;
    for (int n = 0; n < ax.n; ++n) {
      const int f = ax.ratio * (n - ax.n / 2) - ax.fmin;
      double acc[2] = {0.0, 0.0};
      for (const Tap& tap : coil.taps[0])
        cmac(acc, reinterpret_cast<const double*>(&tap.w), reinterpret_cast<const double*>(src + f - tap.j));
      t[n] = {acc[0], acc[1]};
    }
  }
  for (int n = 0; n < ay.n; ++n) {
    const int f = ay.ratio * (n - ay.n / 2) - ay.fmin;
    cdouble* d = dst + static_cast<std::size_t>(n) * ax.n;
    std::fill(d, d + ax.n, cdouble(0.0));
    for (const Tap& tap : coil.taps[1]) {
      const cdouble* t = tmp.data() + static_cast<std::size_t>(f - tap.j) * ax.n;
      caxpy(ax.n, tap.w, t, d);
    }
  }
}

void Phantom::stream(int slice, int c0, int c1, const PlaneCallback& callback) const {
  const int nslices = spec_.dims == 3 ? 1 : spec_.slices;
  if (slice < 0 || slice >= nslices) throw std::out_of_range("phantom: slice out of range");
  const Axis& az = axes_[2];
  const bool three_d = spec_.dims == 3;
  const int nx = axes_[0].n, ny = axes_[1].n;
  const std::size_t plane = static_cast<std::size_t>(nx) * ny;
  const int nc = c1 - c0;

  // Per coil, the weight of z tap j (fine plane g0 - j for target plane g0) with the coil gain and the grid
  // scale folded in. In 2D there is no k_z: the sensitivity's z factor is evaluated at the slice position.
  int jz_min = 0, jz_max = 0;
  std::vector<std::vector<std::pair<int, cdouble>>> zw(nc);
  for (int c = c0; c < c1; ++c) {
    const Coil& coil = coils_[c];
    if (!three_d) {
      zw[c - c0].emplace_back(0, kscale_ * coil.gain * axis_factor(c, 2, slice_position(slice)));
      continue;
    }
    for (const Tap& t : coil.taps[2]) {
      zw[c - c0].emplace_back(t.j, kscale_ * coil.gain * t.w);
      jz_min = std::min(jz_min, t.j);
      jz_max = std::max(jz_max, t.j);
    }
  }

  // Parallelism is coarse on purpose: a few OpenMP regions per batch of planes rather than several per
  // plane, because with short regions every barrier waits for a descheduled thread as soon as the machine
  // is shared (measured: 64^3 x 8 coils took 27x longer on 2 threads than on 1 on a loaded 2-core host).
  // In 3D a batch of target planes needs several new fine planes, computed one per thread; a single 2D
  // plane is split by rows (the fine grid) and by coils (the convolutions) instead.
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  const double dkz = three_d ? 1.0 / (az.ratio * az.fov_enc) : 0.0;
  // Bound the window (fine planes of convolved coils, doubles) to ~512 MB when choosing the batch size.
  const std::size_t plane_bytes = plane * nc * sizeof(cdouble);
  const int budget = static_cast<int>(std::max<std::size_t>(1, (std::size_t(512) << 20) / std::max<std::size_t>(1, plane_bytes)));
  const int batch = three_d ? std::max(1, std::min(2 * threads, budget / std::max(1, az.ratio) - 1)) : 1;

  std::map<int, std::vector<cdouble>> window;  // fine k_z index -> xy-convolved planes of coils [c0, c1)
  std::vector<cdouble> out(plane * nc * batch);
  for (int iz0 = 0; iz0 < az.n; iz0 += batch) {
    const int iz1 = std::min(az.n, iz0 + batch);
    auto g_of = [&](int iz) { return three_d ? az.ratio * (iz - az.n / 2) : 0; };
    const int lo = g_of(iz0) - jz_max, hi = g_of(iz1 - 1) - jz_min;
    window.erase(window.begin(), window.lower_bound(lo));  // planes only move up: drop what falls behind
    std::vector<int> todo;
    for (int g = lo; g <= hi; ++g)
      if (!window.count(g)) todo.push_back(g);
    std::vector<std::vector<cdouble>> made(todo.size());
    if (todo.size() == 1) {
      std::vector<cdouble> fine;
      compute_fine_plane(slice, todo[0] * dkz, fine, true);
      made[0].resize(plane * nc);
#pragma omp parallel for schedule(dynamic)
      for (int c = c0; c < c1; ++c) xy_convolve(c, fine, made[0].data() + plane * (c - c0));
    } else {
#pragma omp parallel for schedule(dynamic)
      for (int i = 0; i < static_cast<int>(todo.size()); ++i) {
        std::vector<cdouble> fine;
        compute_fine_plane(slice, todo[i] * dkz, fine, false);
        made[i].resize(plane * nc);
        for (int c = c0; c < c1; ++c) xy_convolve(c, fine, made[i].data() + plane * (c - c0));
      }
    }
    for (std::size_t i = 0; i < todo.size(); ++i) window.emplace(todo[i], std::move(made[i]));

    const int nt = (iz1 - iz0) * nc;
#pragma omp parallel for schedule(static)
    for (int t = 0; t < nt; ++t) {
      const int iz = iz0 + t / nc, c = t % nc;
      cdouble* dst = out.data() + plane * t;
      std::fill(dst, dst + plane, cdouble(0.0));
      for (const auto& [j, w] : zw[c]) caxpy(plane, w, window.at(g_of(iz) - j).data() + plane * c, dst);
    }
    for (int iz = iz0; iz < iz1; ++iz) callback(iz, out.data() + plane * nc * (iz - iz0));
  }
}

void Phantom::generate_planes(int slice, const PlaneCallback& callback) const {
  stream(slice, 0, spec_.coils, callback);
}

std::vector<cdouble> Phantom::kspace(int coil, int slice) const {
  if (coil < 0 || coil >= spec_.coils) throw std::out_of_range("phantom: coil out of range");
  const std::size_t plane = static_cast<std::size_t>(axes_[0].n) * axes_[1].n;
  std::vector<cdouble> out(plane * axes_[2].n);
  stream(slice, coil, coil + 1, [&](int iz, const cdouble* data) {
    std::copy(data, data + plane, out.begin() + static_cast<std::ptrdiff_t>(plane * iz));
  });
  return out;
}

std::vector<std::complex<float>> Phantom::kspace_all(int slice) const {
  const std::size_t plane = static_cast<std::size_t>(axes_[0].n) * axes_[1].n;
  const std::size_t vol = plane * axes_[2].n;
  std::vector<std::complex<float>> out(vol * spec_.coils);
  generate_planes(slice, [&](int iz, const cdouble* data) {
    for (int c = 0; c < spec_.coils; ++c) {
      const cdouble* src = data + plane * c;
      std::complex<float>* dst = out.data() + vol * c + plane * iz;
      for (std::size_t i = 0; i < plane; ++i) dst[i] = std::complex<float>(src[i]);
    }
  });
  return out;
}

namespace {
// Box-filtered rasterisation on the recon grid: the mean of value(x, y, z) over supersample^dims
// points inside each pixel (the image a finite-resolution scanner would see of the analytic object).
template <typename T, typename F>
std::vector<T> rasterise(const PhantomSpec& spec, int supersample, F value) {
  const int nx = spec.nx, ny = spec.ny, nz = spec.dims == 3 ? spec.nz : 1;
  const int ss = std::max(1, supersample), ssz = spec.dims == 3 ? ss : 1;
  const double dx = spec.fov_mm[0] / nx, dy = spec.fov_mm[1] / ny, dz = spec.fov_mm[2] / nz;
  std::vector<T> out(static_cast<std::size_t>(nx) * ny * nz);
#pragma omp parallel for collapse(2) schedule(static)
  for (int iz = 0; iz < nz; ++iz)
    for (int iy = 0; iy < ny; ++iy)
      for (int ix = 0; ix < nx; ++ix) {
        T acc = 0.0;
        for (int sz = 0; sz < ssz; ++sz)
          for (int sy = 0; sy < ss; ++sy)
            for (int sx = 0; sx < ss; ++sx) {
              const double x = (ix - nx / 2 + (sx + 0.5) / ss - 0.5) * dx;
              const double y = (iy - ny / 2 + (sy + 0.5) / ss - 0.5) * dy;
              const double z = spec.dims == 3 ? (iz - nz / 2 + (sz + 0.5) / ssz - 0.5) * dz : 0.0;
              acc += value(x, y, z);
            }
        out[(static_cast<std::size_t>(iz) * ny + iy) * nx + ix] = acc / (double(ss) * ss * ssz);
      }
  return out;
}
}  // namespace

std::vector<double> Phantom::image(int slice, int supersample) const {
  const auto& shapes = object(slice);
  return rasterise<double>(spec_, supersample, [&](double x, double y, double z) {
    double rho = 0.0;
    for (const auto& e : shapes)
      if (e.contains(x, y, z)) rho += e.intensity();
    return rho;
  });
}

std::vector<cdouble> Phantom::coil_image(int coil, int slice, int supersample) const {
  const double zs = slice_position(slice);
  const auto& shapes = object(slice);
  return rasterise<cdouble>(spec_, supersample, [&](double x, double y, double z) {
    double rho = 0.0;
    for (const auto& e : shapes)
      if (e.contains(x, y, z)) rho += e.intensity();
    return rho != 0.0 ? rho * sensitivity(coil, x, y, spec_.dims == 3 ? z : zs) : cdouble(0.0);
  });
}

void Phantom::compute_signal_level() {
  const PhantomSpec& s = spec_;
  const int nz = s.dims == 3 ? s.nz : 1;
  const int slice = s.dims == 3 ? 0 : (s.slices - 1) / 2;
  const double zs = slice_position(slice);
  const int n[3] = {s.nx, s.ny, nz};
  // Pixel centres of the central box |x_a| <= fov_a / 8 (at least the centre pixel) along each axis, and
  // each coil's separable sensitivity factor there.
  std::array<std::vector<double>, 3> pos;
  for (int a = 0; a < 3; ++a) {
    if (a == 2 && s.dims == 2) {
      pos[a] = {zs};
      continue;
    }
    const double d = s.fov_mm[a] / n[a];
    for (int i = 0; i < n[a]; ++i) {
      const double x = (i - n[a] / 2) * d;
      if (std::abs(x) <= s.fov_mm[a] / 8.0 || i == n[a] / 2) pos[a].push_back(x);
    }
  }
  auto level_over = [&](const std::array<std::vector<double>, 3>& p) {
    std::array<std::vector<double>, 3> f2;  // |factor|^2 per coil and position
    for (int a = 0; a < 3; ++a) {
      f2[a].resize(p[a].size() * s.coils);
      for (int c = 0; c < s.coils; ++c)
        for (std::size_t i = 0; i < p[a].size(); ++i) f2[a][c * p[a].size() + i] = std::norm(axis_factor(c, a, p[a][i]));
    }
    double sum = 0.0;
    long long count = 0;
    const auto& shapes = object(slice);
    for (std::size_t k = 0; k < p[2].size(); ++k)
      for (std::size_t j = 0; j < p[1].size(); ++j)
        for (std::size_t i = 0; i < p[0].size(); ++i) {
          double rho = 0.0;
          for (const auto& e : shapes)
            if (e.contains(p[0][i], p[1][j], p[2][k])) rho += e.intensity();
          ++count;
          if (rho == 0.0) continue;
          double s2 = 0.0;
          for (int c = 0; c < s.coils; ++c)
            s2 += std::norm(coils_[c].gain) * f2[0][c * p[0].size() + i] * f2[1][c * p[1].size() + j] *
                  f2[2][c * p[2].size() + k];
          sum += std::abs(rho) * std::sqrt(s2 / s.coils);
        }
    return count ? sum / count : 0.0;
  };
  signal_level_ = level_over(pos);
  if (signal_level_ == 0.0) {
    // A custom object that misses the centre: fall back to the whole reconstruction grid.
    for (int a = 0; a < 3; ++a) {
      if (a == 2 && s.dims == 2) continue;
      pos[a].clear();
      for (int i = 0; i < n[a]; ++i) pos[a].push_back((i - n[a] / 2) * s.fov_mm[a] / n[a]);
    }
    signal_level_ = level_over(pos);
  }
  if (s.snr > 0.0 && signal_level_ == 0.0) throw std::invalid_argument("phantom: object has no signal to set SNR");
}

void Phantom::build_noise() {
  const int nc = spec_.coils;
  sigma_ = spec_.snr > 0.0 ? signal_level_ / spec_.snr : 0.0;
  // Receiver noise n = M w: M = diag(v) (I + beta B / sqrt(C)), B complex Gaussian, v in [0.6, 1.4], so
  // channels have unequal variances and correlations of ~0.1-0.4, typical of phased arrays (Roemer et al.
  // 1990). Normalised so the mean channel variance is sigma^2.
  detail::Rng rng(detail::mix(spec_.seed, 0x6e6f697365ULL));  // "noise"
  std::vector<cdouble> m(static_cast<std::size_t>(nc) * nc);
  const double beta = 0.5 / std::sqrt(static_cast<double>(nc));
  for (int i = 0; i < nc; ++i) {
    const double v = 0.6 + 0.8 * rng.uniform();
    for (int j = 0; j < nc; ++j) m[i * nc + j] = v * ((i == j ? 1.0 : 0.0) + beta * rng.cgauss());
  }
  double mean_var = 0.0;
  for (const auto& x : m) mean_var += std::norm(x);
  mean_var /= nc;
  const double scale = sigma_ / std::sqrt(mean_var);
  for (auto& x : m) x *= scale;
  mixing_ = std::move(m);
}

std::vector<cdouble> Phantom::noise_covariance() const {
  const int nc = spec_.coils;
  std::vector<cdouble> psi(static_cast<std::size_t>(nc) * nc);
  for (int i = 0; i < nc; ++i)
    for (int j = 0; j < nc; ++j) {
      cdouble s = 0.0;
      for (int l = 0; l < nc; ++l) s += mixing_[i * nc + l] * std::conj(mixing_[j * nc + l]);
      psi[i * nc + j] = s;
    }
  return psi;
}

void Phantom::add_noise(std::complex<float>* data, int samples, std::uint64_t stream) const {
  if (sigma_ == 0.0) return;
  const int nc = spec_.coils;
  detail::Rng rng(detail::mix(detail::mix(spec_.seed, 0x6e6f697365ULL), stream));
  std::vector<cdouble> w(nc);
  for (int s = 0; s < samples; ++s) {
    for (auto& x : w) x = rng.cgauss();
    for (int c = 0; c < nc; ++c) {
      double n[2] = {0.0, 0.0};
      const double* row = reinterpret_cast<const double*>(mixing_.data() + static_cast<std::size_t>(c) * nc);
      const double* wd = reinterpret_cast<const double*>(w.data());
      for (int j = 0; j < nc; ++j) cmac(n, row + 2 * j, wd + 2 * j);
      data[static_cast<std::size_t>(c) * samples + s] += std::complex<float>(float(n[0]), float(n[1]));
    }
  }
}

std::vector<cdouble> kspace(const PhantomSpec& spec, int coil, int slice) {
  return Phantom(spec).kspace(coil, slice);
}

std::vector<double> image(const PhantomSpec& spec, int slice, int supersample) {
  return Phantom(spec).image(slice, supersample);
}

}  // namespace larmor::phantom
