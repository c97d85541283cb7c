#include "core/coils/spirit.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <string>

#include "core/coils/calibration_matrix.h"
#include "core/dense/dense.h"

namespace larmor::coils {
namespace {

using zd = std::complex<double>;

// The calibration system shared by both solvers: A (host, the block divided by its peak), its Gram
// matrix G = A^H A (host) and eps.
struct System {
    CArray a;
    CArray gram;
    size_t n = 0, coils = 0, rows = 0, kernel = 0;
    int dims = 2;
    float eps = 0.f;
    // The column of coil `coil`'s window centre.
    size_t centre(size_t coil) const {
        const size_t k = kernel, mid = k / 2 + k * (k / 2) + (dims == 3 ? k * k * (k / 2) : 0);
        return mid + (n / coils) * coil;
    }
};

System calibration_system(Backend& be, const CArray& block, const SpiritSettings& s) {
    check(s);
    const Shape& sh = block.shape();
    if (block.device() != Device::Cpu || (sh.rank() != 3 && sh.rank() != 4))
        throw std::invalid_argument("SPIRiT: calibration block " + sh.str() +
                                    " should be a host array [cx, cy, C] or [cx, cy, cz, C]");
    for (int a = 0; a + 1 < sh.rank(); ++a)
        if (sh[a] < size_t(s.kernel))
            throw SpiritError("SPIRiT: a calibration block " + sh.str() + " is smaller than the kernel of width " +
                              std::to_string(s.kernel) + " along axis " + std::to_string(a));
    float peak = 0.f;
    for (size_t i = 0; i < block.size(); ++i) {
        const float m = std::abs(block.data()[i]);
        if (!std::isfinite(m)) throw SpiritError("SPIRiT: the calibration block holds a sample that is not finite");
        peak = std::max(peak, m);
    }
    if (!(peak > 0.f)) throw SpiritError("SPIRiT: the calibration block holds no signal (every sample is 0)");
    CArray scaled = CArray::host(sh);
    const float inv = 1.f / peak;  // the fit does not depend on the scale; the Gram matrix squares it
    for (size_t i = 0; i < block.size(); ++i) scaled.data()[i] = block.data()[i] * inv;

    System sys;
    sys.a = calibration_matrix(scaled, s.kernel);
    sys.rows = sys.a.shape()[0];
    sys.n = sys.a.shape()[1];
    sys.coils = sh[sh.rank() - 1];
    sys.kernel = size_t(s.kernel);
    sys.dims = sh.rank() - 1;
    CArray g;
    dense::gram(be, be.to_device(sys.a), g);
    sys.gram = be.to_host(g);
    double trace = 0;
    for (size_t i = 0; i < sys.n; ++i) trace += double(sys.gram.data()[i + sys.n * i].real());
    if (!(trace > 0)) throw SpiritError("SPIRiT: the calibration block gives an empty calibration matrix");
    sys.eps = float(double(s.lambda) * trace / double(sys.n));
    return sys;
}

// ||A g_i - a_i|| / ||a_i|| per target coil: R = A W by one complex GEMM (OpenBLAS, threaded), then
// the centre columns taken off row by row. A 3D block has tens of thousands of rows and thousands of
// unknowns (24^3 windows of a 5^3 kernel at 32 coils: 8000 x 4000), where a plain loop took seconds.
std::vector<double> fit_residuals(const System& sys, const std::vector<cfloat>& w) {
    const size_t rows = sys.rows, n = sys.n, nc = sys.coils;
    std::vector<cfloat> r(rows * nc);
    const cfloat one(1.f, 0.f), zero(0.f, 0.f);
    cblas_cgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, blasint(rows), blasint(nc), blasint(n), &one, sys.a.data(),
                blasint(rows), w.data(), blasint(n), &zero, r.data(), blasint(rows));
    std::vector<double> out(nc);
    for (size_t i = 0; i < nc; ++i) {
        const cfloat* a = sys.a.data() + rows * sys.centre(i);
        double r2 = 0, b2 = 0;
        for (size_t row = 0; row < rows; ++row) {
            r2 += std::norm(zd(r[row + rows * i]) - zd(a[row]));
            b2 += std::norm(zd(a[row]));
        }
        out[i] = b2 > 0 ? std::sqrt(r2 / b2) : 0.0;
    }
    return out;
}

SpiritKernels finish(const System& sys, const SpiritSettings& s, std::vector<cfloat> weights) {
    for (const cfloat& w : weights)
        if (!std::isfinite(w.real()) || !std::isfinite(w.imag()))
            throw SpiritError("SPIRiT: the kernel fitted on the calibration block is not finite (raise lambda above " +
                              std::to_string(s.lambda) + ")");
    SpiritKernels k;
    k.settings = s;
    k.coils = sys.coils;
    k.dims = sys.dims;
    k.rows = sys.rows;
    k.fit_residual = fit_residuals(sys, weights);
    k.weights = std::move(weights);
    return k;
}

// m^-1 rhs on the backend (m Hermitian positive definite, host arrays in and out).
CArray solved(Backend& be, const CArray& m, const CArray& rhs, const SpiritSettings& s) {
    CArray x = be.to_device(rhs);
    try {
        dense::cholesky_solve(be, be.to_device(m), x);
    } catch (const dense::NotPositiveDefinite& e) {
        throw SpiritError("SPIRiT: the calibration matrix is singular (raise lambda above " + std::to_string(s.lambda) +
                          "): " + e.what());
    }
    return be.to_host(x);
}

}  // namespace

