// Trajectory generators, hash and unit conversion (see trajectory.h for the conventions and citations).
#include "core/trajectory/trajectory.h"
#include "core/constants.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace larmor::trajectory {
namespace {

void require(bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("trajectory: " + what);
}

void check_radial(const RadialSpec& s) {
    require(s.spokes >= 1, "spokes must be >= 1, got " + std::to_string(s.spokes));
    require(s.samples >= 2, "samples per readout must be >= 2, got " + std::to_string(s.samples));
    require(s.oversampling >= 1, "oversampling must be >= 1, got " + std::to_string(s.oversampling));
    require(std::isfinite(s.kmax) && s.kmax > 0.0, "kmax must be positive, got " + std::to_string(s.kmax));
    require(s.interleaves >= 1 && s.spokes % s.interleaves == 0,
            "interleaves (" + std::to_string(s.interleaves) + ") must divide spokes (" + std::to_string(s.spokes) + ")");
    require(s.tiny_golden_n >= 1, "tiny golden angle index must be >= 1, got " + std::to_string(s.tiny_golden_n));
    require(s.first_readout >= 0, "first_readout must be >= 0, got " + std::to_string(s.first_readout));
}

// Position along a spoke of sample s out of n: centre at n/2, |k| <= kmax.
double spoke_k(int s, int n, double kmax) { return (s - n / 2) * kmax / (n / 2); }

// Positive remainder of x / m.
double wrap(double x, double m) {
    double r = std::fmod(x, m);
    return r < 0.0 ? r + m : r;
}

double frac(double x) { return x - std::floor(x); }

}  // namespace

double golden_ratio() { return (1.0 + std::sqrt(5.0)) / 2.0; }

double tiny_golden_angle(int n) {
    require(n >= 1, "tiny golden angle index must be >= 1, got " + std::to_string(n));
    return kPi / (golden_ratio() + n - 1);
}

double radial_angle(const RadialSpec& s, long readout) {
    const long r = s.first_readout + readout;
    const double span = s.full_circle ? 2.0 * kPi : kPi;
    switch (s.order) {
        case RadialOrder::uniform:
            return span * static_cast<double>(r % s.spokes) / s.spokes;
        case RadialOrder::interleaved: {
            const long per_group = s.spokes / s.interleaves, i = r % s.spokes;
            const long g = i / per_group, j = i % per_group;
            return span * static_cast<double>(j * s.interleaves + g) / s.spokes;
        }
        case RadialOrder::golden:
            // Multiplying first and reducing once keeps the angle exact to double rounding for long streams.
            return wrap(static_cast<double>(r) * tiny_golden_angle(1), span);
        case RadialOrder::tiny_golden:
            return wrap(static_cast<double>(r) * tiny_golden_angle(s.tiny_golden_n), span);
    }
    return 0.0;
}

namespace {

// n samples along the unit direction dir (dims 2 or 3 components), at spoke_k from the centre.
void write_spoke(int n, double kmax, const double* dir, int dims, float* p) {
    for (int s = 0; s < n; ++s, p += dims) {
        const double k = spoke_k(s, n, kmax);
        for (int a = 0; a < dims; ++a) p[a] = static_cast<float>(k * dir[a]);
    }
}

void check_spoke_index(long readout) {
    require(readout >= 0, "readout index must be >= 0, got " + std::to_string(readout));
}

void check_stack(int partitions, int partition) {
    require(partitions >= 1, "partitions must be >= 1, got " + std::to_string(partitions));
    require(partition >= 0 && partition < partitions,
            "partition " + std::to_string(partition) + " is outside 0.." + std::to_string(partitions - 1));
}

// The generators' single spokes without validation: the public entry points validate per call, the
// array generators once per array.
void fill_radial_spoke(const RadialSpec& spec, long readout, float* out) {
    const double th = radial_angle(spec, readout), dir[2] = {std::cos(th), std::sin(th)};
    write_spoke(spec.samples * spec.oversampling, spec.kmax, dir, 2, out);
}

void fill_kooshball_spoke(long index, int n, double kmax, float* out) {
    double d[3];
    kooshball_direction(index, d);
    write_spoke(n, kmax, d, 3, out);
}

// Spoke `r` of partition `part` of a stack of stars.
void fill_stack_spoke(const RadialSpec& spec, int partitions, bool rotate, int part, long r, float* p) {
    const int n = spec.samples * spec.oversampling;
    const double kz = part - partitions / 2;
    const double turn = rotate ? part * (kPi / spec.spokes) / partitions : 0.0;
    const double th = radial_angle(spec, r) + turn, c = std::cos(th), sn = std::sin(th);
    for (int s = 0; s < n; ++s, p += 3) {
        const double k = spoke_k(s, n, spec.kmax);
        p[0] = static_cast<float>(k * c);
        p[1] = static_cast<float>(k * sn);
        p[2] = static_cast<float>(kz);
    }
}

}  // namespace

