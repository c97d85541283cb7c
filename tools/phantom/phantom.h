// larmor-phantom: analytic MRI test data (Shepp-Logan objects, plane-wave coils, Cartesian sampling,
// correlated noise) written as ISMRMRD HDF5 datasets.
//
// Everything here is analytic: the k-space of coil c is an exact, closed-form function of k, evaluated on
// the Cartesian encoding grid without any FFT. That makes the data a reference that reconstructions can be
// checked against, independent of our own FFT, gridding and coil code.
//
//  * Object: the modified Shepp-Logan phantom (Shepp & Logan 1974, intensities of Toft 1996), a sum of
//    constant-intensity ellipses (2D) or ellipsoids (3D, the extension of Koay et al. 2007 / the
//    "3D modified Shepp-Logan" of common toolboxes). The Fourier transform of one ellipse is
//    rho * |det A| * exp(-i2pi k.c) * J1(2pi q)/q, q = |A^T k|; of one ellipsoid the same with
//    4pi * j1(2pi q)/(2pi q) (spherical Bessel j1), so rotation, shift and scaling are exact.
//  * Coils: each sensitivity is a short sum of plane waves, S_c(x) = sum_j a_cj exp(i2pi k_cj.x), so the
//    k-space of coil c is exactly sum_j a_cj F(k - k_cj) (Guerquin-Kern et al. 2012, IEEE TMI 31:626,
//    who simulate coils the same way to avoid the "inverse crime").
//  * Units: positions in mm (isocentre = FOV centre), k in cycles/mm. On the encoding grid, sample n of an
//    axis with N samples over FOV_enc has k = (n - N/2) / FOV_enc (readout: N = ro_oversampling * nx,
//    FOV_enc = ro_oversampling * fov_x). Samples are scaled by sqrt(N_total) / V_enc, so the centred,
//    orthonormal inverse DFT of the fully sampled grid (design.md's FFT convention) gives back
//    sensitivity x object in image units, and complex white noise of std sigma per sample stays sigma
//    per pixel.
//  * Data layout: x (readout) fastest, then y (kspace_encode_step_1), z (kspace_encode_step_2), coil.
//  * Non-Cartesian trajectories (noncartesian.cpp, core/trajectory): each acquisition carries its k
//    positions (ISMRMRD traj, Gadgetron's normalised units k / N in [-0.5, 0.5]; or none with
//    write_traj = false, the readout index in kspace_encode_step_1 saying where it is) and its samples are the
//    exact transform there, F_c(k / FOV) (k in cycles per FOV), scaled by sqrt(N_total) / V with N_total
//    and V the reconstruction matrix and FOV (area in 2D): the value of core's forward NUFFT,
//    N_total^{-1/2} sum_n x[n] exp(-i2pi k.(n - N/2)/N) ~ N_total^{-1/2} F(k / FOV) / dV, of the image x in
//    image units. Without readout oversampling this is the Cartesian kspace_scale(), so at a grid point
//    both files hold the same sample; an adjoint NUFFT with density weights of core's scaling
//    (core/trajectory/density.h) gives the image in the same units as a Cartesian reconstruction.
#pragma once

#include <array>
#include <complex>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <ismrmrd/ismrmrd.h>
#include <ismrmrd/xml.h>

#include "core/array.h"

