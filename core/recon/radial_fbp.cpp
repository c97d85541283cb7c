// Radial filtered backprojection (core/recon/radial_fbp.h): trajectory checks, the filter (ramp,
// window, angular weights and every constant in one real array), then per call one pointwise multiply,
// one batched 1D centred inverse FFT and the backprojection kernel of the backend's device.
#include "core/recon/radial_fbp.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
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
    RArray filter;  // [samples, spokes]: ramp x window x angular weight x constant
    RArray steps;   // [2, spokes]: (a_j, b_j) of radial_fbp_kernels.h
    CArray work;    // [samples, spokes, coils]: filtered k-space
    CArray proj;    // [samples, spokes, coils]: filtered projections
};

namespace {

constexpr double kPi = 3.14159265358979323846;

std::string fmt(double v) {
    std::ostringstream s;
    s.precision(6);
    s << v;
    return s.str();
}

std::string point(double k0, double k1) { return "(" + fmt(k0) + ", " + fmt(k1) + ")"; }

struct Spoke {
    double dk = 0.0;     // sample spacing (cycles/FOV)
    double theta = 0.0;  // direction from sample 0 to the last one
};

// Checks that spoke j is a straight line through the centre, sample samples/2 at k = 0, with uniform
// spacing; returns its spacing and angle.
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
    const size_t h = samples / 2, last = samples - 1;
    const double d0 = (k0(last) - k0(0)) / double(last), d1 = (k1(last) - k1(0)) / double(last);
    const double dk = std::hypot(d0, d1);
    if (!(dk > 0.0)) throw std::invalid_argument(name + ": all samples at one point, " + point(k0(0), k1(0)) + " (spacing 0)");
    // Coordinates are floats: allow their rounding (a few ulps of the largest |k|) and 0.1 % of dk.
    const double tol = std::max(1e-3 * dk, 8.0 * std::numeric_limits<float>::epsilon() * kmax);
    if (std::hypot(k0(h), k1(h)) > tol)
        throw std::invalid_argument(name + " misses the k-space centre: sample " + std::to_string(h) + " (samples/2) is at " +
                                    point(k0(h), k1(h)) + " cycles/FOV, not at (0, 0)");
    const double u0 = d0 / dk, u1 = d1 / dk;
    for (size_t m = 0; m < samples; ++m) {
        const double along = k0(m) * u0 + k1(m) * u1, across = k1(m) * u0 - k0(m) * u1;
        if (std::abs(across) > tol)
            throw std::invalid_argument(name + " is not a straight line through the centre: sample " + std::to_string(m) +
                                        " at " + point(k0(m), k1(m)) + " is " + fmt(across) + " cycles/FOV off the line");
        const double expect = (double(m) - double(h)) * dk;
        if (std::abs(along - expect) > tol)
            throw std::invalid_argument(name + " has non-uniform spacing: sample " + std::to_string(m) + " at " +
                                        point(k0(m), k1(m)) + " lies " + fmt(along) + " cycles/FOV along the spoke, not " +
                                        fmt(expect) + " (spacing " + fmt(dk) + ")");
    }
    return {dk, std::atan2(u1, u0)};
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

    auto s = std::make_unique<State>();
    s->be = be;
    s->image = image;
    s->g = {static_cast<long long>(image[0]), static_cast<long long>(image[1]), static_cast<long long>(samples),
            static_cast<long long>(spokes), static_cast<long long>(coils)};
    s->dk = static_cast<float>(dk);

    // The polar inverse transform, discretised (radial_fbp.h's header): x = sum_j dtheta_j sum_m dk w(rho_m)
    // X(rho_m, theta_j) exp(2 pi i rho_m t). With X = s / sqrt(N0 N1) (the forward model) and the
    // orthonormal centred inverse FFT of M samples (a factor 1/sqrt(M)), projection sample p is at
    // t = (p - M/2) / (M dk) FOV and the constant is dk sqrt(M) / sqrt(N0 N1).
    // At rho = 0 the ramp would give the DC sample no weight, yet the central disk of radius dk/2
    // (area pi dk^2 / 4) is covered only by it; spoke j's share of that disk is the wedge
    // dtheta_j / pi, which equals w(0) dk dtheta_j for w(0) = dk / 4 (Kak & Slaney ch. 3.3 discuss the
    // same DC deficit of the sampled ramp).
    const size_t h = samples / 2;
    const double rho_max = double(std::max(h, samples - 1 - h)) * dk;
    const double c = dk * std::sqrt(double(samples)) / std::sqrt(double(image.size()));
    const std::vector<double> dtheta = angular_weights(sp);
    RArray filter = be->host_real({samples, spokes});
    RArray steps = be->host_real({2, spokes});
    for (size_t j = 0; j < spokes; ++j) {
        for (size_t m = 0; m < samples; ++m) {
            const double rho = (double(m) - double(h)) * dk;
            const double ramp = m == h ? 0.25 * dk : std::abs(rho) * window(opts.window, rho / rho_max);
            filter.data()[j * samples + m] = static_cast<float>(c * dtheta[j] * ramp);
        }
        // p = M/2 + t M dk with t = (n0 - N0/2)/N0 cos(theta) + (n1 - N1/2)/N1 sin(theta).
        steps.data()[2 * j] = static_cast<float>(double(samples) * dk * std::cos(sp[j].theta) / double(image[0]));
        steps.data()[2 * j + 1] = static_cast<float>(double(samples) * dk * std::sin(sp[j].theta) / double(image[1]));
    }
    s->filter = be->to_device(filter);
    s->steps = be->to_device(steps);
    s->work = be->empty({samples, spokes, coils});
    s->proj = be->empty({samples, spokes, coils});
    return std::unique_ptr<RadialFbp>(new RadialFbp(std::move(s)));
}

RadialFbp::RadialFbp(std::unique_ptr<State> s) : s_(std::move(s)) {}
RadialFbp::~RadialFbp() = default;

const Shape& RadialFbp::image_shape() const { return s_->image; }
float RadialFbp::spacing() const { return s_->dk; }

namespace {

void run(RadialFbp::State& s, const CArray& data, CArray& out, FbpOutput mode) {
    const FbpGeometry& g = s.g;
    const Shape dshape{size_t(g.samples), size_t(g.spokes), size_t(g.coils)};
    const Shape oshape = mode == FbpOutput::Coils ? Shape{size_t(g.n0), size_t(g.n1), size_t(g.coils)}
                                                  : Shape{size_t(g.n0), size_t(g.n1)};
    Backend& be = *s.be;
    check_array("data", data, dshape.size(), dshape, be.device());
    check_array(mode == FbpOutput::Coils ? "coil_images" : "image", out, oshape.size(), oshape, be.device());
    if (overlaps(data, out)) throw std::invalid_argument("RadialFbp: the output overlaps the data");
    be.mul(data.reshaped(dshape), s.filter, s.work);
    be.fft(s.work, s.proj, 1u, FFTDirection::Inverse);
    if (be.device() == Device::Cpu)
        cpu::radial_backproject(s.proj, s.steps, g, mode, out);
    else
        cuda::radial_backproject(be, s.proj, s.steps, g, mode, out);
}

}  // namespace

void RadialFbp::reconstruct(const CArray& data, CArray& coil_images) { run(*s_, data, coil_images, FbpOutput::Coils); }

void RadialFbp::reconstruct_rss(const CArray& data, CArray& image) { run(*s_, data, image, FbpOutput::Rss); }

}  // namespace larmor
