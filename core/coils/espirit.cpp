#include "core/coils/espirit.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/coils/calibration_matrix.h"
#include "core/coils/espirit_kernels.h"
#include "core/dense/dense.h"
#include "core/dense/lapacke_cpp.h"

namespace larmor::coils {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;

// The first principal component of the block's coils: the dominant eigenvector of the C x C coil
// covariance, in double (C is small). The maps' phase is taken relative to it.
std::vector<cfloat> principal_component(const CArray& block) {
    const size_t samples = block.shape()[0] * block.shape()[1], c = block.shape()[2];
    std::vector<std::complex<double>> cov(c * c);
    const cfloat* x = block.data();
    for (size_t j = 0; j < c; ++j)
        for (size_t i = j; i < c; ++i) {
            std::complex<double> sum = 0;
            for (size_t n = 0; n < samples; ++n)
                sum += std::complex<double>(x[n + samples * i]) * std::conj(std::complex<double>(x[n + samples * j]));
            cov[i + c * j] = sum;
        }
    std::vector<double> w(c);
    const lapack_int info = LAPACKE_zheevd(LAPACK_COL_MAJOR, 'V', 'L', lapack_int(c),
                                           reinterpret_cast<lapack_complex_double*>(cov.data()), lapack_int(c), w.data());
    if (info != 0)
        throw std::runtime_error("ESPIRiT: the eigendecomposition of the " + std::to_string(c) + "-coil covariance failed "
                                 "(LAPACKE_zheevd info " + std::to_string(info) + ")");
    std::vector<cfloat> u(c);
    for (size_t i = 0; i < c; ++i) u[i] = cfloat(cov[i + c * (c - 1)]);
    return u;
}

// An orthonormal basis of span{B^H u_j} over the `kept` largest singular values (bh = B^H [n, rows]; u:
// the eigenvectors of B B^H, ascending): the span of the right singular vectors v_j = B^H u_j / s_j.
// A Householder QR gives it orthonormal to float precision; the v_j themselves would carry the
// eigenvectors' float error magnified by up to s_max / s_j (50 at the default threshold), and the maps
// need P = V V^H to be a projection. Only the span is used (the maps' P), so Q's columns, which
// mix v_1 .. v_j into column j, serve as well.
void orthonormal_span(const CArray& bh, const CArray& u, size_t kept, CArray& out) {
    const size_t n = bh.shape()[0], rows = bh.shape()[1];
    const cfloat one(1.f), zero(0.f);
    // Columns rows - kept .. rows - 1 of u hold the kept vectors (ascending); their order does not
    // change the span.
    cblas_cgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, int(n), int(kept), int(rows), &one, bh.data(), int(n),
                u.data() + rows * (rows - kept), int(rows), &zero, out.data(), int(n));
    std::vector<cfloat> tau(kept);
    lapack_int info = LAPACKE_cgeqrf(LAPACK_COL_MAJOR, lapack_int(n), lapack_int(kept), out.data(), lapack_int(n), tau.data());
    if (info == 0)
        info = LAPACKE_cungqr(LAPACK_COL_MAJOR, lapack_int(n), lapack_int(kept), lapack_int(kept), out.data(), lapack_int(n),
                              tau.data());
    if (info != 0)
        throw std::runtime_error("ESPIRiT: the QR factorisation of the " + std::to_string(n) + " x " + std::to_string(kept) +
                                 " signal subspace failed (LAPACKE info " + std::to_string(info) + ")");
}

// exp(+2 pi i (d - (k - 1)) (x - n / 2) / n) at d + D x, in double before rounding.
CArray offset_phases(size_t n, int k) {
    const size_t d = size_t(2 * k - 1);
    CArray t = CArray::host({d, n});
    for (size_t x = 0; x < n; ++x)
        for (size_t i = 0; i < d; ++i) {
            const double turns = (double(i) - double(k - 1)) * (double(x) - double(n / 2)) / double(n);
            t.data()[i + d * x] = cfloat(std::polar(1.0, kTwoPi * turns));
        }
    return t;
}

}  // namespace

