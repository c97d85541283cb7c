#include "tests/support/phantom_truth.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <filesystem>

namespace larmor::test {
namespace {

using cdouble = std::complex<double>;

// Psi^-1 by Gauss-Jordan elimination (Hermitian positive definite, a few coils).
std::vector<cdouble> inverse(std::vector<cdouble> a, size_t n) {
    std::vector<cdouble> inv(n * n, 0.0);
    for (size_t i = 0; i < n; ++i) inv[i * n + i] = 1.0;
    for (size_t col = 0; col < n; ++col) {
        const cdouble p = a[col * n + col];
        for (size_t j = 0; j < n; ++j) {
            a[col * n + j] /= p;
            inv[col * n + j] /= p;
        }
        for (size_t r = 0; r < n; ++r)
            if (r != col) {
                const cdouble f = a[r * n + col];
                for (size_t j = 0; j < n; ++j) {
                    a[r * n + j] -= f * a[col * n + j];
                    inv[r * n + j] -= f * inv[col * n + j];
                }
            }
    }
    return inv;
}

}  // namespace

std::vector<double> rss_object(const phantom::PhantomSpec& spec, int supersample, bool whitened) {
    const phantom::Phantom ph(spec);
    const size_t nc = size_t(spec.coils);
    std::vector<std::vector<cdouble>> ci(nc);
    for (size_t c = 0; c < nc; ++c) ci[c] = ph.coil_image(int(c), 0, supersample);
    const std::vector<cdouble> inv = whitened ? inverse(ph.noise_covariance(), nc) : std::vector<cdouble>{};
    std::vector<double> t(ci[0].size(), 0.0);
    for (size_t p = 0; p < t.size(); ++p) {
        double v = 0;
        if (!whitened) {
            for (size_t c = 0; c < nc; ++c) v += std::norm(ci[c][p]);
        } else {
            for (size_t i = 0; i < nc; ++i)
                for (size_t j = 0; j < nc; ++j) v += (std::conj(ci[i][p]) * inv[i * nc + j] * ci[j][p]).real();
        }
        t[p] = std::sqrt(std::max(v, 0.0));
    }
    return t;
}

std::vector<double> float_pixels(const Image& img) {
    EXPECT_EQ(img.head.data_type, ISMRMRD::ISMRMRD_FLOAT);
    std::vector<float> v(img.pixels.size() / sizeof(float));
    std::memcpy(v.data(), img.pixels.data(), img.pixels.size());
    return std::vector<double>(v.begin(), v.end());
}

double scaled_nrmse(const std::vector<double>& x, const std::vector<double>& t) {
    if (x.size() != t.size()) return INFINITY;
    double xt = 0, xx = 0, tt = 0;
    for (size_t i = 0; i < t.size(); ++i) {
        xt += x[i] * t[i];
        xx += x[i] * x[i];
        tt += t[i] * t[i];
    }
    const double a = xx > 0 ? xt / xx : 0;
    double e = 0;
    for (size_t i = 0; i < t.size(); ++i) e += (a * x[i] - t[i]) * (a * x[i] - t[i]);
    return std::sqrt(e / tt);
}

Dataset phantom_dataset(const phantom::PhantomSpec& spec, const std::string& tag) {
    namespace fs = std::filesystem;
    const fs::path path = fs::temp_directory_path() / ("larmor_phantom_" + std::to_string(::getpid()) + "_" + tag + ".h5");
    phantom::write_dataset(spec, path.string());
    Dataset ds = read_dataset(path.string());
    fs::remove(path);
    return ds;
}

}  // namespace larmor::test
