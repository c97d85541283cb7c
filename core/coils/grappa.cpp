#include "core/coils/grappa.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <string>

#include "core/dense/dense.h"

namespace larmor::coils {
namespace {

using zd = std::complex<double>;

// The source lines of a kernel of k acquired lines: offsets j in [lo, hi] (times R) around the
// acquired line just before the targets, as many before as after (one more after for even k), so the
// targets t in [0, R) sit in the kernel's middle.
struct Span {
    int lo = 0, hi = 0;
    explicit Span(int k) : lo(-(k - 1) / 2), hi(k / 2) {}
    int count() const { return hi - lo + 1; }
};

// Lines [first, last] an acquired-line kernel with targets t in [0, r) touches, relative to the acquired
// line the targets follow.
int reach_before(const Span& s, size_t r) { return -s.lo * int(r); }
int reach_after(const Span& s, size_t r) { return std::max(s.hi * int(r), int(r) - 1); }

// One axis of the lattice: the smallest spacing whose best residue covers at least 90 % of its lines
// between the first and the last sampled one (lines in between that are sampled too, such as
// calibration lines sent as imaging lines, do not disturb it; a lost line does not either).
void axis_lattice(const std::vector<uint8_t>& used, size_t& r, size_t& o) {
    size_t first = used.size(), last = 0;
    for (size_t i = 0; i < used.size(); ++i)
        if (used[i]) {
            first = std::min(first, i);
            last = i;
        }
    const size_t max_r = std::min<size_t>(16, last - first + 1);
    for (size_t cand = 1; cand <= max_r; ++cand)
        for (size_t res = 0; res < cand; ++res) {
            size_t on = 0, hit = 0;
            for (size_t i = first; i <= last; ++i)
                if (i % cand == res) {
                    ++on;
                    hit += used[i] ? 1 : 0;
                }
            if (on > 0 && hit * 10 >= on * 9) {
                r = cand;
                o = res;
                return;
            }
        }
    r = 1;  // unreachable: spacing 1 covers every line of [first, last] whenever the rest fail
    o = 0;
}

}  // namespace

void check(const GrappaSettings& s) {
    if (s.kernel_ro < 1 || s.kernel_ro > 15 || s.kernel_ro % 2 == 0)
        throw std::invalid_argument("GRAPPA: kernel_ro " + std::to_string(s.kernel_ro) + " is not an odd number in 1..15");
    if (s.kernel_e1 < 1 || s.kernel_e1 > 8)
        throw std::invalid_argument("GRAPPA: kernel_e1 " + std::to_string(s.kernel_e1) + " is outside 1..8");
    if (s.kernel_e2 < 1 || s.kernel_e2 > 8)
        throw std::invalid_argument("GRAPPA: kernel_e2 " + std::to_string(s.kernel_e2) + " is outside 1..8");
    if (!(s.lambda >= 0.f && s.lambda <= 1.f))
        throw std::invalid_argument("GRAPPA: lambda " + std::to_string(s.lambda) + " is outside 0..1");
}

std::string GrappaLattice::str() const {
    return r2 > 1 ? "R=" + std::to_string(r1) + "x" + std::to_string(r2) : "R=" + std::to_string(r1);
}

GrappaLattice grappa_lattice(const std::vector<uint8_t>& sampled, size_t e1, size_t e2, size_t* off_lattice) {
    if (sampled.size() != e1 * e2)
        throw std::invalid_argument("GRAPPA: sampling mask of " + std::to_string(sampled.size()) + " lines for " +
                                    std::to_string(e1) + " x " + std::to_string(e2) + " phase encodes");
    // Each axis from the lines sampled in any row of the other, so a 3D block of calibration lines
    // counts as it does in 2D.
    std::vector<uint8_t> along1(e1, 0), along2(e2, 0);
    bool any = false;
    for (size_t z = 0; z < e2; ++z)
        for (size_t y = 0; y < e1; ++y)
            if (sampled[y + e1 * z]) along1[y] = along2[z] = 1, any = true;
    if (!any)
        throw GrappaError("GRAPPA: no line of the " + std::to_string(e1) + " x " + std::to_string(e2) +
                          " phase encodes is sampled");
    GrappaLattice l;
    axis_lattice(along1, l.r1, l.o1);
    axis_lattice(along2, l.r2, l.o2);
    if (off_lattice) {
        size_t off = 0;
        for (size_t z = 0; z < e2; ++z)
            for (size_t y = 0; y < e1; ++y) off += sampled[y + e1 * z] && !l.on(y, z) ? 1 : 0;
        *off_lattice = off;
    }
    return l;
}

GrappaKernels grappa_kernels(Backend& be, const CArray& kspace, const CalibrationRegion& region,
                             const GrappaLattice& lattice, const GrappaSettings& s) {
    check(s);
    const Shape& sh = kspace.shape();
    if (sh.rank() != 4)
        throw std::invalid_argument("GRAPPA: k-space " + sh.str() + " should be [RO, E1, E2, C]");
    const size_t ro = sh[0], e1 = sh[1], e2 = sh[2], nc = sh[3];
    if (region.e1_hi > e1 || region.e2_hi > e2 || region.e1_lo >= region.e1_hi || region.e2_lo >= region.e2_hi)
        throw std::invalid_argument("GRAPPA: calibration region " + region.str() + " is outside k-space " + sh.str());
    GrappaKernels out;
    out.settings = s;
    out.lattice = lattice;
    out.coils = nc;
    out.kernel_e2 = lattice.r2 > 1 ? s.kernel_e2 : 1;
    const size_t r1 = lattice.r1, r2 = lattice.r2;
    const size_t targets_per_coil = r1 * r2 - 1;
    if (targets_per_coil == 0) return out;  // full sampling: nothing to fit

    const Span s1(s.kernel_e1), s2(out.kernel_e2);
    const int hx = s.kernel_ro / 2;
    const size_t n1 = region.e1_lines(), n2 = region.e2_lines();
    // Positions of the acquired line the targets follow, inside the block, for which every source and
    // target lies in the block.
    const int y_lo = reach_before(s1, r1), y_hi = int(n1) - 1 - reach_after(s1, r1);
    const int z_lo = r2 > 1 ? reach_before(s2, r2) : 0, z_hi = r2 > 1 ? int(n2) - 1 - reach_after(s2, r2) : int(n2) - 1;
    if (y_hi < y_lo || z_hi < z_lo || int(ro) < s.kernel_ro)
        throw GrappaError("GRAPPA: the calibration region " + region.str() + " is too small for a " +
                          std::to_string(s.kernel_ro) + " x " + std::to_string(s.kernel_e1) +
                          (r2 > 1 ? " x " + std::to_string(out.kernel_e2) : std::string()) + " kernel at " +
                          lattice.str() + ": it needs at least " +
                          std::to_string(reach_before(s1, r1) + reach_after(s1, r1) + 1) + " lines along E1" +
                          (r2 > 1 ? " and " + std::to_string(reach_before(s2, r2) + reach_after(s2, r2) + 1) +
                                        " along E2"
                                  : std::string()));

    // The block on the host, coil by coil (contiguous runs of E1 lines).
    CArray block = be.host_complex({ro, n1, n2, nc});
    for (size_t c = 0; c < nc; ++c)
        for (size_t z = 0; z < n2; ++z) {
            const size_t src = ro * (region.e1_lo + e1 * (region.e2_lo + z + e2 * c));
            CArray dst = block.view(ro * n1 * (z + n2 * c), {ro * n1});
            be.copy(kspace.view(src, {ro * n1}), dst);
        }
    be.synchronize();
    float peak = 0.f;
    for (size_t i = 0; i < block.size(); ++i) {
        const float m = std::abs(block.data()[i]);
        if (!std::isfinite(m))
            throw GrappaError("GRAPPA: the calibration region " + region.str() + " holds a sample that is not finite");
        peak = std::max(peak, m);
    }
    if (!(peak > 0.f))
        throw GrappaError("GRAPPA: the calibration region " + region.str() + " holds no signal (every sample is 0)");
    const float inv = 1.f / peak;  // the fit does not depend on the scale; the Gram matrix squares it

    const size_t ns = size_t(s.kernel_ro) * size_t(s1.count()) * size_t(s2.count()) * nc;
    const size_t nt = targets_per_coil * nc;
    const size_t xs = ro - size_t(2 * hx), ys = size_t(y_hi - y_lo + 1), zs = size_t(z_hi - z_lo + 1);
    const size_t positions = xs * ys * zs;
    const size_t cap = s.max_rows > 0 ? s.max_rows : std::max<size_t>(8192, 4 * (ns + nt));
    const size_t step = (positions + cap - 1) / cap;
    const size_t rows = (positions + step - 1) / step;
    out.rows = rows;

    // M = [A B], column-major: A's columns the sources, B's the targets.
    CArray m = be.host_complex({rows, ns + nt});
    cfloat* mp = m.data();
    const cfloat* bp = block.data();
    auto at = [&](size_t x, size_t y, size_t z, size_t c) { return bp[x + ro * (y + n1 * (z + n2 * c))] * inv; };
    for (size_t row = 0; row < rows; ++row) {
        const size_t p = row * step;
        const size_t x = size_t(hx) + p % xs, y = size_t(y_lo) + (p / xs) % ys, z = size_t(z_lo) + p / (xs * ys);
        size_t col = 0;
        for (size_t c = 0; c < nc; ++c)
            for (int j2 = s2.lo; j2 <= s2.hi; ++j2)
                for (int j1 = s1.lo; j1 <= s1.hi; ++j1)
                    for (int ox = -hx; ox <= hx; ++ox)
                        mp[row + rows * col++] = at(size_t(int(x) + ox), size_t(int(y) + j1 * int(r1)),
                                                    size_t(int(z) + j2 * int(r2)), c);
        for (size_t c = 0; c < nc; ++c)
            for (size_t t2 = 0; t2 < r2; ++t2)
                for (size_t t1 = 0; t1 < r1; ++t1)
                    if (t1 + t2 > 0) mp[row + rows * col++] = at(x, y + t1, z + t2, c);
    }
    // Column order above is (ro, e1, e2) fastest within a coil for the sources, and (offset, coil) for
    // the targets; the documented weight order is the same.

    CArray g;
    dense::gram(be, be.to_device(m), g);
    const CArray gh = be.to_host(g);
    const size_t n = ns + nt;
    double trace = 0;
    for (size_t i = 0; i < ns; ++i) trace += double(gh.data()[i + n * i].real());
    if (!(trace > 0))
        throw GrappaError("GRAPPA: the calibration region " + region.str() + " gives an empty calibration matrix");
    const float reg = float(double(s.lambda) * trace / double(ns));
    CArray a = CArray::host({ns, ns}), b = CArray::host({ns, nt});
    for (size_t j = 0; j < ns; ++j)
        std::copy(gh.data() + n * j, gh.data() + n * j + ns, a.data() + ns * j);
    for (size_t i = 0; i < ns; ++i) a.data()[i + ns * i] += reg;
    for (size_t j = 0; j < nt; ++j)
        std::copy(gh.data() + n * (ns + j), gh.data() + n * (ns + j) + ns, b.data() + ns * j);
    // b stays A^H B for the residual below (to_device would return b itself on the CPU backend).
    CArray x = be.empty(b.shape());
    be.copy(b, x);
    try {
        dense::cholesky_solve(be, be.to_device(a), x);
    } catch (const dense::NotPositiveDefinite& e) {
        throw GrappaError("GRAPPA: the calibration matrix of region " + region.str() +
                          " is singular (raise lambda above " + std::to_string(s.lambda) + "): " + e.what());
    }
    const CArray xh = be.to_host(x);
    out.weights.assign(xh.data(), xh.data() + xh.size());

    // ||A W - B||^2 = ||B||^2 - Re tr(W^H A^H B) - lambda' ||W||^2 at the regularised solution.
    double bb = 0, wab = 0, ww = 0;
    for (size_t j = 0; j < nt; ++j) {
        bb += double(gh.data()[(ns + j) + n * (ns + j)].real());
        for (size_t i = 0; i < ns; ++i) {
            const zd w = zd(out.weights[i + ns * j]);
            wab += (std::conj(w) * zd(b.data()[i + ns * j])).real();
            ww += std::norm(w);
        }
    }
    out.fit_residual = bb > 0 ? std::sqrt(std::max(0.0, bb - wab - double(reg) * ww) / bb) : 0.0;
    for (cfloat& w : out.weights)
        if (!std::isfinite(w.real()) || !std::isfinite(w.imag()))
            throw GrappaError("GRAPPA: the kernel fitted on region " + region.str() + " is not finite");
    return out;
}

CArray grappa_unmixing(Backend& be, const GrappaKernels& k, const CArray& maps) {
    const Shape& sh = maps.shape();
    if (sh.rank() != 4 || sh[3] != k.coils)
        throw std::invalid_argument("GRAPPA: coil maps " + sh.str() + " do not match the kernels' " +
                                    std::to_string(k.coils) + " coils");
    const size_t ro = sh[0], e1 = sh[1], e2 = sh[2], nc = sh[3];
    const GrappaLattice& l = k.lattice;
    const size_t r1 = l.r1, r2 = l.r2;
    const Span s1(k.settings.kernel_e1), s2(k.kernel_e2);
    const int hx = k.settings.kernel_ro / 2;
    const bool fitted = r1 * r2 > 1;
    // Offsets q = t - j r of the convolution kernel, centred at index `half` of each axis.
    const int half1 = fitted ? std::max(s1.hi * int(r1), int(r1) - 1 - s1.lo * int(r1)) : 0;
    const int half2 = fitted && r2 > 1 ? std::max(s2.hi * int(r2), int(r2) - 1 - s2.lo * int(r2)) : 0;
    const int hxk = fitted ? hx : 0;
    const size_t ex = size_t(2 * hxk + 1), ey = size_t(2 * half1 + 1), ez = size_t(2 * half2 + 1);
    if (ex > ro || ey > e1 || ez > e2)
        throw GrappaError("GRAPPA: an image of " + std::to_string(ro) + " x " + std::to_string(e1) + " x " +
                          std::to_string(e2) + " is smaller than the kernel's reach " + std::to_string(ex) + " x " +
                          std::to_string(ey) + " x " + std::to_string(ez));
    if (fitted && k.weights.size() != size_t(k.settings.kernel_ro) * size_t(s1.count()) * size_t(s2.count()) * nc *
                                          (r1 * r2 - 1) * nc)
        throw std::invalid_argument("GRAPPA: the kernels hold " + std::to_string(k.weights.size()) +
                                    " weights, not the number their settings give");
    const size_t ns = size_t(k.settings.kernel_ro) * size_t(s1.count()) * size_t(s2.count()) * nc;
    const float root_n = float(std::sqrt(double(ro) * double(e1) * double(e2)));
    const AxisMask axes = e2 > 1 ? 0b111u : 0b011u;

    CArray unmix = be.empty(sh), big = be.empty(sh);
    for (size_t c = 0; c < nc; ++c) {
        // K_dc for this source coil c over every target coil d; sqrt(N) folds in the convolution
        // theorem's factor for orthonormal FFTs.
        CArray kc = CArray::host({ex, ey, ez, nc});
        auto cell = [&](int qx, int q1, int q2, size_t d) -> cfloat& {
            return kc.data()[size_t(hxk + qx) + ex * (size_t(half1 + q1) + ey * (size_t(half2 + q2) + ez * d))];
        };
        cell(0, 0, 0, c) += root_n;  // the acquired point keeps its value
        if (fitted) {
            size_t tcol = 0;
            for (size_t d = 0; d < nc; ++d)
                for (size_t t2 = 0; t2 < r2; ++t2)
                    for (size_t t1 = 0; t1 < r1; ++t1) {
                        if (t1 + t2 == 0) continue;
                        const cfloat* w = k.weights.data() + ns * tcol++;
                        size_t src = size_t(k.settings.kernel_ro) * size_t(s1.count()) * size_t(s2.count()) * c;
                        for (int j2 = s2.lo; j2 <= s2.hi; ++j2)
                            for (int j1 = s1.lo; j1 <= s1.hi; ++j1)
                                for (int ox = -hx; ox <= hx; ++ox)
                                    cell(-ox, int(t1) - j1 * int(r1), int(t2) - j2 * int(r2), d) += root_n * w[src++];
                    }
        }
        be.crop_pad_centred(be.to_device(kc), big);
        be.fft(big, big, axes, FFTDirection::Inverse);
        CArray uc = unmix.slice_last(c);
        be.reduce_conj_mul(big, maps, uc);  // sum_d conj(U_dc) s_d = conj(u_c)
    }
    return unmix;
}

void grappa_apply(Backend& be, const CArray& unmixing_conj, const CArray& kspace, CArray& coil_images, CArray& image) {
    const Shape& sh = kspace.shape();
    if (sh.rank() != 4 || unmixing_conj.shape() != sh || coil_images.shape() != sh ||
        image.size() != sh[0] * sh[1] * sh[2])
        throw std::invalid_argument("GRAPPA: k-space " + sh.str() + ", unmixing " + unmixing_conj.shape().str() +
                                    ", scratch " + coil_images.shape().str() + " and image " + image.shape().str() +
                                    " do not agree");
    be.fft(kspace, coil_images, sh[2] > 1 ? 0b111u : 0b011u, FFTDirection::Inverse);
    CArray out = image.reshaped({sh[0], sh[1], sh[2]});
    be.reduce_conj_mul(unmixing_conj, coil_images, out);
}

}  // namespace larmor::coils
