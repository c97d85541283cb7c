#pragma once
// Analytic density compensation weights for the trajectories of trajectory.h.
//
// Weights are an RArray [samples, readouts] (host) scaled as quadrature weights of k-space in cycles per
// FOV: sum_i w_i f(k_i) ~ integral of f over the sampled region, so a constant 1 sums to the area of the
// sampled disk (pi kmax^2) in 2D, to the volume of the ball (4/3 pi kmax^3) for 3D radial and to
// pi kmax^2 x partitions (dkz = 1) for a stack of stars. An adjoint NUFFT of w * y then approximates the
// inverse Fourier integral with the N^{-1/2} normalisation of core's forward NUFFT.
// (Pipe-Menon iterative weights need the NUFFT kernel and live with it.)
#include "core/array.h"
#include "core/shape.h"

namespace larmor::trajectory {

// 2D radial with spokes through the centre ([2 or 3, n, spokes]; a third axis is ignored): the ramp
// w = pi |k| dk / spokes (each circle of radius |k| is crossed twice by each of the spokes over 180 deg),
// dk the sample spacing along a spoke. The centre sample, common to all spokes, gets the disk of radius
// dk/2 shared by all of them, pi (dk/2)^2 / spokes (the DC correction of Hoge et al., MRM 38:117, 1997,
// and Pipe & Menon, MRM 41:179, 1999: the plain ramp would give it zero weight).
RArray density_radial_2d(const RArray& coords);
// Stack of stars ([3, n, spokes * partitions], partition-major as stack_of_stars()): the 2D ramp of each
// partition's spokes times dkz = 1.
RArray density_stack_of_stars(const RArray& coords, int partitions);
// 3D radial ([3, n, spokes]): the shell 4 pi |k|^2 dk shared by the 2 x spokes crossings,
// w = 2 pi |k|^2 dk / spokes; the centre sample gets the ball of radius dk/2 shared by all spokes,
// (4/3) pi (dk/2)^3 / spokes.
RArray density_radial_3d(const RArray& coords);
// Area of each sample's Voronoi cell ([2, n, readouts]) among all samples, cells clipped to the disk of
// radius kmax (the exact area of cell ∩ disk). Exact duplicates (the common centre of spiral arms)
// share one cell equally. Half-plane clipping of a box by the bisectors of neighbours visited ring by ring
// on a bucket grid, stopping once the next ring is further than twice the cell's farthest vertex (the
// cell can no longer change).
RArray density_voronoi(const RArray& coords, double kmax);
// Hoge, Kwan & Pike (MRM 38:117, 1997), w = |g| |sin(arg g - arg k)| with g = dk/dt (central
// differences, one dwell per sample), times the local distance between neighbouring arms along the
// radius, (2 pi / interleaves) |dr/dtheta|: constant for Hoge's Archimedean spiral (where it is only a
// global scale), it makes the formula hold for variable-density spirals and gives area units.
// coords [2, n, interleaves] as spiral_2d() writes them.
RArray density_hoge(const RArray& coords);

enum class DensityKind { radial_2d, stack_of_stars, radial_3d, voronoi, hoge };
const char* to_string(DensityKind kind);

// Weights of `kind` for coords (cycles per FOV) on a grid `image` ([samples, readouts] as coords);
// `partitions` is the stack of stars' (ignored otherwise); Voronoi cells are clipped to kmax = image[0] / 2.
RArray density_of(DensityKind kind, const RArray& coords, const Shape& image, int partitions = 1);

}  // namespace larmor::trajectory