void check(const EspiritSettings& s) {
    if (s.kernel < 2 || s.kernel > 16)
        throw std::invalid_argument("ESPIRiT: kernel " + std::to_string(s.kernel) + " is outside 2..16");
    if (s.calibration < size_t(s.kernel) + 1 || s.calibration > 256)
        throw std::invalid_argument("ESPIRiT: calibration size " + std::to_string(s.calibration) + " is outside " +
                                    std::to_string(s.kernel + 1) + "..256 (it must exceed the kernel " +
                                    std::to_string(s.kernel) + ")");
    if (!(s.threshold > 0.f && s.threshold < 1.f))
        throw std::invalid_argument("ESPIRiT: threshold " + std::to_string(s.threshold) + " is outside (0, 1)");
    if (!(s.crop >= 0.f && s.crop < 1.f))
        throw std::invalid_argument("ESPIRiT: crop " + std::to_string(s.crop) + " is outside [0, 1)");
    if (s.iterations < 1 || s.iterations > 1000)
        throw std::invalid_argument("ESPIRiT: iterations " + std::to_string(s.iterations) + " is outside 1..1000");
    if (s.sets < 1 || s.sets > 2) throw std::invalid_argument("ESPIRiT: sets " + std::to_string(s.sets) + " is not 1 or 2");
}

EspiritKernels espirit_kernels(Backend& be, const CArray& block, const EspiritSettings& s) {
    check(s);
    double peak = 0;
    for (size_t i = 0; i < block.size(); ++i) peak = std::max(peak, std::abs(std::complex<double>(block.data()[i])));
    if (!std::isfinite(peak))
        throw EspiritError("ESPIRiT: the calibration block " + block.shape().str() +
                           " holds non-finite samples (k-space that overflowed float)");
    if (!(peak > 0))
        throw EspiritError("ESPIRiT: the calibration block " + block.shape().str() + " has no usable signal (all zero)");
    CArray a = calibration_matrix(block, s.kernel);
    const size_t rows = a.shape()[0], n = a.shape()[1];
    // A's rows are the windows x_w transposed, so A^H A = sum_w conj(x_w) x_w^T; the windows themselves
    // span the eigenvectors of sum_w x_w x_w^H = B^H B, the Gram matrix of B = conj(A) / peak.
    // With fewer windows than kernel entries (a 3D scan's per-position 16 x 16 block: 121 windows of
    // 6 x 6 x 8 = 288 entries) the same subspace comes from the smaller eigenproblem B B^H = U S^2 U^H:
    // the right singular vectors are v_j = B^H u_j / s_j. A Hermitian eigensolver costs O(order^3), so
    // that is (288 / 121)^3 = 13x less work per readout position.
    const bool wide = rows < n;
    const size_t order = wide ? rows : n;
    const float unit = float(1.0 / peak);
    // wide: B^H = A^T / peak, [n, rows]; otherwise B itself, [rows, n], made from A in place.
    CArray b = wide ? CArray::host({n, rows}) : std::move(a);  // a is not read again unless wide
    if (wide) {
        for (size_t i = 0; i < n; ++i)
            for (size_t r = 0; r < rows; ++r) b.data()[i + n * r] = a.data()[r + rows * i] * unit;
    } else {
        for (size_t i = 0; i < b.size(); ++i) b.data()[i] = std::conj(b.data()[i]) * unit;
    }
    CArray g = be.empty({order, order, 1});
    dense::gram(be, be.to_device(b.reshaped({b.shape()[0], b.shape()[1], 1})), g);
    RArray values = be.empty_real({order, 1});
    CArray vectors = be.empty({order, order, 1});
    dense::hermitian_eig(be, g, values, vectors);
    const RArray lambda = be.to_host(values);
    const CArray v = be.to_host(vectors);

    EspiritKernels out;
    out.kernel = s.kernel;
    out.coils = block.shape()[2];
    out.singular_values.assign(n, 0.f);  // beyond `order` (wide A) they are exactly zero
    for (size_t j = 0; j < order; ++j) out.singular_values[j] = std::sqrt(std::max(0.f, lambda.data()[order - 1 - j]));
    const float top = out.singular_values[0];
    if (!(top > 0.f) || !std::isfinite(top))
        throw EspiritError("ESPIRiT: the calibration block " + block.shape().str() +
                           " has no usable signal (largest singular value " + std::to_string(top) + ")");
    while (out.kept < order && out.singular_values[out.kept] >= s.threshold * top) ++out.kept;
    out.subspace = CArray::host({n, out.kept});
    if (!wide) {
        for (size_t j = 0; j < out.kept; ++j)
            std::copy_n(v.data() + n * (n - 1 - j), n, out.subspace.data() + n * j);
    } else {
        orthonormal_span(b, v, out.kept, out.subspace);
    }
    out.principal = principal_component(block);
    return out;
}