void check(const SpiritSettings& s) {
    if (s.kernel < 3 || s.kernel > 15 || s.kernel % 2 == 0)
        throw std::invalid_argument("SPIRiT: kernel " + std::to_string(s.kernel) + " is not an odd width in 3..15");
    if (!(s.lambda > 0.f) || !(s.lambda < 1.f))
        throw std::invalid_argument("SPIRiT: lambda " + std::to_string(s.lambda) + " is outside (0, 1)");
}

SpiritKernels spirit_kernels(Backend& be, const CArray& block, const SpiritSettings& s) {
    const System sys = calibration_system(be, block, s);
    const size_t n = sys.n, nc = sys.coils;
    CArray m = CArray::host({n, n});
    std::copy(sys.gram.data(), sys.gram.data() + n * n, m.data());
    for (size_t i = 0; i < n; ++i) m.data()[i + n * i] += sys.eps;
    CArray e = CArray::host({n, nc});
    std::fill(e.data(), e.data() + e.size(), cfloat(0.f, 0.f));
    for (size_t i = 0; i < nc; ++i) e.data()[sys.centre(i) + n * i] = cfloat(1.f, 0.f);
    const CArray xh = solved(be, m, e, s);
    std::vector<cfloat> w(n * nc);
    for (size_t i = 0; i < nc; ++i) {
        const size_t j = sys.centre(i);
        const zd pivot = zd(xh.data()[j + n * i]);  // s = 1 / (the Schur complement of M_rr), > 0
        for (size_t r = 0; r < n; ++r) w[r + n * i] = r == j ? cfloat(0.f, 0.f) : cfloat(-zd(xh.data()[r + n * i]) / pivot);
    }
    return finish(sys, s, std::move(w));
}

SpiritKernels spirit_kernels_per_coil(Backend& be, const CArray& block, const SpiritSettings& s) {
    const System sys = calibration_system(be, block, s);
    const size_t n = sys.n, nc = sys.coils, nr = n - 1;
    // Batch of C reduced systems: M_i = G without row and column j_i, plus eps; rhs G[r, j_i].
    CArray m = CArray::host({nr, nr, nc}), b = CArray::host({nr, 1, nc});
    const cfloat* g = sys.gram.data();
    for (size_t i = 0; i < nc; ++i) {
        const size_t j = sys.centre(i);
        auto keep = [j](size_t q) { return q < j ? q : q + 1; };
        for (size_t c = 0; c < nr; ++c) {
            for (size_t r = 0; r < nr; ++r) m.data()[r + nr * (c + nr * i)] = g[keep(r) + n * keep(c)];
            m.data()[c + nr * (c + nr * i)] += sys.eps;
            b.data()[c + nr * i] = g[keep(c) + n * j];
        }
    }
    const CArray xh = solved(be, m, b, s);
    std::vector<cfloat> w(n * nc);
    for (size_t i = 0; i < nc; ++i) {
        const size_t j = sys.centre(i);
        for (size_t r = 0; r < n; ++r) w[r + n * i] = r == j ? cfloat(0.f, 0.f) : xh.data()[(r < j ? r : r - 1) + nr * i];
    }
    return finish(sys, s, std::move(w));
}