namespace larmor::phantom {

using cdouble = std::complex<double>;

enum class Sampling {
  full,     // every (e1, e2)
  uniform,  // regular lattice, every accel_y-th line (and accel_z-th partition), plus an ACS block
  poisson,  // variable-density Poisson disc over (e1, e2) with a fully sampled ACS block
};
const char* to_string(Sampling sampling);
Sampling sampling_from_string(const std::string& name);  // "full" | "uniform" | "poisson"; throws

// k-space trajectory of the imaging readouts (non-Cartesian ones are fully sampled: sampling == full).
enum class Trajectory {
  cartesian,       // today's lines on the encoding grid
  radial,          // 2D, spokes uniform over 180 deg
  golden_angle,    // 2D, spoke r at r x 111.246 deg (continues across repetitions)
  tiny_golden,     // 2D, spoke r at r x pi / (phi + N - 1) (continues across repetitions)
  radial3d,        // 3D kooshball (golden means), isotropic matrix
  stack_of_stars,  // 3D: radial in kx-ky per partition, Cartesian kz, partitions turned by pi / (spokes nz)
  spiral,          // 2D variable-density spiral, `readouts` interleaves
};
const char* to_string(Trajectory trajectory);
Trajectory trajectory_from_string(const std::string& name);  // the names above; throws

// Density weights written into each non-Cartesian traj as every sample's last component (the ISMRMRD
// layout of Gadgetron and many exports: trajectory_dimensions 3 = (kx, ky, w) in 2D, 4 = (kx, ky, kz, w)
// in 3D), for a chain with accumulate_readouts { trajectory_weights: true } and density
// DENSITY_FROM_STREAM: the weights that chain would itself compute with DENSITY_PIPE_MENON (20
// iterations, kernel tolerance 1e-3) or DENSITY_ANALYTIC, in its units (k-space area in cycles per FOV),
// from the coordinates it reads back from the normalised traj, so both give the same image.
enum class StreamWeights { none, pipe_menon, analytic };
const char* to_string(StreamWeights weights);                      // "none", "pipe-menon", "analytic"
StreamWeights stream_weights_from_string(const std::string& name);  // the names above; throws

struct PhantomSpec {
  int dims = 2;                                  // 2 (multi-slice) or 3 (3D Fourier encoding)
  int nx = 256, ny = 256, nz = 1;                // reconstruction matrix (nz must be 1 in 2D)
  int coils = 8;                                 // 1 = a uniform (body) coil, S == 1
  double fov_mm[3] = {256.0, 256.0, 5.0};        // reconstruction FOV; in 2D fov_mm[2] is the slice thickness
  int ro_oversampling = 2;                       // 1 or 2
  Sampling sampling = Sampling::full;
  int accel_y = 1, accel_z = 1;                  // nominal acceleration (accel_z must be 1 in 2D)
  int acs_lines = 24;                            // ACS block: acs_lines in e1, min(acs_lines, nz) in e2
  double snr = 0.0;                              // 0 = noiseless; else mean centre signal / noise std
  bool noise_scan = false;                       // noise readouts (flag 19) sent before imaging
  int noise_samples = 256;                       // number of noise-scan readouts, nx*ro_oversampling each
  std::uint64_t seed = 1;                        // drives noise, coil phases and the Poisson pattern
  int repetitions = 1;
  int slices = 1;                                // 2D only
  Trajectory trajectory = Trajectory::cartesian;
  int readouts = 0;             // spokes (per partition for stack_of_stars) / spiral interleaves; 0 = default
  int samples = 0;              // samples per readout before ro_oversampling; 0 = default
  int tiny_golden_n = 5;        // N of the tiny golden angle
  double spiral_density = 4.0;  // spiral: sampling density at the centre / at the edge (>= 1)
  // Non-Cartesian: write each acquisition's k positions (ISMRMRD traj). false: trajectory_dimensions 0,
  // for a server that computes the trajectory itself (computed_trajectory_pbtxt says how).
  bool write_traj = true;
  // Non-Cartesian with write_traj: density weights appended to every sample's traj (see StreamWeights).
  StreamWeights weights_in_traj = StreamWeights::none;
};

// Readouts per partition and samples per readout (before ro_oversampling) of a non-Cartesian spec, with
// the defaults filled in: radial 2D / stack of stars ceil(pi/2 nx) spokes of nx samples (Nyquist on the
// rim), kooshball ceil(pi/2 nx^2) spokes, spiral 16 interleaves of about one sample per cycle/FOV of arc.
int trajectory_readouts(const PhantomSpec& spec);
int trajectory_samples(const PhantomSpec& spec);
int trajectory_dimensions(const PhantomSpec& spec);  // 2 or 3 (0 for Cartesian)
// The body of accumulate_readouts' `computed { ... }` (proto ComputedTrajectory, text format) that
// recomputes this spec's trajectory from the acquisitions' counters, e.g. "kind: TRAJECTORY_RADIAL
// spokes: 101": what a chain needs for data written with write_traj = false. Throws for Cartesian.
std::string computed_trajectory_pbtxt(const PhantomSpec& spec);

// Throws std::invalid_argument naming the first inconsistent field.
void validate(const PhantomSpec& spec);

// One constant-intensity ellipse (dims 2, in the x-y plane) or ellipsoid (dims 3):
// E = { centre + A v : |v| <= 1 }, A a dims x dims matrix (mm).
class Ellipsoid {
 public:
  // Ellipse with semi-axes a (along x before rotation) and b, rotated counter-clockwise by phi (radians).
  static Ellipsoid ellipse(double intensity, double cx, double cy, double a, double b, double phi);
  // Ellipsoid with semi-axes along the columns of the rotation matrix R (row-major 3x3, orthonormal).
  static Ellipsoid ellipsoid(double intensity, const std::array<double, 3>& centre,
                             const std::array<double, 3>& semi_axes, const std::array<double, 9>& rotation);
  // General form: A row-major in a 3x3 array (the top-left 2x2 block for dims 2).
  static Ellipsoid from_matrix(int dims, double intensity, const std::array<double, 3>& centre,
                               const std::array<double, 9>& a);

