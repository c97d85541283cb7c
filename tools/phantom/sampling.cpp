// Cartesian sampling patterns over the phase-encoding plane (e1, e2).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "tools/phantom/phantom.h"
#include "tools/phantom/random.h"

namespace larmor::phantom {
namespace {

struct Grid {
  int ny = 1, nz = 1, cy = 0, cz = 0;
  int acs_y0 = 0, acs_ny = 0, acs_z0 = 0, acs_nz = 0;
  bool in_acs(int e1, int e2) const {
    return acs_ny > 0 && e1 >= acs_y0 && e1 < acs_y0 + acs_ny && e2 >= acs_z0 && e2 < acs_z0 + acs_nz;
  }
};

int pmod(int a, int m) { return ((a % m) + m) % m; }

// Variable-density Poisson-disc sampling by dart throwing (Cook 1986; as used for compressed sensing by
// Lustig et al. 2007 and BART's `poisson`): candidates in random order are accepted when no accepted
// point lies within r(p) = r0 (1 + |k|/k_max), distances measured in units of (accel_y, accel_z) cells so
// the pattern keeps the requested anisotropy. r0 is found by bisection so the total count (ACS block
// included) is as close as possible to ny*nz/(accel_y*accel_z).
std::vector<char> poisson_mask(const Grid& g, int ay, int az, std::uint64_t seed) {
  const int total = g.ny * g.nz;
  std::vector<char> acs(total, 0);
  int acs_count = 0;
  std::vector<int> order;
  order.reserve(total);
  for (int e2 = 0; e2 < g.nz; ++e2)
    for (int e1 = 0; e1 < g.ny; ++e1) {
      if (g.in_acs(e1, e2)) {
        acs[e2 * g.ny + e1] = 1;
        ++acs_count;
      } else {
        order.push_back(e2 * g.ny + e1);
      }
    }
  detail::Rng rng(detail::mix(seed, 0x706f6973736f6eULL));  // "poisson"
  for (std::size_t i = order.size(); i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(rng.next() % i);
    std::swap(order[i - 1], order[j]);
  }
  std::vector<double> weight(total);
  const double hy = std::max(1.0, g.ny / 2.0), hz = std::max(1.0, g.nz / 2.0);
  for (int e2 = 0; e2 < g.nz; ++e2)
    for (int e1 = 0; e1 < g.ny; ++e1) {
      const double u = (e1 - g.cy) / hy, v = g.nz > 1 ? (e2 - g.cz) / hz : 0.0;
      weight[e2 * g.ny + e1] = 1.0 + std::sqrt(u * u + v * v);
    }

  const long target = std::max<long>(acs_count, std::lround(double(total) / (double(ay) * az)));
  if (target >= total) return std::vector<char>(total, 1);

  auto throw_darts = [&](double r0, std::vector<char>& mask) {
    mask = acs;
    long count = acs_count;
    for (int p : order) {
      const int py = p % g.ny, pz = p / g.ny;
      const double r = r0 * weight[p], r2 = r * r;
      const int wy = static_cast<int>(std::ceil(r * ay)), wz = g.nz > 1 ? static_cast<int>(std::ceil(r * az)) : 0;
      bool ok = true;
      for (int z = std::max(0, pz - wz); ok && z <= std::min(g.nz - 1, pz + wz); ++z) {
        const double dz = double(z - pz) / az;
        for (int y = std::max(0, py - wy); y <= std::min(g.ny - 1, py + wy); ++y) {
          if (!mask[z * g.ny + y]) continue;
          const double dy = double(y - py) / ay;
          if (dy * dy + dz * dz < r2) {
            ok = false;
            break;
          }
        }
      }
      if (ok) {
        mask[p] = 1;
        ++count;
      }
    }
    return count;
  };

  // Count falls (almost monotonically) with r0; bisect in log(r0). Radii beyond ~3 cells sample less than
  // any useful acceleration, and small radii accept every candidate.
  double lo = std::log(0.02), hi = std::log(4.0);
  std::vector<char> mask, best;
  long best_err = -1;
  for (int it = 0; it < 40; ++it) {
    const double mid = 0.5 * (lo + hi);
    const long count = throw_darts(std::exp(mid), mask);
    const long err = std::labs(count - target);
    if (best_err < 0 || err < best_err) {
      best_err = err;
      best = mask;
    }
    if (err == 0) break;
    if (count > target)
      lo = mid;
    else
      hi = mid;
  }
  return best;
}

}  // namespace

std::vector<PhaseEncode> sampling_pattern(const PhantomSpec& s) {
  validate(s);
  Grid g;
  g.ny = s.ny;
  g.nz = s.dims == 3 ? s.nz : 1;
  g.cy = g.ny / 2;
  g.cz = g.nz / 2;
  if (s.sampling != Sampling::full && s.acs_lines > 0) {
    // Centred like a scanner's embedded reference lines: [c - n/2, c - n/2 + n) (the GRAPPA R=3 scan in
    // shared/data has 48 lines 30..77 around centre 54).
    g.acs_ny = s.acs_lines;
    g.acs_nz = s.dims == 3 ? std::min(s.acs_lines, g.nz) : 1;
    g.acs_y0 = g.cy - g.acs_ny / 2;
    g.acs_z0 = g.cz - g.acs_nz / 2;
  }

  std::vector<PhaseEncode> out;
  auto push = [&out](int e1, int e2, bool imaging, bool calibration) {
    PhaseEncode p;
    p.e1 = e1;
    p.e2 = e2;
    p.imaging = imaging;
    p.calibration = calibration;
    out.push_back(p);
  };
  switch (s.sampling) {
    case Sampling::full:
      for (int e2 = 0; e2 < g.nz; ++e2)
        for (int e1 = 0; e1 < g.ny; ++e1) push(e1, e2, true, false);
      break;
    case Sampling::uniform:
      // The lattice passes through the k-space centre, so the centre line is always an imaging line.
      for (int e2 = 0; e2 < g.nz; ++e2)
        for (int e1 = 0; e1 < g.ny; ++e1) {
          const bool imaging = pmod(e1 - g.cy, s.accel_y) == 0 && pmod(e2 - g.cz, s.accel_z) == 0;
          const bool acs = g.in_acs(e1, e2);
          if (imaging || acs) push(e1, e2, imaging, acs);
        }
      break;
    case Sampling::poisson: {
      // The fully sampled ACS block belongs to the variable-density pattern: every line is imaging data.
      const auto mask = poisson_mask(g, s.accel_y, s.dims == 3 ? s.accel_z : 1, s.seed);
      for (int e2 = 0; e2 < g.nz; ++e2)
        for (int e1 = 0; e1 < g.ny; ++e1)
          if (mask[e2 * g.ny + e1]) push(e1, e2, true, g.in_acs(e1, e2));
      break;
    }
  }
  return out;
}

}  // namespace larmor::phantom
