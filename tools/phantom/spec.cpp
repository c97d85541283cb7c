// PhantomSpec: validation and description.
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

#include "tools/phantom/phantom.h"

namespace larmor::phantom {
namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("phantom spec: " + what);
}

}  // namespace

const char* to_string(Sampling sampling) {
  switch (sampling) {
    case Sampling::full: return "full";
    case Sampling::uniform: return "uniform";
    case Sampling::poisson: return "poisson";
  }
  return "?";
}

Sampling sampling_from_string(const std::string& name) {
  if (name == "full") return Sampling::full;
  if (name == "uniform") return Sampling::uniform;
  if (name == "poisson") return Sampling::poisson;
  throw std::invalid_argument("phantom spec: unknown sampling '" + name + "' (full, uniform, poisson)");
}

const char* to_string(Trajectory t) {
  switch (t) {
    case Trajectory::cartesian: return "cartesian";
    case Trajectory::radial: return "radial";
    case Trajectory::golden_angle: return "golden_angle";
    case Trajectory::tiny_golden: return "tiny_golden";
    case Trajectory::radial3d: return "radial3d";
    case Trajectory::stack_of_stars: return "stack_of_stars";
    case Trajectory::spiral: return "spiral";
  }
  return "?";
}

Trajectory trajectory_from_string(const std::string& name) {
  for (Trajectory t : {Trajectory::cartesian, Trajectory::radial, Trajectory::golden_angle, Trajectory::tiny_golden,
                       Trajectory::radial3d, Trajectory::stack_of_stars, Trajectory::spiral})
    if (name == to_string(t)) return t;
  throw std::invalid_argument("phantom spec: unknown trajectory '" + name +
                              "' (cartesian, radial, golden_angle, tiny_golden, radial3d, stack_of_stars, spiral)");
}

namespace {

// The non-Cartesian part of validate(): fully sampled, matrix shapes each trajectory needs, counters.
void validate_trajectory(const PhantomSpec& s) {
  const std::string kind = to_string(s.trajectory);
  require(s.sampling == Sampling::full && s.accel_y == 1 && s.accel_z == 1,
          "trajectory " + kind + " is fully sampled: sampling must be full with no acceleration");
  require(s.nx == s.ny, "trajectory " + kind + " needs nx == ny, got " + std::to_string(s.nx) + " and " + std::to_string(s.ny));
  const bool three_d = s.trajectory == Trajectory::radial3d || s.trajectory == Trajectory::stack_of_stars;
  require(s.dims == (three_d ? 3 : 2), "trajectory " + kind + " needs dims " + (three_d ? "3" : "2"));
  require(s.trajectory != Trajectory::radial3d || s.nz == s.nx, "trajectory radial3d needs an isotropic matrix (nz == nx)");
  require(s.readouts >= 0 && s.samples >= 0, "readouts and samples must be >= 0 (0 = default)");
  const long long readouts = trajectory_readouts(s), samples = trajectory_samples(s);
  require(readouts >= 1 && readouts <= 65535, "readouts must be in [1, 65535] (uint16 counters), got " + std::to_string(readouts));
  require(samples >= 2 && samples * s.ro_oversampling <= 65535,
          "samples per readout x oversampling must be in [2, 65535], got " + std::to_string(samples * s.ro_oversampling));
  require(s.tiny_golden_n >= 1, "tiny_golden_n must be >= 1, got " + std::to_string(s.tiny_golden_n));
  require(std::isfinite(s.spiral_density) && s.spiral_density >= 1.0,
          "spiral_density must be >= 1, got " + std::to_string(s.spiral_density));
}

}  // namespace