  int dims() const { return dims_; }
  double intensity() const { return intensity_; }
  const std::array<double, 3>& centre() const { return centre_; }
  const std::array<double, 9>& matrix() const { return a_; }
  double abs_det() const { return det_; }  // |det A|
  double measure() const;                  // area (mm^2) or volume (mm^3)
  bool contains(double x, double y, double z = 0.0) const;
  // Analytic Fourier transform, integral of intensity * exp(-i2pi k.x) over E (kz ignored for dims 2).
  cdouble ft(double kx, double ky, double kz = 0.0) const;
  // Section of a 3D ellipsoid by the plane z = const: an ellipse, or nothing when the plane misses it.
  std::optional<Ellipsoid> section_z(double z) const;

 private:
  int dims_ = 2;
  double intensity_ = 0.0;
  std::array<double, 3> centre_{};
  std::array<double, 9> a_{};     // A
  std::array<double, 9> ainv_{};  // A^-1
  double det_ = 0.0;              // |det A|
};

// Toft's modified Shepp-Logan, the 10 ellipses of the unit square scaled to half-extents (mm).
std::vector<Ellipsoid> modified_shepp_logan_2d(double half_x, double half_y);
// The 3D modified Shepp-Logan (10 ellipsoids, Toft intensities) scaled to half-extents (mm).
std::vector<Ellipsoid> modified_shepp_logan_3d(double half_x, double half_y, double half_z);

// Normalised Fourier transforms of the unit disk / unit ball at radial frequency q (cycles per unit):
// J1(2pi q)/q and 4pi j1(2pi q)/(2pi q); pi and 4pi/3 at q = 0.
double unit_disk_ft(double q);
double unit_ball_ft(double q);

// One term of a coil sensitivity: amplitude * exp(i2pi k.x), k in cycles/mm.
struct PlaneWave {
  std::array<double, 3> k{};
  cdouble amplitude{};
};

// One phase-encoding position of the sampling pattern.
struct PhaseEncode {
  int e1 = 0, e2 = 0;
  bool imaging = true;      // part of the (undersampled) imaging pattern
  bool calibration = false; // inside the ACS block
};
// Sorted by (e2, e1); the same for every slice and repetition.
std::vector<PhaseEncode> sampling_pattern(const PhantomSpec& spec);

// The phantom of one spec: object, coils and noise model, with all per-spec precomputation done once.
class Phantom {
 public:
  explicit Phantom(const PhantomSpec& spec);
  // A custom object: 2D ellipses (used for every slice) or 3D ellipsoids (2D: sectioned at each slice).
  Phantom(const PhantomSpec& spec, std::vector<Ellipsoid> object);

  const PhantomSpec& spec() const { return spec_; }
  int encoded_nx() const { return spec_.nx * spec_.ro_oversampling; }
  int encoded_nz() const { return spec_.dims == 3 ? spec_.nz : 1; }
  double slice_position(int slice) const;  // mm along z; 0 in 3D
  // k (cycles/mm) of encoding-grid index n along axis 0 (readout), 1 (e1) or 2 (e2).
  double k_of_index(int axis, int n) const;
  // Scale applied to F(k) for the stored samples: sqrt(N_total) / V_enc.
  double kspace_scale() const { return kscale_; }