void radial_spoke(const RadialSpec& spec, long readout, float* out) {
    check_radial(spec);
    check_spoke_index(readout);
    fill_radial_spoke(spec, readout, out);
}

RArray radial_2d(const RadialSpec& spec) {
    check_radial(spec);
    const int n = spec.samples * spec.oversampling;
    RArray out = RArray::host(Shape{2, static_cast<size_t>(n), static_cast<size_t>(spec.spokes)});
    for (int r = 0; r < spec.spokes; ++r) fill_radial_spoke(spec, r, out.data() + static_cast<size_t>(r) * n * 2);
    return out;
}

void kooshball_direction(long index, double dir[3]) {
    // Chan et al. 2009: the 2D golden means are the normalised eigenvector of [[0,1,0],[0,0,1],[1,0,1]].
    constexpr double kPhi1 = 0.465571231876768, kPhi2 = 0.682327803828019;
    const double z = frac(static_cast<double>(index) * kPhi1);
    const double az = 2.0 * kPi * frac(static_cast<double>(index) * kPhi2);
    const double rho = std::sqrt(std::max(0.0, 1.0 - z * z));
    dir[0] = rho * std::cos(az);
    dir[1] = rho * std::sin(az);
    dir[2] = z;
}

void kooshball_spoke(long index, int samples, int oversampling, double kmax, float* out) {
    RadialSpec check;
    check.samples = samples;
    check.oversampling = oversampling;
    check.kmax = kmax;
    check_radial(check);
    check_spoke_index(index);
    fill_kooshball_spoke(index, samples * oversampling, kmax, out);
}

RArray radial_3d(int spokes, int samples, int oversampling, double kmax, long first_readout) {
    RadialSpec check;
    check.spokes = spokes;
    check.samples = samples;
    check.oversampling = oversampling;
    check.kmax = kmax;
    check.first_readout = first_readout;
    check_radial(check);
    const size_t n = static_cast<size_t>(samples) * static_cast<size_t>(oversampling);
    RArray out = RArray::host(Shape{3, n, static_cast<size_t>(spokes)});
    for (int r = 0; r < spokes; ++r)
        fill_kooshball_spoke(first_readout + r, static_cast<int>(n), kmax, out.data() + static_cast<size_t>(r) * n * 3);
    return out;
}

void stack_of_stars_spoke(const RadialSpec& spec, int partitions, bool rotate, int partition, long spoke,
                          float* out) {
    check_radial(spec);
    check_stack(partitions, partition);
    check_spoke_index(spoke);
    fill_stack_spoke(spec, partitions, rotate, partition, spoke, out);
}

RArray stack_of_stars(const RadialSpec& spec, int partitions, bool rotate) {
    check_radial(spec);
    check_stack(partitions, 0);
    const size_t n = static_cast<size_t>(spec.samples) * static_cast<size_t>(spec.oversampling);
    RArray out = RArray::host(Shape{3, n, static_cast<size_t>(spec.spokes) * static_cast<size_t>(partitions)});
    float* p = out.data();
    for (int part = 0; part < partitions; ++part)
        for (int r = 0; r < spec.spokes; ++r, p += n * 3) fill_stack_spoke(spec, partitions, rotate, part, r, p);
    return out;
}

RArray spiral_2d(int interleaves, int samples, int oversampling, double kmax, double density) {
    require(interleaves >= 1, "interleaves must be >= 1, got " + std::to_string(interleaves));
    require(samples >= 2, "samples per readout must be >= 2, got " + std::to_string(samples));
    require(oversampling >= 1, "oversampling must be >= 1, got " + std::to_string(oversampling));
    require(std::isfinite(kmax) && kmax > 0.0, "kmax must be positive, got " + std::to_string(kmax));
    require(std::isfinite(density) && density >= 1.0, "spiral density factor must be >= 1, got " + std::to_string(density));
    const int n = samples * oversampling;
    // theta(r) = (2 pi / I) int_0^r F(u) du with F(u) = 1 + (D - 1)(1 - u/kmax)^2, in closed form.
    auto theta = [&](double r) {
        const double t = 1.0 - r / kmax;
        return 2.0 * kPi / interleaves * (r + (density - 1.0) * kmax / 3.0 * (1.0 - t * t * t));
    };
    // Arc length s(r) of the first arm on a fine grid of r (polyline; the step is far below the sample
    // spacing), then samples at equal arc length by inverting s(r) linearly.
    const int fine = std::max(20000, 16 * n);
    std::vector<double> arc(static_cast<size_t>(fine) + 1, 0.0);
    double px = 0.0, py = 0.0;
    for (int i = 1; i <= fine; ++i) {
        const double r = kmax * i / fine, th = theta(r);
        const double x = r * std::cos(th), y = r * std::sin(th);
        arc[static_cast<size_t>(i)] = arc[static_cast<size_t>(i) - 1] + std::hypot(x - px, y - py);
        px = x;
        py = y;
    }
    std::vector<double> radius(static_cast<size_t>(n));
    for (int j = 0; j < n; ++j) {
        const double target = arc.back() * j / (n - 1);
        const auto it = std::lower_bound(arc.begin(), arc.end(), target);
        const size_t hi = std::min(static_cast<size_t>(it - arc.begin()), arc.size() - 1), lo = hi ? hi - 1 : 0;
        const double span = arc[hi] - arc[lo];
        const double f = span > 0.0 ? (target - arc[lo]) / span : 0.0;
        radius[static_cast<size_t>(j)] = j + 1 == n ? kmax : kmax * (static_cast<double>(lo) + f) / fine;
    }
    RArray out = RArray::host(Shape{2, static_cast<size_t>(n), static_cast<size_t>(interleaves)});
    float* p = out.data();
    for (int a = 0; a < interleaves; ++a) {
        const double rot = 2.0 * kPi * a / interleaves;
        for (int j = 0; j < n; ++j, p += 2) {
            const double r = radius[static_cast<size_t>(j)], th = theta(r) + rot;
            p[0] = static_cast<float>(r * std::cos(th));
            p[1] = static_cast<float>(r * std::sin(th));
        }
    }
    return out;
}

