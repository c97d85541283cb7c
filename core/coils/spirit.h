#pragma once
// SPIRiT calibration (Lustig & Pauly, "SPIRiT: iterative self-consistent parallel imaging reconstruction
// from arbitrary k-space", MRM 64:457, 2010): every k-space sample of coil i is a linear combination of
// the samples around it in every coil, x_i(p) = sum_j sum_o g_ij(o) x_j(p + o) over a k x k window o
// (the sample itself, o = 0 of j = i, left out). The kernels are fitted on the calibration block by
// Tikhonov-regularised least squares, one target coil at a time:
//     g_i = argmin ||A_i g - a_i||^2 + eps ||g||^2,
// A the calibration matrix (core/coils/calibration_matrix.h), a_i its column of coil i's window centre
// and A_i A without that column. eps = lambda * trace(A^H A) / columns, so lambda does not depend on the
// data's scale or the coil count (as GRAPPA's, core/coils/grappa.h).
//
// Solved the way Murphy et al. show calibration must be at many coils ("Fast l1-SPIRiT compressed sensing
// parallel imaging MRI: scalable parallel implementation and clinically feasible runtime", IEEE TMI
// 31:1250, 2012, Appendix A): one Cholesky factorisation for every coil instead of one per coil. With
// M = A^H A + eps I, the block inverse of M with coil i's centre column j last gives
//     M^-1 e_j = s [-M_rr^-1 m_rj ; 1],   s = 1 / (m_jj - m_jr M_rr^-1 m_rj),
// and M_rr^-1 m_rj is g_i (M_rr = A_i^H A_i + eps I, m_rj = A_i^H a_i). So one factorisation of M and
// C right-hand sides e_j give every kernel: g_i = -(M^-1 e_j)_r / (M^-1 e_j)_j.
//
// The image-space form: the kernels as a convolution, by the convolution theorem a pointwise C x C
// matrix G(r) = sqrt(N) IFFT(g flipped)(r) on the image grid, which core/linops/spirit.h applies.
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "core/backend.h"

namespace larmor::coils {

struct SpiritSettings {
    int kernel = 5;         // window width (odd): 5 x 5 (Lustig & Pauly's default), 7 x 7 for more coils
    float lambda = 0.01f;   // Tikhonov weight relative to the mean of diag(A^H A)
};

// Calibration data SPIRiT cannot use: a block smaller than the kernel, no signal, samples that are not
// finite, a singular system.
class SpiritError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Throws std::invalid_argument naming the first setting outside its range.
void check(const SpiritSettings& s);

struct SpiritKernels {
    SpiritSettings settings;
    size_t coils = 0;
    int dims = 2;  // 3: kernels of a 3D block, [k, k, k, C_source, C_target]
    // [k, k, C_source, C_target], x fastest: weights[ox + k (oy + k (j + C i))] is g_ij at window position
    // (ox, oy) (the window's centre is (k / 2, k / 2)); g_ii's centre is 0.
    std::vector<cfloat> weights;
    // Per target coil: ||A_i g_i - a_i|| / ||a_i|| on the calibration block.
    std::vector<double> fit_residual;
    size_t rows = 0;  // rows of the calibration matrix
};

// The kernels of a host block [cx, cy, C] (or [cx, cy, cz, C]: 3D kernels) (x fastest) of fully sampled k-space (calibration_block in
// core/coils/calibration_matrix.h), by one Cholesky factorisation on the backend's device (the dense
// layer: LAPACK or cuSOLVER). The block is divided by its peak first, so the fit is scale-free.
SpiritKernels spirit_kernels(Backend& be, const CArray& block, const SpiritSettings& s);

// The same kernels by C separate factorisations of the reduced systems A_i^H A_i + eps I: the way
// Murphy et al. found calibration dominating at many coils, kept as the reference the shared
// factorisation is tested against.
SpiritKernels spirit_kernels_per_coil(Backend& be, const CArray& block, const SpiritSettings& s);

// G(r) on an image grid [n1, n2] (on the backend): [n1, n2, C_source, C_target], pixel fastest, so that
// the SPIRiT-consistent image of coil i is sum_j G_ij(r) x_j(r). Throws std::invalid_argument when the
// grid is smaller than the kernel.
CArray spirit_image_kernels(Backend& be, const SpiritKernels& k, size_t n1, size_t n2);

// The same for 3D kernels on a volume [n1, n2, n3]: [n1, n2, n3, C_source, C_target].
CArray spirit_image_kernels(Backend& be, const SpiritKernels& k, size_t n1, size_t n2, size_t n3);

// The same for the readout positions [first, first + count) only: rows first .. first + count - 1 of
// spirit_image_kernels(be, k, n1, n2, n3), [count, n2, n3, C_source, C_target]. The kernel's inverse FFT
// is separable, so the readout axis is transformed on the small [n1, k, k] support first and only the
// slab's rows are carried on: a device holding a slab of a volume split across devices (core/recon/
// l1_spirit_slabs.h) builds its own part of G and never the whole (C^2 voxels: 34 GB at 32 coils for
// 256 x 256 x 64). Throws std::invalid_argument when the slab leaves the volume.
CArray spirit_image_kernels(Backend& be, const SpiritKernels& k, size_t n1, size_t n2, size_t n3, size_t first,
                            size_t count);

// 3D Cartesian k-space [RO, E1, E2, C] (on the backend) whose lines [e1_lo, e1_hi) x [e2_lo, e2_hi) are
// fully sampled: k x k x k kernels fitted on the 3D calibration block (at most `most` samples per axis,
// centred on the readout's middle).
SpiritKernels spirit_kernels_3d(Backend& be, const CArray& kspace, size_t e1_lo, size_t e1_hi, size_t e2_lo,
                                size_t e2_hi, size_t most, const SpiritSettings& s);

// spirit_kernels_3d's kernels as image-space matrices, g [RO, E1, E2, C_source, C_target] on the backend.
// In image space the 3D kernel's inverse FFT along the readout is each readout position's own 2D
// kernel, so g is also the per-slice operator of a scan whose readout has been transformed (Murphy et
// al. 2012, Section III.A: decoupled 2D problems), which core/recon/l1_spirit.h solves.
CArray spirit_image_kernels_3d(Backend& be, const CArray& kspace, size_t e1_lo, size_t e1_hi, size_t e2_lo,
                               size_t e2_hi, size_t most, const SpiritSettings& s);

}  // namespace larmor::coils
