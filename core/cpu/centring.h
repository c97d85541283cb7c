#pragma once
// The centred orthonormal DFT as a plain DFT between two diagonal modulations, shared by the CPU
// backend (tables) and the CUDA backend (cuFFT load/store callbacks), so neither needs shift passes.
//
// Along one axis of length N with centre c = N/2 (integer division; the index of the k-space and
// image centre), fftshift . DFT . ifftshift is
//     y[k] = sum_m x[m] exp(s 2 pi i (k - c)(m - c) / N)          (s = -1 forward, +1 inverse)
// and (k - c)(m - c) = k m - c m - c (k - c) gives
//     y[k] = S[k] * sum_m exp(s 2 pi i k m / N) * (L[m] x[m]),
//     L[m] = exp(-s 2 pi i (c m mod N) / N),   S[k] = exp(-s 2 pi i (c (k - c) mod N) / N).
// For even N these are signs: L[m] = (-1)^m and S[k] = (-1)^(k + N/2), the chequerboard identity; for
// odd N they are N-th roots of unity (so odd sizes need no explicit shift either). The orthonormal
// scale 1/sqrt(N) goes into S. Over several axes all factors multiply.
#include <cmath>
#include <complex>
#include <cstdint>
#include <vector>

#include "core/backend.h"

namespace larmor::detail {

inline int fft_sign(FFTDirection dir) { return dir == FFTDirection::Forward ? -1 : +1; }

// c m mod N (load) and c (k - c) mod N (store), exact in integers.
inline uint64_t centring_load_residue(uint64_t n, uint64_t m) { return ((n / 2) * m) % n; }
inline uint64_t centring_store_residue(uint64_t n, uint64_t k) { return ((n / 2) * ((k + n - n / 2) % n)) % n; }

// exp(-s 2 pi i r / n), evaluated in double.
inline std::complex<double> centring_twiddle(uint64_t n, uint64_t r, FFTDirection dir) {
    const double pi = 3.14159265358979323846;
    const double phase = -fft_sign(dir) * 2.0 * pi * static_cast<double>(r) / static_cast<double>(n);
    return {std::cos(phase), std::sin(phase)};
}

// Per-axis modulation tables; `scale` multiplies the store table (1/sqrt(N) for orthonormality).
inline std::vector<std::complex<float>> centring_load_table(uint64_t n, FFTDirection dir) {
    std::vector<std::complex<float>> t(n);
    for (uint64_t m = 0; m < n; ++m) t[m] = std::complex<float>(centring_twiddle(n, centring_load_residue(n, m), dir));
    return t;
}
inline std::vector<std::complex<float>> centring_store_table(uint64_t n, FFTDirection dir) {
    std::vector<std::complex<float>> t(n);
    const double scale = 1.0 / std::sqrt(static_cast<double>(n));
    for (uint64_t k = 0; k < n; ++k)
        t[k] = std::complex<float>(scale * centring_twiddle(n, centring_store_residue(n, k), dir));
    return t;
}

}  // namespace larmor::detail