void validate(const PhantomSpec& s) {
  require(s.dims == 2 || s.dims == 3, "dims must be 2 or 3");
  require(s.nx >= 2 && s.ny >= 1 && s.nz >= 1, "matrix sizes must be positive (nx >= 2)");
  require(s.dims == 3 || s.nz == 1, "nz must be 1 in 2D");
  require(s.ro_oversampling == 1 || s.ro_oversampling == 2, "ro_oversampling must be 1 or 2");
  // ISMRMRD stores sample counts and encoding counters as uint16.
  require(s.nx * s.ro_oversampling <= 65535 && s.ny <= 65535 && s.nz <= 65535, "matrix exceeds uint16 counters");
  require(s.coils >= 1 && s.coils <= 1024, "coils must be in [1, 1024] (ISMRMRD channel mask)");
  for (double f : s.fov_mm) require(std::isfinite(f) && f > 0.0, "fov_mm must be positive");
  require(s.accel_y >= 1 && s.accel_z >= 1, "acceleration factors must be >= 1");
  require(s.dims == 3 || s.accel_z == 1, "accel_z must be 1 in 2D");
  require(s.accel_y <= s.ny && s.accel_z <= s.nz, "acceleration exceeds the matrix");
  // ACS lines only matter when undersampling (a fully sampled scan ignores them).
  require(s.acs_lines >= 0 && (s.sampling == Sampling::full || s.acs_lines <= s.ny), "acs_lines must be in [0, ny]");
  require(std::isfinite(s.snr) && s.snr >= 0.0, "snr must be >= 0 (0 = noiseless)");
  require(!s.noise_scan || s.noise_samples >= 1, "noise_samples must be >= 1 with a noise scan");
  // The noise scan measures the receiver noise of the imaging data; without noise there is nothing to scan.
  require(!s.noise_scan || s.snr > 0.0, "a noise scan needs snr > 0");
  require(s.repetitions >= 1 && s.repetitions <= 65535, "repetitions must be in [1, 65535]");
  require(s.slices >= 1 && s.slices <= 65535, "slices must be in [1, 65535]");
  require(s.dims == 2 || s.slices == 1, "slices must be 1 in 3D");
  if (s.trajectory != Trajectory::cartesian) validate_trajectory(s);
  require(s.weights_in_traj == StreamWeights::none || (s.trajectory != Trajectory::cartesian && s.write_traj),
          std::string("weights_in_traj ") + to_string(s.weights_in_traj) +
              " needs a non-Cartesian trajectory written with its traj");
}

std::string describe(const PhantomSpec& s) {
  std::ostringstream o;
  o << s.dims << "D " << s.nx << "x" << s.ny;
  if (s.dims == 3) o << "x" << s.nz;
  o << " (enc " << s.nx * s.ro_oversampling << "x" << s.ny << "x" << (s.dims == 3 ? s.nz : 1) << ")";
  if (s.slices > 1) o << " " << s.slices << " slices";
  if (s.repetitions > 1) o << " " << s.repetitions << " reps";
  o << " " << s.coils << (s.coils == 1 ? " coil " : " coils ") << to_string(s.sampling);
  if (s.trajectory != Trajectory::cartesian) {
    o << " " << to_string(s.trajectory);
    if (s.trajectory == Trajectory::tiny_golden) o << " N=" << s.tiny_golden_n;
    o << " " << trajectory_readouts(s) << (s.trajectory == Trajectory::spiral ? " interleaves x " : " spokes x ")
      << trajectory_samples(s) * s.ro_oversampling << " samples";
    if (s.trajectory == Trajectory::spiral) o << " density " << s.spiral_density;
    if (!s.write_traj) o << " (no traj)";
    if (s.write_traj && s.weights_in_traj != StreamWeights::none)
      o << " (" << to_string(s.weights_in_traj) << " weights in traj)";
  }
  if (s.sampling != Sampling::full) {
    o << " R=" << s.accel_y;
    if (s.dims == 3) o << "x" << s.accel_z;
    o << " ACS " << s.acs_lines;
  }
  if (s.snr > 0.0)
    o << " SNR " << s.snr;
  else
    o << " noiseless";
  if (s.noise_scan) o << " +noise scan " << s.noise_samples;
  o << " seed " << s.seed;
  return o.str();
}

}  // namespace larmor::phantom
