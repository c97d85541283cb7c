// Radial filtered backprojection (core/recon/radial_fbp.h): trajectory checks and each spoke's fit
// (spacing, angle, where k = 0 lies), the filter (ramp at each sample's true |k|, window, angular
// weights and every constant in one real array) and each spoke's shift phase, then per call one pointwise multiply,
// one batched 1D centred inverse FFT and the backprojection kernel of the backend's device.
#include "core/recon/radial_fbp.h"
#include "core/constants.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/recon/radial_fbp_kernels.h"

namespace larmor {

const char* to_string(RampWindow w) {
    switch (w) {
        case RampWindow::RamLak: return "ram-lak";
        case RampWindow::SheppLogan: return "shepp-logan";
        case RampWindow::Hann: return "hann";
    }
    return "unknown";
}

struct RadialFbp::State {
    std::shared_ptr<Backend> be;
    Shape image;
    FbpGeometry g;
    float dk = 0.f;
    double max_shift = 0.0;  // samples
    size_t samples = 0;      // per spoke in the data; g.samples is the FFT length, longer if padded
    RArray filter;  // [g.samples, spokes]: ramp x window x angular weight x constant, 0 in the padding
    RArray steps;   // [4, spokes]: (a_j, b_j, c_j, d_j) of radial_fbp_kernels.h
    CArray work;    // [g.samples, spokes, coils]: filtered (padded) k-space
    CArray proj;    // [g.samples, spokes, coils]: filtered projections
    CArray roll;    // [g.samples, spokes]: each projection's integer recentring phase; empty if none
};

namespace {

std::string fmt(double v) {
    std::ostringstream s;
    s.precision(6);
    s << v;
    return s.str();
}

std::string point(double k0, double k1) { return "(" + fmt(k0) + ", " + fmt(k1) + ")"; }

struct Spoke {
    double dk = 0.0;      // sample spacing (cycles/FOV)
    double theta = 0.0;   // direction u from sample 0 to the last one
    double centre = 0.0;  // fractional sample index of the point of the line nearest k = 0
    double across = 0.0;  // signed distance of the line from k = 0 along n = (-u1, u0), cycles/FOV
};

// Fits spoke j with a straight line of uniformly spaced samples, k_m = (m - centre) dk u + across n,
// and checks that it is one and that FBP can use it: k = 0 within the samples' span along the line
// (else it does not reach the centre), the line within dk/2 of k = 0 (else the centre's neighbourhood
// is not sampled by any of the spoke's samples, and the ramp's central-cell weight below is no longer
// the area it stands for). The line is the one through the end samples, so a bad sample in between is
// the one named. Offsets below `snap` (the coordinates' own float rounding) are treated as 0, so
// centred spokes are exactly the centred case.
Spoke check_spoke(const float* k, size_t samples, size_t j) {
    const std::string name = "RadialFbp: spoke " + std::to_string(j);
    const auto k0 = [&](size_t m) { return double(k[2 * m]); };
    const auto k1 = [&](size_t m) { return double(k[2 * m + 1]); };
    double kmax = 0.0;
    for (size_t m = 0; m < samples; ++m) {
        if (!std::isfinite(k0(m)) || !std::isfinite(k1(m)))
            throw std::invalid_argument(name + ": sample " + std::to_string(m) + " has a non-finite coordinate " +
                                        point(k0(m), k1(m)));
        kmax = std::max(kmax, std::hypot(k0(m), k1(m)));
    }
    const size_t last = samples - 1;
    const double d0 = (k0(last) - k0(0)) / double(last), d1 = (k1(last) - k1(0)) / double(last);
    const double dk = std::hypot(d0, d1);
    if (!(dk > 0.0)) throw std::invalid_argument(name + ": all samples at one point, " + point(k0(0), k1(0)) + " (spacing 0)");
    // Coordinates are floats: allow their rounding (a few ulps of the largest |k|) and 0.1 % of dk.
    const double snap = 8.0 * std::numeric_limits<float>::epsilon() * std::max(kmax, dk);
    const double tol = std::max(1e-3 * dk, snap);
    const double u0 = d0 / dk, u1 = d1 / dk;
    const auto along = [&](size_t m) { return k0(m) * u0 + k1(m) * u1; };
    const auto across = [&](size_t m) { return k1(m) * u0 - k0(m) * u1; };
    const double e = 0.5 * (across(0) + across(last));
    const double a0 = 0.5 * (along(0) + along(last) - double(last) * dk);  // along(m) = a0 + m dk
    size_t worst_across = 0, worst_along = 0;
    double dev_across = 0.0, dev_along = 0.0;
    for (size_t m = 0; m < samples; ++m) {
        const double da = std::abs(across(m) - e), dl = std::abs(along(m) - (a0 + double(m) * dk));
        if (da > dev_across) dev_across = da, worst_across = m;
        if (dl > dev_along) dev_along = dl, worst_along = m;
    }
    if (dev_across > tol) {
        const size_t m = worst_across;
        throw std::invalid_argument(name + " is not a straight line: sample " + std::to_string(m) + " at " +
                                    point(k0(m), k1(m)) + " is " + fmt(across(m) - e) +
                                    " cycles/FOV off the line through samples 0 and " + std::to_string(last));
    }
    if (dev_along > tol) {
        const size_t m = worst_along;
        throw std::invalid_argument(name + " has non-uniform spacing: sample " + std::to_string(m) + " at " +
                                    point(k0(m), k1(m)) + " lies " + fmt(along(m)) + " cycles/FOV along the spoke, not " +
                                    fmt(a0 + double(m) * dk) + " (spacing " + fmt(dk) + ")");
    }
    Spoke sp{dk, std::atan2(u1, u0), -a0 / dk, e};
    if (sp.centre < -0.5 || sp.centre > double(last) + 0.5)
        throw std::invalid_argument(name + " does not reach the k-space centre: along its line its samples run from " +
                                    fmt(along(0)) + " (sample 0 at " + point(k0(0), k1(0)) + ") to " + fmt(along(last)) +
                                    " cycles/FOV (sample " + std::to_string(last) + " at " + point(k0(last), k1(last)) +
                                    "); k = 0 would be at sample " + fmt(sp.centre));
    if (std::abs(e) > 0.5 * dk + tol) {
        const size_t m = static_cast<size_t>(std::lround(std::clamp(sp.centre, 0.0, double(last))));
        throw std::invalid_argument(name + " misses the k-space centre: its line passes " + fmt(std::abs(e)) +
                                    " cycles/FOV from (0, 0), more than half its sample spacing " + fmt(dk) +
                                    " (sample " + std::to_string(m) + ", the nearest, is at " + point(k0(m), k1(m)) +
                                    " cycles/FOV), so no sample covers the centre of k-space");
    }
    const double h = double(samples / 2);
    if (std::abs((sp.centre - h) * dk) <= snap) sp.centre = h;
    if (std::abs(e) <= snap) sp.across = 0.0;
    return sp;
}

// Angular weight of each spoke: half the gap to its neighbours, angles taken modulo pi (a spoke is a
// whole line, so theta and theta + pi are the same line). Uniform spokes over pi get pi / spokes; a
// golden-angle or doubled set gets the wedge each line actually covers (a midpoint rule in theta).
std::vector<double> angular_weights(const std::vector<Spoke>& spokes) {
    const size_t n = spokes.size();
    std::vector<double> phi(n), w(n);
    for (size_t j = 0; j < n; ++j) {
        phi[j] = std::fmod(spokes[j].theta, kPi);
        if (phi[j] < 0) phi[j] += kPi;
    }
    if (n == 1) return {kPi};
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return phi[a] < phi[b]; });
    for (size_t i = 0; i < n; ++i) {
        const double prev = i == 0 ? phi[order[n - 1]] - kPi : phi[order[i - 1]];
        const double next = i + 1 == n ? phi[order[0]] + kPi : phi[order[i + 1]];
        w[order[i]] = 0.5 * (next - prev);
    }
    return w;
}

