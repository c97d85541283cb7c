#include "tests/support/reference_dft.h"

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

namespace larmor::test {
namespace {

void require_host(const CArray& a, const char* what) {
    if (a.device() != Device::Cpu)
        throw std::invalid_argument(std::string(what) + ": array " + a.shape().str() + " is not on the host");
}

// One axis of the centred DFT by direct sums. The phase (k - c)(m - c) is reduced modulo N in integers
// first, so every twiddle is an exact N-th root of unity evaluated once.
void dft_axis(std::vector<cdouble>& x, const Shape& shape, int axis, int sign) {
    const long long n = static_cast<long long>(shape[axis]);
    const long long c = n / 2;
    const size_t stride = shape.stride(axis);
    const size_t outer = shape.size() / (stride * static_cast<size_t>(n));
    const double pi = 3.14159265358979323846;
    std::vector<cdouble> root(static_cast<size_t>(n));
    for (long long r = 0; r < n; ++r) {
        const double ph = sign * 2.0 * pi * static_cast<double>(r) / static_cast<double>(n);
        root[static_cast<size_t>(r)] = {std::cos(ph), std::sin(ph)};
    }
    const double scale = 1.0 / std::sqrt(static_cast<double>(n));
    std::vector<cdouble> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
    for (size_t o = 0; o < outer; ++o)
        for (size_t i = 0; i < stride; ++i) {
            const size_t base = o * stride * static_cast<size_t>(n) + i;
            for (long long m = 0; m < n; ++m) in[static_cast<size_t>(m)] = x[base + static_cast<size_t>(m) * stride];
            for (long long k = 0; k < n; ++k) {
                cdouble acc = 0;
                for (long long m = 0; m < n; ++m) {
                    long long r = ((k - c) * (m - c)) % n;
                    if (r < 0) r += n;
                    acc += root[static_cast<size_t>(r)] * in[static_cast<size_t>(m)];
                }
                out[static_cast<size_t>(k)] = acc * scale;
            }
            for (long long k = 0; k < n; ++k) x[base + static_cast<size_t>(k) * stride] = out[static_cast<size_t>(k)];
        }
}

}  // namespace

std::vector<cdouble> reference_centred_dft(const std::vector<cdouble>& x, const Shape& shape, AxisMask axes,
                                           FFTDirection dir) {
    if (x.size() != shape.size())
        throw std::invalid_argument("reference_centred_dft: " + std::to_string(x.size()) + " values for shape " +
                                    shape.str());
    std::vector<cdouble> y = x;
    const int sign = dir == FFTDirection::Forward ? -1 : +1;
    for (int a = 0; a < shape.rank(); ++a)
        if (axes & (1u << a)) dft_axis(y, shape, a, sign);
    return y;
}

void fft_rebind(Backend& be, CArray& x, AxisMask axes, FFTDirection dir) {
    CArray y = be.empty(x.shape());
    be.fft(x, y, axes, dir);
    x = y;
}

std::vector<cdouble> to_double(const CArray& a) {
    require_host(a, "to_double");
    std::vector<cdouble> v(a.size());
    for (size_t i = 0; i < a.size(); ++i) v[i] = cdouble(a.data()[i]);
    return v;
}

CArray from_double(const std::vector<cdouble>& x, const Shape& shape) {
    if (x.size() != shape.size())
        throw std::invalid_argument("from_double: " + std::to_string(x.size()) + " values for shape " + shape.str());
    CArray a = CArray::host(shape);
    for (size_t i = 0; i < x.size(); ++i) a.data()[i] = cfloat(x[i]);
    return a;
}

CArray random_array(const Shape& shape, unsigned seed) {
    CArray a = CArray::host(shape);
    std::mt19937 gen(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (size_t i = 0; i < a.size(); ++i) {
        const float re = nd(gen);
        a.data()[i] = cfloat(re, nd(gen));
    }
    return a;
}

double relative_error(const std::vector<cdouble>& a, const std::vector<cdouble>& b) {
    if (a.size() != b.size())
        throw std::invalid_argument("relative_error: sizes " + std::to_string(a.size()) + " and " +
                                    std::to_string(b.size()) + " differ");
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        num += std::norm(a[i] - b[i]);
        den += std::norm(b[i]);
    }
    if (den == 0) return std::sqrt(num);
    return std::sqrt(num / den);
}

double relative_error(const CArray& a, const CArray& b) { return relative_error(to_double(a), to_double(b)); }

double relative_error(const CArray& a, const std::vector<cdouble>& b) { return relative_error(to_double(a), b); }

cdouble inner(const CArray& a, const CArray& b) {
    require_host(a, "inner");
    require_host(b, "inner");
    if (a.size() != b.size())
        throw std::invalid_argument("inner: shapes " + a.shape().str() + " and " + b.shape().str() + " differ in size");
    cdouble s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += std::conj(cdouble(a.data()[i])) * cdouble(b.data()[i]);
    return s;
}

CoilPhantom smooth_coil_phantom(size_t nx, size_t ny, size_t nz, size_t nc) {
    const Shape shape{nx, ny, nz, nc};
    CoilPhantom ph{CArray::host(shape), CArray::host(shape), std::vector<char>(nx * ny * nz, 0)};
    const size_t pixels = nx * ny * nz;
    const double pi = 3.14159265358979323846;
    for (size_t z = 0; z < nz; ++z)
        for (size_t y = 0; y < ny; ++y)
            for (size_t x = 0; x < nx; ++x) {
                const size_t p = x + nx * (y + ny * z);
                // coordinates in [-1, 1)
                const double u = (2.0 * x - nx) / nx, v = (2.0 * y - ny) / ny, w = nz > 1 ? (2.0 * z - nz) / nz : 0.0;
                const bool inside = (u * u) / 0.7 + (v * v) / 0.5 + w * w / 0.8 < 1.0;
                ph.support[p] = inside;
                const cdouble rho = inside ? std::polar(1.0 + 0.3 * u - 0.2 * v, 0.5 * u + 0.3 * v) : cdouble(0);
                std::vector<cdouble> s(nc);
                double norm2 = 0;
                for (size_t c = 0; c < nc; ++c) {
                    // coil centres on a circle around the object, wide profiles, different ramps
                    const double a = 2.0 * pi * static_cast<double>(c) / static_cast<double>(nc);
                    const double du = u - 1.2 * std::cos(a), dv = v - 1.2 * std::sin(a);
                    const double mag = (1.0 + 0.25 * static_cast<double>(c)) * std::exp(-(du * du + dv * dv + w * w) / 3.0);
                    s[c] = std::polar(mag, 0.7 * std::cos(a) * u + 0.5 * std::sin(a) * v + 0.4 * static_cast<double>(c));
                    norm2 += std::norm(s[c]);
                }
                for (size_t c = 0; c < nc; ++c) {
                    ph.data.data()[c * pixels + p] = cfloat(rho * s[c]);
                    ph.true_maps.data()[c * pixels + p] = cfloat(s[c] / std::sqrt(norm2));
                }
            }
    return ph;
}

}  // namespace larmor::test
