// Non-Cartesian phantom data: trajectories from core/trajectory, exact samples there (phantom.h, top).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "core/trajectory/trajectory.h"
#include "core/constants.h"
#include "tools/phantom/phantom.h"

namespace larmor::phantom {
namespace {

}  // namespace

int trajectory_readouts(const PhantomSpec& s) {
  if (s.readouts > 0) return s.readouts;
  switch (s.trajectory) {
    case Trajectory::cartesian: return 0;
    case Trajectory::radial:
    case Trajectory::golden_angle:
    case Trajectory::tiny_golden:
    case Trajectory::stack_of_stars: return static_cast<int>(std::ceil(kPi / 2.0 * s.nx));
    case Trajectory::radial3d: return static_cast<int>(std::min(65535.0, std::ceil(kPi / 2.0 * s.nx * s.nx)));
    case Trajectory::spiral: return 16;
  }
  return 0;
}

int trajectory_samples(const PhantomSpec& s) {
  if (s.samples > 0) return s.samples;
  if (s.trajectory == Trajectory::cartesian) return 0;
  if (s.trajectory != Trajectory::spiral) return s.nx;
  // Total arc length of all arms ~ integral of the density F over the disk = pi kmax^2 (1 + (D - 1) / 6)
  // (arms 1 / F apart); one sample per cycle/FOV of arc.
  const double kmax = s.nx / 2.0;
  return static_cast<int>(std::ceil(kPi * kmax * kmax * (1.0 + (s.spiral_density - 1.0) / 6.0) / trajectory_readouts(s)));
}

int trajectory_dimensions(const PhantomSpec& s) {
  switch (s.trajectory) {
    case Trajectory::cartesian: return 0;
    case Trajectory::radial3d:
    case Trajectory::stack_of_stars: return 3;
    default: return 2;
  }
}

std::string computed_trajectory_pbtxt(const PhantomSpec& s) {
  validate(s);
  const std::string readouts = std::to_string(trajectory_readouts(s));
  // The kinds write their angles as trajectory_coords() below generates them: uniform radial over 180 deg,
  // golden kinds and the kooshball continuing across repetitions (the computed default), stack-of-stars
  // partitions turned, kspace_encode_step_1 the spoke / arm and kspace_encode_step_2 the partition.
  switch (s.trajectory) {
    case Trajectory::radial: return "kind: TRAJECTORY_RADIAL spokes: " + readouts;
    case Trajectory::golden_angle: return "kind: TRAJECTORY_GOLDEN_ANGLE";
    case Trajectory::tiny_golden:
      return "kind: TRAJECTORY_TINY_GOLDEN_ANGLE tiny_golden_n: " + std::to_string(s.tiny_golden_n);
    case Trajectory::radial3d: return "kind: TRAJECTORY_KOOSHBALL";
    case Trajectory::stack_of_stars:
      return "kind: TRAJECTORY_STACK_OF_STARS spokes: " + readouts + " rotate_partitions: true";
    case Trajectory::spiral: {
      char density[40];
      std::snprintf(density, sizeof density, "%.17g", s.spiral_density);  // round-trips the double exactly
      return "kind: TRAJECTORY_SPIRAL interleaves: " + readouts + " spiral_density: " + density;
    }
    case Trajectory::cartesian: break;
  }
  throw std::invalid_argument("phantom: a Cartesian spec has no trajectory to compute");
}

larmor::RArray trajectory_coords(const PhantomSpec& s, int repetition) {
  validate(s);
  namespace tr = larmor::trajectory;
  if (s.trajectory == Trajectory::cartesian) throw std::invalid_argument("phantom: a Cartesian spec has no trajectory array");
  const int readouts = trajectory_readouts(s), samples = trajectory_samples(s);
  const double kmax = s.nx / 2.0;
  const long first = static_cast<long>(repetition) * readouts;
  tr::RadialSpec r;
  r.spokes = readouts;
  r.samples = samples;
  r.oversampling = s.ro_oversampling;
  r.kmax = kmax;
  switch (s.trajectory) {
    case Trajectory::radial: return tr::radial_2d(r);
    case Trajectory::golden_angle:
      r.order = tr::RadialOrder::golden;
      r.first_readout = first;
      return tr::radial_2d(r);
    case Trajectory::tiny_golden:
      r.order = tr::RadialOrder::tiny_golden;
      r.tiny_golden_n = s.tiny_golden_n;
      r.first_readout = first;
      return tr::radial_2d(r);
    case Trajectory::radial3d: return tr::radial_3d(readouts, samples, s.ro_oversampling, kmax, first);
    case Trajectory::stack_of_stars: return tr::stack_of_stars(r, s.nz, true);
    case Trajectory::spiral: return tr::spiral_2d(readouts, samples, s.ro_oversampling, kmax, s.spiral_density);
    case Trajectory::cartesian: break;
  }
  throw std::invalid_argument("phantom: unknown trajectory");
}

double noncartesian_scale(const PhantomSpec& s) {
  const int dims = s.dims;
  const double n_total = static_cast<double>(s.nx) * s.ny * (dims == 3 ? s.nz : 1);
  const double volume = s.fov_mm[0] * s.fov_mm[1] * (dims == 3 ? s.fov_mm[2] : 1.0);
  return std::sqrt(n_total) / volume;
}

std::vector<std::complex<float>> sample_trajectory(const Phantom& ph, int slice, const larmor::RArray& k) {
  const PhantomSpec& s = ph.spec();
  if (k.device() != larmor::Device::Cpu || k.shape().rank() != 3 || (k.shape()[0] != 2 && k.shape()[0] != 3))
    throw std::invalid_argument("phantom: coordinates must be a host [2 or 3, samples, readouts] array, got " + k.shape().str());
  const int dims = static_cast<int>(k.shape()[0]);
  if (dims == 3 && s.dims != 3) throw std::invalid_argument("phantom: 3D coordinates need a 3D spec");
  const size_t n = k.shape()[1], readouts = k.shape()[2], nc = static_cast<size_t>(s.coils);
  const double scale = noncartesian_scale(s);
  const double inv_fov[3] = {1.0 / s.fov_mm[0], 1.0 / s.fov_mm[1], 1.0 / s.fov_mm[2]};

  // Phantom::coil_ft evaluated for all coils at once: S_c rho has transform sum_j a_cj F(k - k_cj), and
  // the coils' plane waves share frequencies (one fine grid), so each distinct shift F(k - k_m) is
  // computed once per sample. In 2D a wave's k_z only adds the phase exp(i2pi k_z z_slice) (as coil_ft).
  struct Term {
    size_t shift;
    cdouble amplitude;
  };
  std::vector<std::array<double, 3>> shifts;
  std::vector<std::vector<Term>> terms(nc);
  const double zs = ph.slice_position(slice);
  for (size_t c = 0; c < nc; ++c)
    for (const PlaneWave& w : ph.plane_waves(static_cast<int>(c))) {
      const std::array<double, 3> key{w.k[0], w.k[1], s.dims == 3 ? w.k[2] : 0.0};
      const auto it = std::find(shifts.begin(), shifts.end(), key);
      const size_t m = static_cast<size_t>(it - shifts.begin());
      if (it == shifts.end()) shifts.push_back(key);
      const cdouble phase = s.dims == 3 ? cdouble(1.0) : std::polar(1.0, 2.0 * kPi * w.k[2] * zs);
      terms[c].push_back({m, scale * w.amplitude * phase});
    }

  std::vector<std::complex<float>> out(readouts * nc * n);
#pragma omp parallel
  {
    std::vector<cdouble> f(shifts.size());
#pragma omp for schedule(dynamic, 1)
    for (long long r = 0; r < static_cast<long long>(readouts); ++r)
      for (size_t i = 0; i < n; ++i) {
        const float* p = k.data() + (static_cast<size_t>(r) * n + i) * static_cast<size_t>(dims);
        // cycles per FOV -> cycles per mm, per axis.
        const double kx = p[0] * inv_fov[0], ky = p[1] * inv_fov[1], kz = dims == 3 ? p[2] * inv_fov[2] : 0.0;
        for (size_t m = 0; m < shifts.size(); ++m)
          f[m] = ph.object_ft(slice, kx - shifts[m][0], ky - shifts[m][1], kz - shifts[m][2]);
        for (size_t c = 0; c < nc; ++c) {
          cdouble v = 0.0;
          for (const Term& t : terms[c]) v += t.amplitude * f[t.shift];
          out[(static_cast<size_t>(r) * nc + c) * n + i] = std::complex<float>(v);
        }
      }
  }
  return out;
}

}  // namespace larmor::phantom