// Angular weights of the samples beyond the radius every half-spoke reaches. The line weights above
// hold where both halves of every spoke are sampled; with asymmetric echoes (k = 0 away from
// samples/2) the short halves stop early, and beyond that radius a long half covers the directions of
// its missing neighbours too: over 2 pi, the long halves alone tile the circle, each with twice its
// line's wedge. So a sample there gets half the gap (angles modulo 2 pi) to the nearest half-spokes
// that still reach its radius (their last sample's cell, dk/2 wide, covers it), the midpoint rule of
// the line weights applied to the half-spokes present. Beside a hole in the coverage (asymmetric
// echoes over only pi leave a half plane of the outer k-space unsampled) the gap would paint the hole
// with its neighbours' data, so a weight is capped at twice the line's: the hole stays empty, the
// zero filling of a partial-Fourier reconstruction. weights[j * samples + m] is overwritten where
// it applies.
void partial_coverage_weights(const std::vector<Spoke>& sp, size_t samples, const std::vector<double>& line,
                              std::vector<double>& weights) {
    struct Half {
        double angle, reach;
    };
    const size_t n = sp.size(), last = samples - 1;
    const double dk = sp[0].dk;
    std::vector<Half> half(2 * n);  // 2 j: towards sample last (+u), 2 j + 1: towards sample 0 (-u)
    double all = std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < n; ++j) {
        double a = std::fmod(sp[j].theta, 2.0 * kPi);
        if (a < 0) a += 2.0 * kPi;
        half[2 * j] = {a, (double(last) - sp[j].centre) * dk};
        half[2 * j + 1] = {a < kPi ? a + kPi : a - kPi, sp[j].centre * dk};
        all = std::min({all, half[2 * j].reach, half[2 * j + 1].reach});
    }
    all += 0.5 * dk;
    struct Sample {
        double r;
        size_t j, m, h;
    };
    std::vector<Sample> out;
    for (size_t j = 0; j < n; ++j)
        for (size_t m = 0; m < samples; ++m) {
            const double rho = (double(m) - sp[j].centre) * dk;
            if (std::abs(rho) > all) out.push_back({std::abs(rho), j, m, 2 * j + (rho < 0 ? 1 : 0)});
        }
    if (out.empty()) return;
    std::sort(out.begin(), out.end(), [](const Sample& a, const Sample& b) { return a.r > b.r; });
    std::vector<size_t> by_reach(2 * n);
    std::iota(by_reach.begin(), by_reach.end(), size_t(0));
    std::sort(by_reach.begin(), by_reach.end(), [&](size_t a, size_t b) { return half[a].reach > half[b].reach; });
    std::set<std::pair<double, size_t>> present;
    size_t next = 0;
    for (const Sample& s : out) {
        while (next < by_reach.size() && half[by_reach[next]].reach + 0.5 * dk >= s.r) {
            present.insert({half[by_reach[next]].angle, by_reach[next]});
            ++next;
        }
        const auto self = present.find({half[s.h].angle, s.h});
        double gap = 4.0 * kPi;  // alone at this radius: the cap applies
        if (self != present.end() && present.size() > 1) {
            const auto prev = self == present.begin() ? std::prev(present.end()) : std::prev(self);
            const auto succ = std::next(self) == present.end() ? present.begin() : std::next(self);
            double left = self->first - prev->first, right = succ->first - self->first;
            if (left < 0 || (left == 0 && prev->second > self->second)) left += 2.0 * kPi;
            if (right < 0 || (right == 0 && succ->second < self->second)) right += 2.0 * kPi;
            gap = left + right;
        }
        weights[s.j * samples + s.m] = std::min(0.5 * gap, 2.0 * line[s.j]);
    }
}

