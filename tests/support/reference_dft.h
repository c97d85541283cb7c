#pragma once
// Independent references for the numerical tests: the exact centred orthonormal DFT in double
// precision by direct sums (no FFT, no modulation trick), plus small helpers to compare arrays.
#include <complex>
#include <vector>

#include "core/backend.h"

namespace larmor::test {

using cdouble = std::complex<double>;

// y = fftshift(DFT(ifftshift(x))) / sqrt(N) over the axes in `axes`, batched over the others:
// y[k] = N^-1/2 sum_m x[m] exp(s 2 pi i (k - N/2)(m - N/2) / N) per axis (s = -1 forward, +1 inverse),
// with N/2 integer division; applied separably, one axis after the other.
std::vector<cdouble> reference_centred_dft(const std::vector<cdouble>& x, const Shape& shape, AxisMask axes,
                                           FFTDirection dir);

// x = the backend's FFT of x in a fresh array (x is rebound; other handles keep the input): the
// out-of-place transform as the FFT tests use it.
void fft_rebind(Backend& be, CArray& x, AxisMask axes, FFTDirection dir);

// Host CArray <-> double vectors (the CArray must live on the host).
std::vector<cdouble> to_double(const CArray& a);
CArray from_double(const std::vector<cdouble>& x, const Shape& shape);

// Reproducible complex normal samples (mean 0, unit variance per component) on the host.
CArray random_array(const Shape& shape, unsigned seed);

// ||a - b||_2 / ||b||_2 (0 when both are 0); host arrays of equal size.
double relative_error(const std::vector<cdouble>& a, const std::vector<cdouble>& b);
double relative_error(const CArray& a, const CArray& b);
double relative_error(const CArray& a, const std::vector<cdouble>& b);

// <a, b> = sum conj(a) b in double precision, host arrays.
cdouble inner(const CArray& a, const CArray& b);

// Noise-free multi-coil image [nx, ny, nz, nc] of an elliptical object with a smooth phase, seen
// through smooth complex coil sensitivities (Gaussian profiles with linear phase ramps): the input
// with known answer for coil-map estimation. true_maps are the sensitivities normalised per pixel to
// unit norm; support marks the object's pixels (nx*ny*nz entries).
struct CoilPhantom {
    CArray data;
    CArray true_maps;
    std::vector<char> support;
};
CoilPhantom smooth_coil_phantom(size_t nx, size_t ny, size_t nz, size_t nc);

}  // namespace larmor::test