EspiritMaps espirit_maps(Backend& be, const EspiritKernels& kernels, size_t n1, size_t n2, const EspiritSettings& s) {
    check(s);
    const size_t k = size_t(kernels.kernel), c = kernels.coils, n = k * k * c, r = kernels.kept, d = 2 * k - 1;
    if (kernels.subspace.size() != n * r || kernels.principal.size() != c || r == 0)
        throw std::invalid_argument("espirit_maps: kernels of " + std::to_string(r) + " vectors " +
                                    kernels.subspace.shape().str() + " do not match a " + std::to_string(k) +
                                    "-wide kernel over " + std::to_string(c) + " coils");
    if (n1 == 0 || n2 == 0) throw std::invalid_argument("espirit_maps: empty image grid");
    // P = V V^H, the projection on the signal subspace.
    std::vector<cfloat> p(n * n);
    const cfloat one(1.f), zero(0.f);
    cblas_cgemm(CblasColMajor, CblasNoTrans, CblasConjTrans, int(n), int(n), int(r), &one, kernels.subspace.data(),
                int(n), kernels.subspace.data(), int(n), &zero, p.data(), int(n));
    // K(d)_{c c'} = k^-2 sum_p P[(p, c), (p - d, c')] over the positions p of the window with p - d in it.
    CArray kd = CArray::host({c, c, d, d});
    const long kk = long(k);
    const float norm = 1.f / float(k * k);
    for (size_t dy = 0; dy < d; ++dy)
        for (size_t dx = 0; dx < d; ++dx) {
            const long ox = long(dx) - (kk - 1), oy = long(dy) - (kk - 1);
            cfloat* out = kd.data() + c * c * (dx + d * dy);
            for (long py = std::max(0L, oy); py < std::min(kk, kk + oy); ++py)
                for (long px = std::max(0L, ox); px < std::min(kk, kk + ox); ++px) {
                    const size_t row = size_t(px + kk * py), col = size_t((px - ox) + kk * (py - oy));
                    for (size_t c2 = 0; c2 < c; ++c2)
                        for (size_t c1 = 0; c1 < c; ++c1) out[c1 + c * c2] += p[(row + k * k * c1) + n * (col + k * k * c2)];
                }
            for (size_t i = 0; i < c * c; ++i) out[i] *= norm;
        }
    const CArray ex = offset_phases(n1, kernels.kernel), ey = offset_phases(n2, kernels.kernel);
    CArray u = CArray::host({c});
    std::copy(kernels.principal.begin(), kernels.principal.end(), u.data());

    const size_t sets = size_t(s.sets);
    const EspiritPixelProblem problem{n1, n2, c, d, s.iterations, s.crop, s.sets};
    CArray maps = be.empty({n1, n2, c, sets});
    RArray eigenvalues = be.empty_real({n1, n2, sets});
    if (be.device() == Device::Cpu)
        cpu::espirit_eigenvectors(kd, ex, ey, u, maps, eigenvalues, problem);
    else
        cuda::espirit_eigenvectors(be, be.to_device(kd), be.to_device(ex), be.to_device(ey), be.to_device(u), maps,
                                   eigenvalues, problem);
    EspiritMaps m;
    m.maps = maps.slice_last(0);
    m.eigenvalues = eigenvalues.slice_last(0);
    if (sets == 2) {
        m.second = maps.slice_last(1);
        m.second_eigenvalues = eigenvalues.slice_last(1);
    }
    return m;
}