// d(across)/d(theta) of each spoke. Where the lines do not pass through k = 0 the polar area element
// is not |rho| d rho d theta: for k(rho, theta) = rho u + e(theta) n (u' = n, n' = -u) the Jacobian is
// |rho + e'(theta)|, so an across offset that varies with the angle moves the ramp's zero by e' (a
// fraction of a sample; at the lowest frequencies, which carry most of the image, that is not small).
// e' of scattered spokes by finite differences would differentiate float rounding and, in sets with
// both theta and theta + pi, jump between the two families of lines (a delay shifts opposite spokes
// to opposite sides). Instead e(theta) is fitted with the model of linear gradient delays (any 2x2
// delay matrix D, shift D u: across = n . D u = C + A sin 2 theta + B cos 2 theta; Peters et al. 2003,
// RING) and differentiated. Offsets off that model keep the fit's e'; their remainder is ramp error of
// the order of the remainder. Fewer than 3 distinct angles, or no across offsets: e' = 0.
std::vector<double> across_slopes(const std::vector<Spoke>& sp) {
    const size_t n = sp.size();
    std::vector<double> out(n, 0.0);
    double ata[3][3] = {}, atb[3] = {};
    bool any = false;
    for (const Spoke& s : sp) {
        const double f[3] = {1.0, std::sin(2.0 * s.theta), std::cos(2.0 * s.theta)};
        for (int r = 0; r < 3; ++r) {
            for (int c = 0; c < 3; ++c) ata[r][c] += f[r] * f[c];
            atb[r] += f[r] * s.across;
        }
        any = any || s.across != 0.0;
    }
    if (!any) return out;
    // Gaussian elimination with partial pivoting; a pivot below 1e-9 n means the angles do not
    // determine the model (e.g. all spokes on one line), and e' stays 0.
    double m[3][4];
    for (int r = 0; r < 3; ++r) {
        for (int c = 0; c < 3; ++c) m[r][c] = ata[r][c];
        m[r][3] = atb[r];
    }
    for (int c = 0; c < 3; ++c) {
        int best = c;
        for (int r = c + 1; r < 3; ++r)
            if (std::abs(m[r][c]) > std::abs(m[best][c])) best = r;
        if (std::abs(m[best][c]) < 1e-9 * double(n)) return out;
        std::swap(m[c], m[best]);
        for (int r = c + 1; r < 3; ++r) {
            const double q = m[r][c] / m[c][c];
            for (int k = c; k < 4; ++k) m[r][k] -= q * m[c][k];
        }
    }
    double x[3];
    for (int r = 2; r >= 0; --r) {
        double v = m[r][3];
        for (int k = r + 1; k < 3; ++k) v -= m[r][k] * x[k];
        x[r] = v / m[r][r];
    }
    for (size_t j = 0; j < n; ++j)
        out[j] = 2.0 * x[1] * std::cos(2.0 * sp[j].theta) - 2.0 * x[2] * std::sin(2.0 * sp[j].theta);
    return out;
}