  // Object as seen by slice (2D ellipses in 2D, ellipsoids in 3D).
  const std::vector<Ellipsoid>& object(int slice = 0) const;
  // Object intensity at a point (mm). 2D: the 2D object, z ignored, unless it is a stack of sections of a
  // 3D object (multi-slice default), which is then evaluated at z.
  double image_value(double x, double y, double z = 0.0) const;
  cdouble sensitivity(int coil, double x, double y, double z = 0.0) const;
  // S_c(x) = sum over plane_waves(coil) of amplitude * exp(i2pi k.x), exactly.
  std::vector<PlaneWave> plane_waves(int coil) const;

  // Analytic transforms at an arbitrary k (cycles/mm), unscaled. 2D: over the slice plane, kz ignored.
  cdouble object_ft(int slice, double kx, double ky, double kz = 0.0) const;
  cdouble coil_ft(int coil, int slice, double kx, double ky, double kz = 0.0) const;  // sum_j a_j F(k - k_j)

  // Noiseless k-space of one coil on the whole encoding grid (x, y, z), scaled by kspace_scale().
  std::vector<cdouble> kspace(int coil, int slice = 0) const;
  // All coils, float32 as stored in the file, layout (x, y, z, coil).
  std::vector<std::complex<float>> kspace_all(int slice = 0) const;
  // Streaming form used by the writer: for each e2 in increasing order, all coils of that plane,
  // layout (x, y, coil), scaled. Memory stays at a few planes even for large 3D matrices.
  using PlaneCallback = std::function<void(int e2, const cdouble* plane)>;
  void generate_planes(int slice, const PlaneCallback& callback) const;

  // Object / coil images on the reconstruction grid (x, y, z), pixel centres at (i - n/2) * fov / n,
  // averaged over supersample^dims points per pixel.
  std::vector<double> image(int slice = 0, int supersample = 1) const;
  std::vector<cdouble> coil_image(int coil, int slice = 0, int supersample = 1) const;

  // SNR reference: mean over the central box (|x_i| <= fov_i/8, pixel centres, centre slice) of
  // |object| * rms over coils of |S_c|. sigma = signal_level / snr (0 when snr == 0).
  double signal_level() const { return signal_level_; }
  double noise_sigma() const { return sigma_; }
  // Receiver noise: n = M w with w ~ CN(0, I); covariance Psi = M M^H (coils x coils, row-major),
  // mean of diag(Psi) = sigma^2. Correlated and unequal by construction, so prewhitening has work to do.
  const std::vector<cdouble>& noise_mixing() const { return mixing_; }
  std::vector<cdouble> noise_covariance() const;
  // Adds noise to one readout stored as ISMRMRD does, data[coil * samples + s]. Deterministic in
  // (seed, stream), independent of threads and of the order in which lines are generated.
  void add_noise(std::complex<float>* data, int samples, std::uint64_t stream) const;

  std::vector<PhaseEncode> sampling() const { return sampling_pattern(spec_); }

 private:
  struct Axis {
    int n = 1;              // encoded samples
    double fov_enc = 1.0;   // encoded FOV (mm)
    double period = 1.0;    // coil period L (mm): tap j has frequency j / L
    int ratio = 1;          // L / fov_enc: fine-grid refinement factor
    int fmin = 0, count = 1;  // fine-grid index range [fmin, fmin + count)
  };
  struct Tap {
    int j = 0;
    cdouble w{};
  };
  struct Coil {
    std::array<std::vector<Tap>, 3> taps;  // separable: S(x) = gain * prod_a sum_j w exp(i2pi j x_a / L_a)
    cdouble gain{1.0, 0.0};
  };

  void init(std::vector<Ellipsoid> object, bool custom);
  void build_coils();
  void build_noise();
  void compute_signal_level();
  void compute_fine_plane(int slice, double kz, std::vector<cdouble>& out, bool parallel) const;
  void xy_convolve(int coil, const std::vector<cdouble>& fine, cdouble* dst) const;
  void stream(int slice, int coil_begin, int coil_end, const PlaneCallback& callback) const;
  cdouble axis_factor(int coil, int axis, double x) const;

