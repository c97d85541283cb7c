// Small, portable random numbers for the phantom (internal).
//
// std::normal_distribution's algorithm is implementation-defined, so the same seed would give different
// data under libstdc++ and libc++. Datasets must be reproducible from (spec, seed) alone, so we use
// xoshiro256** (Blackman & Vigna 2018) seeded through splitmix64, and Box-Muller for Gaussians.
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>

namespace larmor::phantom::detail {

inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Combines a seed with stream coordinates into one well-mixed 64-bit stream id.
inline std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t s = a ^ (b + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2));
  return splitmix64(s);
}

class Rng {
 public:
  explicit Rng(std::uint64_t seed) {
    for (auto& w : s_) w = splitmix64(seed);
  }
  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in (0, 1): 53 random bits, offset by half an ulp so log() never sees 0.
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
  // Circular complex Gaussian with E|w|^2 = 1 (real and imaginary parts each of variance 1/2).
  std::complex<double> cgauss() {
    const double r = std::sqrt(-std::log(uniform()));
    const double t = 6.283185307179586476925 * uniform();
    return {r * std::cos(t), r * std::sin(t)};
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

}  // namespace larmor::phantom::detail
