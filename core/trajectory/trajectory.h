#pragma once
// Non-Cartesian k-space trajectories (radial, kooshball, stack-of-stars, spiral), their hash for caches,
// and the conversion from/to Gadgetron's normalised units.
//
// Every generator returns a host RArray of shape [dims, samples_per_readout, readouts]: the coordinate
// is fastest, as in ISMRMRD's per-acquisition `traj` array, so readout r of the result is exactly the
// trajectory block of acquisition r. Coordinates are in cycles per FOV (core's convention,
// design.md "Conventions"), range [-N/2, N/2] for a grid of N pixels along that axis.
#include <cstdint>

#include "core/array.h"
#include "core/shape.h"

namespace larmor::trajectory {

// How the spokes of a 2D radial trajectory are ordered in time.
enum class RadialOrder {
    uniform,      // spoke r at r * span / spokes
    interleaved,  // `interleaves` groups, each uniform over the span, group g offset by g * span / spokes
    golden,       // r * 111.246 deg (pi / phi_golden; Winkelmann et al., IEEE TMI 26:68, 2007)
    tiny_golden,  // r * pi / (phi_golden + N - 1) (Wundrak et al., MRM 75:2372, 2016)
};

struct RadialSpec {
    int spokes = 1;            // readouts generated
    int samples = 1;           // samples per spoke before readout oversampling
    int oversampling = 1;      // 2: twice as many samples over the same k range
    double kmax = 0.0;         // cycles per FOV, normally N / 2
    RadialOrder order = RadialOrder::uniform;
    bool full_circle = false;  // uniform / interleaved angles over 360 deg instead of 180 deg
    int interleaves = 1;       // groups for RadialOrder::interleaved (must divide spokes)
    int tiny_golden_n = 1;     // N of the N-th tiny golden angle (1 = the golden angle itself)
    long first_readout = 0;    // index of the first spoke in the sequence, so a stream can continue it
};

// phi_golden = (1 + sqrt 5) / 2.
double golden_ratio();
// The N-th tiny golden angle psi_N = pi / (phi_golden + N - 1) in radians; N = 1 is 111.246 deg.
double tiny_golden_angle(int n);
// Angle (radians, in [0, span)) of spoke `readout` (counted from 0, first_readout not added).
double radial_angle(const RadialSpec& spec, long readout);
// 2D radial: spoke r runs along (cos theta_r, sin theta_r); sample s of n = samples * oversampling sits
// at k = (s - n/2) * kmax / (n/2), so the centre is sample n/2. Shape [2, n, spokes].
RArray radial_2d(const RadialSpec& spec);

// 3D radial "kooshball": spokes through the centre along directions from the 2D golden means of
// Chan et al. (MRM 61:354, 2009): cos(polar) = frac(r * phi1), azimuth = 2 pi frac(r * phi2), with
// phi1 = 0.4656, phi2 = 0.6823 the eigenvector-derived golden means; directions cover a hemisphere and
// the spokes (both halves) the whole sphere. Sampling along a spoke as radial_2d. Shape [3, n, spokes].
RArray radial_3d(int spokes, int samples, int oversampling, double kmax, long first_readout = 0);
// Unit direction of kooshball spoke `index` (0-based, first_readout included).
void kooshball_direction(long index, double dir[3]);

// Stack of stars: radial_2d in kx-ky on every partition, kz = p - partitions/2 (integral, cycles per FOV).
// Readout index = partition * spokes + spoke. With rotate, partition p's spokes are turned by
// p * (pi / spokes) / partitions, so neighbouring partitions interleave. Shape [3, n, spokes * partitions].
RArray stack_of_stars(const RadialSpec& spec, int partitions, bool rotate = false);

// Single readouts, for a consumer that needs one at a time (accumulate_readouts computing a stream's
// trajectory): each writes [dims, n] floats (coordinate fastest, n = samples x oversampling) to out, bit
// for bit readout `readout` of the array generator named (the arrays are made of these calls), and
// validates its arguments as that generator does.
// radial_2d(spec)'s spoke `readout` (first_readout added as there; any readout >= 0, not only < spokes).
void radial_spoke(const RadialSpec& spec, long readout, float* out);
// radial_3d's spoke of sequence index `index` (first_readout already included), [3, n].
void kooshball_spoke(long index, int samples, int oversampling, double kmax, float* out);
// stack_of_stars(spec, partitions, rotate)'s spoke `spoke` of partition `partition`, [3, n].
void stack_of_stars_spoke(const RadialSpec& spec, int partitions, bool rotate, int partition, long spoke,
                          float* out);

// Variable-density Archimedean spiral with `interleaves` arms, each the rotation of the first by
// 2 pi i / interleaves. The radial distance between successive turns of one arm is
// interleaves / F(r) cycles per FOV with F(r) = 1 + (density - 1)(1 - r/kmax)^2: Nyquist (F = 1) at the
// edge, `density` times denser at the centre (a smooth version of the variable-density designs of
// Kim et al., MRM 50:214, 2003). So theta(r) = (2 pi / interleaves) int_0^r F. Only the gradient amplitude
// limit is modelled: the readout runs at constant speed |dk/dt|, i.e. samples are equally spaced in arc
// length at a constant dwell (no slew-rate limit). Sample 0 is k = 0, the last sample is at |k| = kmax.
// `samples` is multiplied by `oversampling` (same curve, half the arc step). Shape [2, n, interleaves].
RArray spiral_2d(int interleaves, int samples, int oversampling, double kmax, double density);

// FNV-1a (64-bit) over the shape, the float bits of the coordinates and the grid size: the key of
// trajectory-dependent caches (density weights, NUFFT plans).
uint64_t trajectory_hash(const RArray& coords, const Shape& image);

// Gadgetron's normalised units ([-0.5, 0.5] of the k extent: k_norm = k / N_a) to cycles per FOV and
// back. coords [dims, samples, readouts] on the host, dims 2 or 3, image.rank() >= dims. Validates (see
// validate_trajectory) the result / the input in cycles per FOV.
RArray normalised_to_cycles(const RArray& normalised, const Shape& image);
RArray cycles_to_normalised(const RArray& cycles, const Shape& image);
// Throws std::invalid_argument unless coords is a host [2 or 3, samples, readouts] array whose values are
// finite with |k_a| <= N_a / 2 (+ 1e-4 relative); the message names readout, sample, axis and value.
void validate_trajectory(const RArray& cycles, const Shape& image);

}  // namespace larmor::trajectory