EspiritMaps espirit_maps(Backend& be, const CArray& kspace, size_t e1_lo, size_t e1_hi, const EspiritSettings& s) {
    const Shape& sh = kspace.shape();
    if (sh.rank() != 4 || sh[2] != 1)
        throw std::invalid_argument("ESPIRiT: k-space " + sh.str() + " should be [RO, E1, 1, C] (2D)");
    const CArray host = kspace.device() == Device::Cpu ? kspace : be.to_host(kspace);
    const CArray block = calibration_block(host, e1_lo, e1_hi, s.calibration, s.calibration);
    EspiritMaps m = espirit_maps(be, espirit_kernels(be, block, s), sh[0], sh[1], s);
    m.maps = m.maps.reshaped({sh[0], sh[1], 1, sh[3]});
    if (!m.second.empty()) m.second = m.second.reshaped({sh[0], sh[1], 1, sh[3]});
    return m;
}

EspiritMaps espirit_maps_3d(Backend& be, const CArray& kspace, size_t e1_lo, size_t e1_hi, size_t e2_lo, size_t e2_hi,
                            const EspiritSettings& s) {
    check(s);
    const Shape& sh = kspace.shape();
    const HybridBlocks blocks =
        hybrid_calibration_blocks(be, kspace, e1_lo, e1_hi, e2_lo, e2_hi, s.calibration, "ESPIRiT 3D");
    const size_t ro = sh[0], e1 = sh[1], e2 = sh[2], c = sh[3], cy = blocks.cy, cz = blocks.cz;
    const std::vector<double>& energy = blocks.energy;
    const std::vector<cfloat> principal = principal_component(blocks.all.reshaped({cy * ro, cz, c}));
    const double strongest = *std::max_element(energy.begin(), energy.end());
    if (!std::isfinite(strongest))
        throw EspiritError("ESPIRiT 3D: the calibration region of k-space " + sh.str() +
                           " holds non-finite samples (k-space that overflowed float)");
    if (!(strongest > 0))
        throw EspiritError("ESPIRiT 3D: the calibration region " + std::to_string(cy) + " x " + std::to_string(cz) +
                                 " of k-space " + sh.str() + " has no usable signal");

    const size_t sets = size_t(s.sets);
    CArray maps = CArray::host({ro, e1, e2, c, sets});
    RArray eigenvalues = RArray::host({ro, e1, e2, sets});
    for (size_t x = 0; x < ro; ++x) {
        if (energy[x] < double(s.threshold) * double(s.threshold) * strongest) continue;
        EspiritKernels kern = espirit_kernels(be, blocks.block(x), s);
        kern.principal = principal;
        const EspiritMaps m = espirit_maps(be, kern, e1, e2, s);
        for (size_t set = 0; set < sets; ++set) {
            const CArray mh = be.to_host(set == 0 ? m.maps : m.second);
            const RArray eh = be.to_host(set == 0 ? m.eigenvalues : m.second_eigenvalues);
            const size_t n = e1 * e2, vol = ro * n;
            for (size_t i = 0; i < n; ++i) {
                eigenvalues.data()[x + ro * i + vol * set] = eh.data()[i];
                for (size_t q = 0; q < c; ++q) maps.data()[x + ro * i + vol * (q + c * set)] = mh.data()[i + n * q];
            }
        }
    }
    const CArray md = be.to_device(maps);
    const RArray ed = be.to_device(eigenvalues);
    EspiritMaps out{md.slice_last(0), ed.slice_last(0), {}, {}};
    if (sets == 2) {
        out.second = md.slice_last(1);
        out.second_eigenvalues = ed.slice_last(1);
    }
    return out;
}

}  // namespace larmor::coils