CArray spirit_image_kernels(Backend& be, const SpiritKernels& k, size_t n1, size_t n2) {
    const size_t kw = size_t(k.settings.kernel), nc = k.coils;
    if (k.dims != 2) throw std::invalid_argument("SPIRiT: 3D kernels need a 3D image grid");
    if (k.weights.size() != kw * kw * nc * nc)
        throw std::invalid_argument("SPIRiT: the kernels hold " + std::to_string(k.weights.size()) +
                                    " weights, not the " + std::to_string(kw * kw * nc * nc) + " their settings give");
    if (n1 < kw || n2 < kw)
        throw std::invalid_argument("SPIRiT: an image of " + std::to_string(n1) + " x " + std::to_string(n2) +
                                    " is smaller than the " + std::to_string(kw) + " x " + std::to_string(kw) + " kernel");
    // x_i(p) = sum_o g(o) x_j(p + o) is a convolution with h(q) = g(-q); sqrt(N) folds in the convolution
    // theorem's factor for orthonormal FFTs.
    const float root_n = float(std::sqrt(double(n1) * double(n2)));
    CArray out = be.empty({n1, n2, nc, nc});
    for (size_t i = 0; i < nc; ++i) {
        CArray h = CArray::host({kw, kw, nc});
        for (size_t j = 0; j < nc; ++j)
            for (size_t oy = 0; oy < kw; ++oy)
                for (size_t ox = 0; ox < kw; ++ox)
                    h.data()[(kw - 1 - ox) + kw * ((kw - 1 - oy) + kw * j)] =
                        root_n * k.weights[ox + kw * (oy + kw * (j + nc * i))];
        CArray gi = out.slice_last(i);
        be.crop_pad_centred(be.to_device(h), gi);
        be.fft(gi, gi, 0b011u, FFTDirection::Inverse);
    }
    return out;
}

namespace {

// h_i: target coil i's kernel as a convolution filter (the window flipped, x_i(p) = sum_o g(o) x_j(p + o)
// is a convolution with h(q) = g(-q)) with sqrt(N) folded in for the convolution theorem of orthonormal
// FFTs: [k, k, k, C_source, C_target] on the host.
CArray convolution_filters_3d(const SpiritKernels& k, float root_n) {
    const size_t kw = size_t(k.settings.kernel), nc = k.coils, k3 = kw * kw * kw;
    CArray h = CArray::host({kw, kw, kw, nc, nc});
    for (size_t i = 0; i < nc; ++i)
        for (size_t j = 0; j < nc; ++j)
            for (size_t o = 0; o < k3; ++o) {
                const size_t ox = o % kw, oy = (o / kw) % kw, oz = o / (kw * kw);
                h.data()[(kw - 1 - ox) + kw * ((kw - 1 - oy) + kw * ((kw - 1 - oz) + kw * (j + nc * i)))] =
                    root_n * k.weights[o + k3 * (j + nc * i)];
            }
    return h;
}

void check_3d(const SpiritKernels& k, size_t n1, size_t n2, size_t n3) {
    const size_t kw = size_t(k.settings.kernel), nc = k.coils;
    if (k.dims != 3) throw std::invalid_argument("SPIRiT: 2D kernels need a 2D image grid");
    if (k.weights.size() != kw * kw * kw * nc * nc)
        throw std::invalid_argument("SPIRiT: the kernels hold " + std::to_string(k.weights.size()) +
                                    " weights, not the " + std::to_string(kw * kw * kw * nc * nc) +
                                    " their settings give");
    if (n1 < kw || n2 < kw || n3 < kw)
        throw std::invalid_argument("SPIRiT: a volume of " + std::to_string(n1) + " x " + std::to_string(n2) + " x " +
                                    std::to_string(n3) + " is smaller than the kernel of width " + std::to_string(kw));
}

// Each target coil's filters (the last axis of h, on the device) zero-padded into out's grid and
// inverse-transformed over `axes`.
void to_image_space(Backend& be, const CArray& h, CArray& out, AxisMask axes) {
    for (size_t i = 0; i < out.shape()[out.shape().rank() - 1]; ++i) {
        CArray gi = out.slice_last(i);
        be.crop_pad_centred(h.slice_last(i), gi);
        be.fft(gi, gi, axes, FFTDirection::Inverse);
    }
}

}  // namespace