  PhantomSpec spec_;
  std::vector<std::vector<Ellipsoid>> objects_;  // per slice (one entry in 3D)
  std::vector<Ellipsoid> source3d_;              // 2D multi-slice: the 3D object that was sectioned
  std::array<double, 3> half_{};                 // object half-extents (mm)
  std::array<Axis, 3> axes_;
  std::vector<Coil> coils_;
  double kscale_ = 1.0;
  double signal_level_ = 0.0;
  double sigma_ = 0.0;
  std::vector<cdouble> mixing_;  // sigma-scaled M, coils x coils row-major
};

// Trajectory of one repetition in cycles per FOV, [dims, samples x ro_oversampling, readouts x partitions]
// (core/trajectory layout; partition-major for a stack of stars). Golden-angle kinds and the kooshball
// continue their sequence across repetitions (first readout = repetition x readouts).
larmor::RArray trajectory_coords(const PhantomSpec& spec, int repetition);
// The coordinates a chain reads from the normalised traj (float32 k / N) of `cycles`, as
// accumulate_readouts converts them (k = traj x N in double, clamped to +-N/2, stored as float): the
// points its density weights are computed at.
larmor::RArray coords_as_streamed(const larmor::RArray& cycles, const larmor::Shape& image);
// spec.weights_in_traj's weights [samples x readouts] for one repetition's trajectory_coords (computed
// at coords_as_streamed of them; Pipe-Menon on the CPU backend). Throws for StreamWeights::none.
larmor::RArray stream_density_weights(const PhantomSpec& spec, const larmor::RArray& coords);
// sqrt(N_total) / V over the reconstruction matrix and FOV (see the top of this file).
double noncartesian_scale(const PhantomSpec& spec);
// Noiseless samples at coords (cycles per FOV, as trajectory_coords) for one slice, float32 as stored,
// layout [readout][coil][sample] (one ISMRMRD acquisition after another). Parallel over readouts.
std::vector<std::complex<float>> sample_trajectory(const Phantom& phantom, int slice, const larmor::RArray& coords);

// Convenience wrappers that build a Phantom for one call.
std::vector<cdouble> kspace(const PhantomSpec& spec, int coil, int slice = 0);
std::vector<double> image(const PhantomSpec& spec, int slice = 0, int supersample = 1);

// ISMRMRD XML header of the dataset write_dataset() produces.
ISMRMRD::IsmrmrdHeader make_header(const PhantomSpec& spec);

// Image variable (<group>/reference) of the anatomical reference write_dataset() appends on request.
inline constexpr const char* kReferenceImageVariable = "reference";
// The true object on the reconstruction matrix, for a chain that takes an anatomical prior (streamed
// with larmor-client --send-images reference): Phantom::image(0, 3) (each pixel the mean over 3^n sub-samples, clamped at 0) as an
// ISMRMRD float MAGNITUDE image of 1 channel, [nx, ny, 1] in 2D or [nx, ny, nz] in 3D, repetition 0,
// image_index 1, image_series_index 0, the recon FOV, and meta LarmorRole = AnatomicalReference and
// ImageComment. Throws std::invalid_argument for multi-slice 2D (one reference would not fit every slice).
ISMRMRD::Image<float> reference_image(const Phantom& phantom);

struct WriteOptions {
  bool reference_image = false;  // also append reference_image() as <group>/reference
};
struct WriteResult {
  std::size_t imaging_acquisitions = 0;
  std::size_t noise_acquisitions = 0;
  std::size_t reference_images = 0;
  double signal_level = 0.0;
  double noise_sigma = 0.0;
  double seconds = 0.0;
};
// Writes /dataset (header + acquisitions, float32, and the reference image when asked) to path,
// replacing an existing file. Refuses options the spec cannot take before anything is written.
WriteResult write_dataset(const PhantomSpec& spec, const std::string& path, const WriteOptions& options = {});
// One-line description of a spec, e.g. "2D 256x256 (enc 512x256x1) 8 coils uniform R=3x1 ACS 24".
std::string describe(const PhantomSpec& spec);

}  // namespace larmor::phantom