uint64_t trajectory_hash(const RArray& coords, const Shape& image) {
    constexpr uint64_t kOffset = 1469598103934665603ULL, kPrime = 1099511628211ULL;
    uint64_t h = kOffset;
    auto mix = [&](const void* data, size_t bytes) {
        const auto* b = static_cast<const unsigned char*>(data);
        for (size_t i = 0; i < bytes; ++i) {
            h ^= b[i];
            h *= kPrime;
        }
    };
    auto mix_shape = [&](const Shape& s) {
        const uint64_t rank = static_cast<uint64_t>(s.rank());
        mix(&rank, sizeof rank);
        for (int a = 0; a < s.rank(); ++a) {
            const uint64_t d = s[a];
            mix(&d, sizeof d);
        }
    };
    require(coords.empty() || coords.device() == Device::Cpu, "trajectory_hash needs a host array");
    mix_shape(coords.shape());
    if (!coords.empty()) mix(coords.data(), coords.bytes());
    mix_shape(image);
    return h;
}

void validate_trajectory(const RArray& k, const Shape& image) {
    require(k.device() == Device::Cpu, "coordinates must be a host array");
    require(k.shape().rank() == 3, "coordinates must be [dims, samples, readouts], got " + k.shape().str());
    const int dims = static_cast<int>(k.shape()[0]);
    require(dims == 2 || dims == 3, "trajectory dimensions must be 2 or 3, got " + std::to_string(dims));
    require(image.rank() >= dims, "image " + image.str() + " has fewer axes than the trajectory's " + std::to_string(dims));
    const size_t samples = k.shape()[1], readouts = k.shape()[2];
    const float* p = k.data();
    for (size_t r = 0; r < readouts; ++r)
        for (size_t s = 0; s < samples; ++s)
            for (int a = 0; a < dims; ++a, ++p) {
                const double half = image[a] / 2.0;
                if (!std::isfinite(*p) || std::abs(*p) > half * (1.0 + 1e-4))
                    throw std::invalid_argument("trajectory: readout " + std::to_string(r) + ", sample " + std::to_string(s) +
                                                ", axis " + std::to_string(a) + ": k = " + std::to_string(*p) +
                                                " cycles/FOV is not finite or outside [-" + std::to_string(half) + ", " +
                                                std::to_string(half) + "]");
            }
}

namespace {

// out = in * factor_a per axis a, validating the side in cycles per FOV.
RArray scale_axes(const RArray& in, const Shape& image, bool to_cycles) {
    require(in.device() == Device::Cpu, "coordinates must be a host array");
    require(in.shape().rank() == 3, "coordinates must be [dims, samples, readouts], got " + in.shape().str());
    const int dims = static_cast<int>(in.shape()[0]);
    require(dims == 2 || dims == 3, "trajectory dimensions must be 2 or 3, got " + std::to_string(dims));
    require(image.rank() >= dims, "image " + image.str() + " has fewer axes than the trajectory's " + std::to_string(dims));
    if (!to_cycles) validate_trajectory(in, image);
    RArray out = RArray::host(in.shape());
    const float* src = in.data();
    float* dst = out.data();
    for (size_t i = 0; i < in.size(); ++i) {
        const double n = static_cast<double>(image[static_cast<int>(i % static_cast<size_t>(dims))]);
        dst[i] = static_cast<float>(to_cycles ? src[i] * n : src[i] / n);
    }
    if (to_cycles) validate_trajectory(out, image);
    return out;
}

}  // namespace

RArray normalised_to_cycles(const RArray& normalised, const Shape& image) { return scale_axes(normalised, image, true); }

RArray cycles_to_normalised(const RArray& cycles, const Shape& image) { return scale_axes(cycles, image, false); }

}  // namespace larmor::trajectory