// Window of Kak & Slaney ch. 3.3 at x = rho / rho_max in [-1, 1].
double window(RampWindow w, double x) {
    switch (w) {
        case RampWindow::RamLak: return 1.0;
        case RampWindow::SheppLogan: {
            const double a = 0.5 * kPi * x;
            return a == 0.0 ? 1.0 : std::sin(a) / a;
        }
        case RampWindow::Hann: return 0.5 * (1.0 + std::cos(kPi * x));
    }
    return 1.0;
}

void check_array(const char* what, const CArray& a, size_t size, const Shape& expect, Device dev) {
    if (a.size() != size)
        throw std::invalid_argument(std::string("RadialFbp: ") + what + " has shape " + a.shape().str() + ", expected " +
                                    expect.str());
    if (a.device() != dev)
        throw std::invalid_argument(std::string("RadialFbp: ") + what + " is on the " + device_name(a.device()) +
                                    ", the backend on the " + device_name(dev));
}

}  // namespace

std::unique_ptr<RadialFbp> RadialFbp::create(std::shared_ptr<Backend> be, const Shape& image, size_t samples,
                                             size_t spokes, size_t coils, const RArray& coords, RadialFbpOptions opts) {
    if (!be) throw std::invalid_argument("RadialFbp: null backend");
    if (image.rank() != 2 || image[0] == 0 || image[1] == 0)
        throw std::invalid_argument("RadialFbp: image shape " + image.str() + " is not a non-empty 2D [N0, N1]");
    if (samples < 2 || spokes == 0 || coils == 0)
        throw std::invalid_argument("RadialFbp: " + std::to_string(samples) + " samples, " + std::to_string(spokes) +
                                    " spokes, " + std::to_string(coils) + " coils (need >= 2, >= 1, >= 1)");
    const Shape cshape{2, samples, spokes};
    if (coords.shape() != cshape)
        throw std::invalid_argument("RadialFbp: coords have shape " + coords.shape().str() + ", expected " + cshape.str());

    const RArray k = be->to_host(coords);
    std::vector<Spoke> sp(spokes);
    for (size_t j = 0; j < spokes; ++j) {
        sp[j] = check_spoke(k.data() + 2 * samples * j, samples, j);
        if (std::abs(sp[j].dk - sp[0].dk) > 1e-3 * sp[0].dk)
            throw std::invalid_argument("RadialFbp: spoke " + std::to_string(j) + " has spacing " + fmt(sp[j].dk) +
                                        " cycles/FOV, spoke 0 has " + fmt(sp[0].dk) + ": all spokes must share one");
    }
    const double dk = sp[0].dk;
    if (dk > 1.0 + 1e-3)
        throw std::invalid_argument("RadialFbp: readout spacing " + fmt(dk) +
                                    " cycles/FOV exceeds 1: the projections would be shorter than the FOV");

    // Whole samples between each spoke's k = 0 and the FFT's origin M/2. They are taken out before
    // the interpolation (below) by rolling the spoke to put k = 0 at the origin; samples rolled past
    // an end wrap to the other, which at the projection's samples is exact (k and k - L dk agree
    // there) but between them aliases. So the data are zero-padded about M/2 to
    // L = 2 max_j max(round(centre_j), M - round(centre_j)), where the rolled spokes fit; that also
    // keeps the projection's sampling 1 / (L dk) fine enough for an asymmetric echo's long half (M =
    // 104 samples with k = 0 at 40 reach 63 dk, beyond the M/2 = 52 dk an unpadded FFT resolves).
    // Not padded (L = M): centred spokes, and k = 0 one sample before M/2 with M even (BART's half
    // sample plus a delay), whose roll wraps only the last sample onto index 0, the Nyquist sample,
    // where a centred spoke of even length has its own unpaired sample.
    const size_t h = samples / 2;
    std::vector<long long> rolls(spokes, 0);
    long long reach = 0;
    bool fits = true;
    for (size_t j = 0; j < spokes; ++j) {
        const long long whole = std::llround(sp[j].centre);
        rolls[j] = static_cast<long long>(h) - whole;
        reach = std::max({reach, whole, static_cast<long long>(samples) - whole});
        fits = fits && (rolls[j] == 0 || (rolls[j] == 1 && samples % 2 == 0));
    }
    const bool rolled = std::any_of(rolls.begin(), rolls.end(), [](long long r) { return r != 0; });
    const size_t len = fits ? samples : static_cast<size_t>(2 * reach), lh = len / 2;
    const size_t pad = lh - h;  // data sample m is FFT sample m + pad

    auto s = std::make_unique<State>();
    s->be = be;
    s->image = image;
    s->samples = samples;
    s->g = {static_cast<long long>(image[0]), static_cast<long long>(image[1]), static_cast<long long>(len),
            static_cast<long long>(spokes), static_cast<long long>(coils)};
    s->dk = static_cast<float>(dk);

    // The polar inverse transform, discretised (radial_fbp.h's header): x = sum_j dtheta_j sum_m dk w(rho_m)
    // X(rho_m, theta_j) exp(2 pi i k_m . r). With X = s / sqrt(N0 N1) (the forward model) and the
    // orthonormal centred inverse FFT of L samples (a factor 1/sqrt(L)), projection sample p is at
    // t = (p - L/2) / (L dk) FOV and the constant is dk sqrt(L) / sqrt(N0 N1). The FFT takes data sample
    // m to be at (m - M/2) dk u; it is at that plus the spoke's shift s_j = (M/2 - centre) dk u + across n,
    // so by the shift theorem the exact sum is the FFT's projection times exp(2 pi i s_j . r).
    // The ramp is the area element at each sample's true position: for k(rho, theta) = rho u + e n
    // with e(theta) the across offset, |rho + e'(theta)| (across_slopes), |rho| for lines through
    // k = 0. Where rho + e' changes sign the map (rho, theta) -> k folds over and |J| would count
    // the fold twice (a 3 % excess of the image's mean at e = 0.1 sin 2 theta cycles/FOV); the
    // signed element sign(rho) (rho + e') counts every point once, and equals |rho + e'| beyond the
    // central cell. Integrated over the sample's cell, dk long along the line, a cell
    // [rho - dk/2, rho + dk/2] that straddles k = 0 has (rho^2 + 2 e' rho + dk^2 / 4) dtheta =
    // w dk dtheta. With e' = 0 that is dk/4 for a sample at k = 0 (the central disk of radius dk/2,
    // shared by the spokes by their wedges; the DC deficit of the sampled ramp that Kak & Slaney
    // ch. 3.3 discuss) and |rho| at |rho| = dk/2 (BART's half-sample offset: two samples straddle
    // the centre and the plain ramp is exact); continuous at the cell's ends.
    double kmax = 0.0;
    const auto radius = [&](size_t j, size_t m) { return std::hypot((double(m) - sp[j].centre) * dk, sp[j].across); };
    for (size_t j = 0; j < spokes; ++j) kmax = std::max({kmax, radius(j, 0), radius(j, samples - 1)});
    const double c = dk * std::sqrt(double(len)) / std::sqrt(double(image.size()));
    const std::vector<double> dtheta = angular_weights(sp);
    const std::vector<double> slope = across_slopes(sp);
    std::vector<double> weight(samples * spokes);
    for (size_t j = 0; j < spokes; ++j) std::fill_n(weight.begin() + std::ptrdiff_t(j * samples), samples, dtheta[j]);
    partial_coverage_weights(sp, samples, dtheta, weight);
    RArray filter = be->host_real({len, spokes});  // zero-filled: the padding stays 0
    RArray steps = be->host_real({4, spokes});
    double max_shift = 0.0;
    for (size_t j = 0; j < spokes; ++j) {
        for (size_t m = 0; m < samples; ++m) {
            const double r = radius(j, m), rho = (double(m) - sp[j].centre) * dk, e1 = slope[j];
            const double cell = std::abs(rho) < 0.5 * dk ? (rho * rho + 2.0 * e1 * rho + 0.25 * dk * dk) / dk
                                                         : std::abs(rho) + (rho < 0 ? -e1 : e1);
            const double ramp = cell * window(opts.window, kmax > 0.0 ? r / kmax : 0.0);
            filter.data()[j * len + m + pad] = static_cast<float>(c * weight[j * samples + m] * ramp);
        }
        const double u0 = std::cos(sp[j].theta), u1 = std::sin(sp[j].theta);
        // p = L/2 + t L dk with t = (n0 - N0/2)/N0 cos(theta) + (n1 - N1/2)/N1 sin(theta).
        steps.data()[4 * j] = static_cast<float>(double(len) * dk * u0 / double(image[0]));
        steps.data()[4 * j + 1] = static_cast<float>(double(len) * dk * u1 / double(image[1]));
        // The shift splits in two. The whole samples r_j = M/2 - round(centre) would leave the FFT's
        // projection modulated by r_j / L cycles per sample, which the linear interpolation
        // attenuates (by 4 % at r_j / L = 0.115, as the sinc^2 of its transfer function); multiplied
        // by exp(2 pi i r_j (p - L/2) / L) it is the projection of the spoke rolled to put k = 0 at
        // L/2, which is smooth. The remaining fraction of a sample along, and the offset across, are
        // the kernel's phase, s_j . r in cycles, r = ((n0 - N0/2)/N0, (n1 - N1/2)/N1) FOV, applied
        // after the interpolation.
        const double along = (double(std::llround(sp[j].centre)) - sp[j].centre) * dk, across = sp[j].across;
        const double s0 = along * u0 - across * u1, s1 = along * u1 + across * u0;
        steps.data()[4 * j + 2] = static_cast<float>(s0 / double(image[0]));
        steps.data()[4 * j + 3] = static_cast<float>(s1 / double(image[1]));
        max_shift = std::max(max_shift, std::hypot((double(h) - sp[j].centre) * dk, across) / dk);
    }
    if (rolled) {
        CArray roll = be->host_complex({len, spokes});
        for (size_t j = 0; j < spokes; ++j)
            for (size_t p = 0; p < len; ++p) {
                // Whole cycles out first: the argument stays below 2 pi, exact in double.
                const long long q = (rolls[j] * (static_cast<long long>(p) - static_cast<long long>(lh))) %
                                    static_cast<long long>(len);
                const double a = 2.0 * kPi * double(q) / double(len);
                roll.data()[j * len + p] = cfloat(static_cast<float>(std::cos(a)), static_cast<float>(std::sin(a)));
            }
        s->roll = be->to_device(roll);
    }
    s->max_shift = max_shift;
    for (size_t j = 0; j < spokes; ++j)
        s->g.phased = s->g.phased || steps.data()[4 * j + 2] != 0.f || steps.data()[4 * j + 3] != 0.f;
    s->filter = be->to_device(filter);
    s->steps = be->to_device(steps);
    s->work = be->empty({len, spokes, coils});
    s->proj = be->empty({len, spokes, coils});
    return std::unique_ptr<RadialFbp>(new RadialFbp(std::move(s)));
}