CArray spirit_image_kernels(Backend& be, const SpiritKernels& k, size_t n1, size_t n2, size_t n3) {
    check_3d(k, n1, n2, n3);
    const size_t nc = k.coils;
    const CArray h = be.to_device(convolution_filters_3d(k, float(std::sqrt(double(n1) * double(n2) * double(n3)))));
    CArray out = be.empty({n1, n2, n3, nc, nc});
    to_image_space(be, h, out, 0b111u);
    return out;
}

CArray spirit_image_kernels(Backend& be, const SpiritKernels& k, size_t n1, size_t n2, size_t n3, size_t first,
                            size_t count) {
    check_3d(k, n1, n2, n3);
    if (count == 0 || first > n1 || count > n1 - first)
        throw std::invalid_argument("SPIRiT: readout positions [" + std::to_string(first) + ", " +
                                    std::to_string(first + count) + ") are outside a volume of " + std::to_string(n1));
    if (first == 0 && count == n1) return spirit_image_kernels(be, k, n1, n2, n3);
    const size_t kw = size_t(k.settings.kernel), nc = k.coils;
    const float root_n = float(std::sqrt(double(n1) * double(n2) * double(n3)));
    // The readout first, on the kernels' support only: [n1, k, k, C, C], then the slab's rows of it.
    CArray along = be.empty({n1, kw, kw, nc, nc});
    be.crop_pad_centred(be.to_device(convolution_filters_3d(k, root_n)), along);
    be.fft(along, along, 0b001u, FFTDirection::Inverse);
    const CArray all = be.to_host(along);
    CArray rows = CArray::host({count, kw, kw, nc, nc});
    const size_t lines = kw * kw * nc * nc;
    for (size_t l = 0; l < lines; ++l)
        std::copy(all.data() + l * n1 + first, all.data() + l * n1 + first + count, rows.data() + l * count);
    CArray out = be.empty({count, n2, n3, nc, nc});
    to_image_space(be, be.to_device(rows), out, 0b110u);
    return out;
}

SpiritKernels spirit_kernels_3d(Backend& be, const CArray& kspace, size_t e1_lo, size_t e1_hi, size_t e2_lo,
                                size_t e2_hi, size_t most, const SpiritSettings& s) {
    check(s);
    const Shape& sh = kspace.shape();
    if (sh.rank() != 4 || sh[2] < 2)
        throw std::invalid_argument("SPIRiT 3D: k-space " + sh.str() + " should be [RO, E1, E2 > 1, C]");
    if (e1_lo >= e1_hi || e1_hi > sh[1] || e2_lo >= e2_hi || e2_hi > sh[2])
        throw std::invalid_argument("SPIRiT 3D: calibration lines e1 [" + std::to_string(e1_lo) + ", " +
                                    std::to_string(e1_hi) + ") x e2 [" + std::to_string(e2_lo) + ", " +
                                    std::to_string(e2_hi) + ") are outside k-space " + sh.str());
    // The block is cut on the device when it is the centred window (the usual case: the calibration
    // region grows around the centre line), so only the block crosses to the host, not the volume.
    const size_t cx = std::min(sh[0], most), cy = std::min(most, e1_hi - e1_lo), cz = std::min(most, e2_hi - e2_lo);
    const bool centred = e1_lo + (e1_hi - e1_lo - cy) / 2 == sh[1] / 2 - cy / 2 &&
                         e2_lo + (e2_hi - e2_lo - cz) / 2 == sh[2] / 2 - cz / 2;
    CArray block;
    if (centred) {
        CArray window = be.empty({cx, cy, cz, sh[3]});
        be.crop_pad_centred(kspace, window);
        block = be.to_host(window);
    } else {
        block = calibration_block_3d(be.to_host(kspace), e1_lo, e1_hi, e2_lo, e2_hi, cx, cy, cz);
    }
    return spirit_kernels(be, block, s);
}

CArray spirit_image_kernels_3d(Backend& be, const CArray& kspace, size_t e1_lo, size_t e1_hi, size_t e2_lo,
                               size_t e2_hi, size_t most, const SpiritSettings& s) {
    const Shape& sh = kspace.shape();
    return spirit_image_kernels(be, spirit_kernels_3d(be, kspace, e1_lo, e1_hi, e2_lo, e2_hi, most, s), sh[0], sh[1],
                                sh[2]);
}

}  // namespace larmor::coils
