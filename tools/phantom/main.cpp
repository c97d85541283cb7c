// larmor-phantom: write an analytic ISMRMRD test dataset (see tools/phantom/phantom.h).
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "tools/phantom/phantom.h"
#include "tools/phantom/ultrasound.h"

int main(int argc, char** argv) {
  using namespace larmor::phantom;
  CLI::App app{"larmor-phantom: analytic Shepp-Logan k-space with plane-wave coils, written as ISMRMRD HDF5"};
  std::string output;
  int matrix = 256, matrix_z = 0;
  double fov = 256.0, fov_z = 0.0;
  std::string sampling, trajectory = "cartesian";
  PhantomSpec spec;
  app.add_option("-o,--output", output, "Output ISMRMRD HDF5 file (replaced if it exists)")->required();
  app.add_option("--dims", spec.dims, "2 (multi-slice) or 3 (3D encoding)")->check(CLI::IsMember({2, 3}));
  app.add_option("--matrix", matrix, "Reconstruction matrix in x and y")->check(CLI::Range(2, 32767));
  app.add_option("--matrix-z", matrix_z, "3D: partitions (default: --matrix)")->check(CLI::Range(1, 32767));
  app.add_option("--fov", fov, "In-plane FOV in mm")->check(CLI::PositiveNumber);
  app.add_option("--fov-z", fov_z, "3D: FOV in z (default: isotropic voxels); 2D: slice thickness (default 5)")
      ->check(CLI::PositiveNumber);
  app.add_option("--coils", spec.coils, "Receive channels (1 = uniform body coil)")->check(CLI::Range(1, 1024));
  app.add_option("--oversampling", spec.ro_oversampling, "Readout oversampling, 1 or 2")->check(CLI::IsMember({1, 2}));
  app.add_option("--sampling", sampling, "full | uniform | poisson (default: uniform when accelerated)")
      ->check(CLI::IsMember({"full", "uniform", "poisson"}));
  app.add_option("--accel", spec.accel_y, "Acceleration along e1")->check(CLI::PositiveNumber);
  app.add_option("--accel-z", spec.accel_z, "3D: acceleration along e2")->check(CLI::PositiveNumber);
  app.add_option("--acs", spec.acs_lines, "Embedded ACS lines (e1; also e2 in 3D)")->check(CLI::NonNegativeNumber);
  app.add_option("--snr", spec.snr, "Mean centre signal / noise std (0 = noiseless)")->check(CLI::NonNegativeNumber);
  app.add_flag("--noise-scan", spec.noise_scan, "Prepend noise readouts (flag 19)");
  app.add_option("--noise-samples", spec.noise_samples, "Number of noise-scan readouts")->check(CLI::PositiveNumber);
  app.add_option("--repetitions", spec.repetitions, "Repetitions")->check(CLI::Range(1, 65535));
  app.add_option("--slices", spec.slices, "2D: slices (sections of the 3D phantom when > 1)")->check(CLI::Range(1, 65535));
  app.add_option("--seed", spec.seed, "Seed for noise, coil phases and the Poisson pattern");
  app.add_option("--trajectory", trajectory,
                 "cartesian | radial | golden_angle | tiny_golden | spiral (2D) | radial3d | stack_of_stars (3D, "
                 "sets --dims 3); non-Cartesian data carry ISMRMRD traj in normalised units [-0.5, 0.5]")
      ->check(CLI::IsMember({"cartesian", "radial", "golden_angle", "tiny_golden", "radial3d", "stack_of_stars", "spiral"}));
  app.add_option("--spokes,--interleaves", spec.readouts,
                 "Spokes (per partition for stack_of_stars) or spiral interleaves (default: pi/2 x matrix spokes "
                 "[pi/2 x matrix^2 for radial3d], 16 interleaves)")
      ->check(CLI::PositiveNumber);
  app.add_option("--samples", spec.samples,
                 "Samples per readout before --oversampling (default: matrix; spiral: about one per cycle/FOV of arc)")
      ->check(CLI::Range(2, 65535));
  app.add_option("--tiny-golden-n", spec.tiny_golden_n, "tiny_golden: N of the angle pi / (phi + N - 1)")
      ->check(CLI::PositiveNumber);
  app.add_option("--spiral-density", spec.spiral_density, "spiral: sampling density at the centre / at the edge")
      ->check(CLI::Range(1.0, 100.0));
  bool no_traj = false;
  app.add_flag("--no-traj", no_traj,
               "Non-Cartesian: write no traj (trajectory_dimensions 0); the chain computes the trajectory "
               "(accumulate_readouts computed, printed after writing)");
  std::string weights_in_traj = "none";
  app.add_option("--weights-in-traj", weights_in_traj,
                 "Non-Cartesian: append each sample's density weight to its traj (trajectory_dimensions 3 = (kx, ky, "
                 "w), 4 = (kx, ky, kz, w)), the weights a chain would compute (area in cycles per FOV); chain: "
                 "accumulate_readouts { trajectory_weights: true } with density DENSITY_FROM_STREAM")
      ->check(CLI::IsMember({"none", "pipe-menon", "analytic"}));
  WriteOptions write_options;
  app.add_flag("--reference-image", write_options.reference_image,
               "Also write the true object on the reconstruction matrix (float magnitude, [nx, ny, 1] in 2D, "
               "[nx, ny, nz] in 3D, meta LarmorRole=AnatomicalReference) as image variable 'reference' "
               "(/dataset/reference), an anatomical prior to stream with larmor-client --send-images reference; "
               "not with --ultrasound or --slices > 1");
  // Ultrasound: one plane-wave shot of a linear array over point targets (tools/phantom/ultrasound.h).
  bool ultrasound = false;
  UltrasoundSpec us;
  std::string targets;
  app.add_flag("--ultrasound", ultrasound, "Write a plane-wave ultrasound shot over point targets instead (one acquisition per element)");
  app.add_option("--elements", us.elements, "Ultrasound: array elements")->check(CLI::Range(2, 4096));
  app.add_option("--pitch", us.pitch_mm, "Ultrasound: element pitch in mm")->check(CLI::PositiveNumber);
  app.add_option("--sound-speed", us.sound_speed_m_s, "Ultrasound: speed of sound in m/s")->check(CLI::PositiveNumber);
  app.add_option("--f0", us.center_frequency_hz, "Ultrasound: pulse centre frequency in Hz")->check(CLI::PositiveNumber);
  app.add_option("--bandwidth", us.fractional_bandwidth, "Ultrasound: -6 dB fractional bandwidth of the pulse")
      ->check(CLI::PositiveNumber);
  app.add_option("--fs", us.sampling_hz, "Ultrasound: sampling frequency in Hz")->check(CLI::PositiveNumber);
  app.add_option("--depth", us.depth_mm, "Ultrasound: recorded depth in mm")->check(CLI::PositiveNumber);
  app.add_option("--angle", us.angle_deg, "Ultrasound: transmit steering angle in degrees");
  app.add_option("--targets", targets, "Ultrasound: point targets 'x_mm,z_mm[,amplitude];...' (default: 5 targets)");
  CLI11_PARSE(app, argc, argv);

  if (ultrasound) {
    if (write_options.reference_image) {
      std::fprintf(stderr, "larmor-phantom: --reference-image is for MR data: an ultrasound shot has no "
                           "reconstruction matrix to sample the object on\n");
      return 1;
    }
    try {
      if (!targets.empty()) us.targets = parse_targets(targets);
      write_ultrasound_dataset(us, output);
      std::printf("larmor-phantom: wrote %s: %s\n", output.c_str(), describe(us).c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "larmor-phantom: %s\n", e.what());
      return 1;
    }
    return 0;
  }

  spec.trajectory = trajectory_from_string(trajectory);
  spec.write_traj = !no_traj;
  spec.weights_in_traj = stream_weights_from_string(weights_in_traj);
  if (no_traj && spec.trajectory == Trajectory::cartesian) {
    std::fprintf(stderr, "larmor-phantom: --no-traj needs a non-Cartesian --trajectory (Cartesian data carry none)\n");
    return 1;
  }
  if (spec.trajectory == Trajectory::radial3d || spec.trajectory == Trajectory::stack_of_stars) spec.dims = 3;
  spec.nx = spec.ny = matrix;
  spec.fov_mm[0] = spec.fov_mm[1] = fov;
  if (spec.dims == 3) {
    spec.nz = matrix_z > 0 ? matrix_z : matrix;
    spec.fov_mm[2] = fov_z > 0.0 ? fov_z : fov * spec.nz / matrix;
  } else {
    spec.nz = 1;
    spec.fov_mm[2] = fov_z > 0.0 ? fov_z : 5.0;
  }
  if (write_options.reference_image && spec.dims == 2 && spec.slices > 1) {
    std::fprintf(stderr, "larmor-phantom: --reference-image writes one image, of a single 2D slice or a 3D volume: "
                         "not with --slices %d (use --slices 1 or --dims 3)\n", spec.slices);
    return 1;
  }
  if (!sampling.empty())
    spec.sampling = sampling_from_string(sampling);
  else
    spec.sampling = (spec.accel_y > 1 || spec.accel_z > 1) ? Sampling::uniform : Sampling::full;

  try {
    const WriteResult r = write_dataset(spec, output, write_options);
    std::printf("larmor-phantom: wrote %s: %s; %zu imaging + %zu noise acquisitions, signal %.4g, sigma %.4g, %.2f s\n",
                output.c_str(), describe(spec).c_str(), r.imaging_acquisitions, r.noise_acquisitions, r.signal_level,
                r.noise_sigma, r.seconds);
    if (r.reference_images)
      std::printf("larmor-phantom: anatomical reference (true object, %dx%dx%d float) in /dataset/%s; send it "
                  "ahead of the data with larmor-client --send-images %s\n",
                  spec.nx, spec.ny, spec.dims == 3 ? spec.nz : 1, kReferenceImageVariable, kReferenceImageVariable);
    if (no_traj)
      std::printf("larmor-phantom: no traj written; chain: accumulate_readouts { computed { %s } }\n",
                  computed_trajectory_pbtxt(spec).c_str());
    if (spec.weights_in_traj != StreamWeights::none)
      std::printf("larmor-phantom: %s density weights in each traj's last component; chain: accumulate_readouts { "
                  "trajectory_weights: true } and gridding (or cg_sense) { density: DENSITY_FROM_STREAM }\n",
                  to_string(spec.weights_in_traj));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "larmor-phantom: %s\n", e.what());
    return 1;
  }
  return 0;
}