RadialFbp::RadialFbp(std::unique_ptr<State> s) : s_(std::move(s)) {}
RadialFbp::~RadialFbp() = default;

const Shape& RadialFbp::image_shape() const { return s_->image; }
float RadialFbp::spacing() const { return s_->dk; }
double RadialFbp::max_spoke_shift() const { return s_->max_shift; }

namespace {

void run(RadialFbp::State& s, const CArray& data, CArray& out, FbpOutput mode) {
    const FbpGeometry& g = s.g;
    const Shape dshape{s.samples, size_t(g.spokes), size_t(g.coils)};
    const Shape oshape = mode == FbpOutput::Coils ? Shape{size_t(g.n0), size_t(g.n1), size_t(g.coils)}
                                                  : Shape{size_t(g.n0), size_t(g.n1)};
    Backend& be = *s.be;
    check_array("data", data, dshape.size(), dshape, be.device());
    check_array(mode == FbpOutput::Coils ? "coil_images" : "image", out, oshape.size(), oshape, be.device());
    if (overlaps(data, out)) throw std::invalid_argument("RadialFbp: the output overlaps the data");
    if (size_t(g.samples) == s.samples) {
        be.mul(data.reshaped(dshape), s.filter, s.work);
    } else {  // asymmetric echoes: zero-padded about M/2 to the FFT length
        be.crop_pad_centred(data.reshaped(dshape), s.work);
        be.mul(s.work, s.filter, s.work);
    }
    be.fft(s.work, s.proj, 1u, FFTDirection::Inverse);
    if (!s.roll.empty()) be.mul(s.proj, s.roll, s.proj);  // k = 0 of every spoke to the FFT's origin
    if (be.device() == Device::Cpu)
        cpu::radial_backproject(s.proj, s.steps, g, mode, out);
    else
        cuda::radial_backproject(be, s.proj, s.steps, g, mode, out);
}

}  // namespace

void RadialFbp::reconstruct(const CArray& data, CArray& coil_images) { run(*s_, data, coil_images, FbpOutput::Coils); }

void RadialFbp::reconstruct_rss(const CArray& data, CArray& image) { run(*s_, data, image, FbpOutput::Rss); }

}  // namespace larmor
