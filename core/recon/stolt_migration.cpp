#include "core/recon/stolt_migration.h"
#include "core/constants.h"

#include <cmath>
#include <complex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/linops/nufft.h"

namespace larmor {
namespace {

void check_positive(double v, const char* what) {
    if (!std::isfinite(v) || v <= 0.0)
        throw std::invalid_argument(std::string("stolt_migrate: ") + what + " " + std::to_string(v) +
                                    " must be finite and > 0");
}

// Smallest even number >= v.
size_t even_at_least(size_t v) { return v + (v & 1u); }

}  // namespace

// The pipeline, for one unsteered plane wave (Garcia et al. 2013, section II):
//
//  1. Exploding-reflector model. The two-way time of a point at (x_p, z_p) seen by the element at x,
//     t = (z_p + sqrt((x - x_p)^2 + z_p^2)) / c, is fitted by the one-way hyperbola of a source at
//     depth sqrt(2) z_p in a medium of speed v = c / sqrt(1 + cos(theta) + sin^2(theta)) = c / sqrt(2)
//     (their eq. 7 at theta = 0). Stolt's migration of that exploding-reflector field, written on the
//     output axis t' = 2 z / c so that the true depth comes out directly, is the remap
//         I(k_x, f') = S(k_x, f(k_x, f')) f' / f,   f = sign(f') sqrt(f'^2 + v^2 k_x^2)
//     (their eqs. 9-10 with the Jacobian df'/df = f'/f; Stolt 1978 eq. 21), where S is the 2D Fourier
//     transform of the RF data s(t, x), k_x the lateral wavenumber (cycles/m) and f' the output
//     temporal frequency; z = c t' / 2. StoltMapping::Exact uses the exact 0-deg relation instead,
//     f = f' + c^2 k_x^2 / (4 f') with Jacobian 1 - (k_x / k_z)^2 (Lu 1997), zero where |k_x| > k_z.
//  2. The remap as one NUFFT. S is needed at the non-uniform f(k_x, f') of every output (k_x, f') but
//     only at lateral wavenumbers on the FFT grid. S(k_x, f) there is the DTFT of the sampled data,
//     i.e. the type-2 NUFFT of s(t, x) at the points (f Nt dt, k_x Nx2 pitch) in cycles per FOV, the
//     lateral coordinate an integer (where the NUFFT equals the FFT over x). So the 2D FFT and the 1D
//     interpolation along f_t of GPU Gems 2's pipeline are one Nufft::forward: the same spreading /
//     interpolation kernels as gridding, exact to the NUFFT's tolerance instead of the linear
//     interpolation of Garcia's code (the data's band-limited interpolant is evaluated, not
//     approximated by neighbours).
//  3. Everything pointwise in the (f', k_x) domain is one complex weight: the Jacobian f'/f, the
//     phase that moves the time origin of the data (sample 0 at t = 0, not at the centre of the
//     NUFFT's window) and of the output, the normalisation between the NUFFT (Nt samples) and the
//     inverse FFT (Nz2 samples), and the analytic-signal filter (Hilbert along depth via the FFT:
//     f' < 0 zeroed, f' > 0 doubled), so the inverse 2D FFT yields the analytic image at once and the
//     envelope is its modulus. Points with |f| beyond fs / 2 hold no data: weight 0.
//  4. Zero-padding, to keep the periodic transforms from wrapping: laterally to 2 Nx, since the
//     migration's impulse response (a semicircle of radius up to the deepest range) reaches beyond the
//     aperture and would otherwise fold onto the opposite edge; along depth the output spectrum is
//     sampled at Nz2 = 1.5 Nt frequencies, a period 1.5x the record, so the band-limited ringing of
//     targets near the bottom and of the Hilbert filter does not fold onto the top rows. The time axis
//     of the input needs no padding: the NUFFT evaluates the DTFT of the Nt samples as they are.
StoltMigration::StoltMigration(std::shared_ptr<Backend> be_ptr, size_t nt, size_t nx, const PlaneWaveGeometry& g,
                               const StoltOptions& options)
    : be_(std::move(be_ptr)), nt_(nt), nx_(nx), nx2_(2 * nx), nz2_(even_at_least(nt + nt / 2)) {
    if (!be_) throw std::invalid_argument("stolt_migrate: no backend");
    Backend& be = *be_;
    if (nt < 2 || nx < 2)
        throw std::invalid_argument("stolt_migrate: " + std::to_string(nt) + " samples x " + std::to_string(nx) +
                                    " elements; expected samples >= 2, elements >= 2");
    check_positive(g.pitch_m, "pitch (m)");
    check_positive(g.sampling_hz, "sampling frequency (Hz)");
    check_positive(g.sound_speed_m_s, "speed of sound (m/s)");
    if (!std::isfinite(g.angle_rad) || g.angle_rad != 0.0)
        throw std::invalid_argument("stolt_migrate: transmit angle " + std::to_string(g.angle_rad) +
                                    " rad; only unsteered (0) plane waves are supported");

    const size_t nx2 = nx2_;  // lateral padding (step 4)
    const size_t nz2 = nz2_;  // output spectral samples along depth (step 4)
    const double dt = 1.0 / g.sampling_hz;
    const double c = g.sound_speed_m_s;
    const double v = c / std::sqrt(2.0);  // exploding-reflector speed at theta = 0 (step 1)
    // Time of the centred coordinate 0: sample n sits at centred position n - nt/2 of the NUFFT's
    // window (and row n of the cropped output at the same position of the inverse FFT's), so both
    // time axes start nt/2 samples before their centre.
    const double t0 = static_cast<double>(nt / 2) * dt;
    const double norm = std::sqrt(static_cast<double>(nt) / static_cast<double>(nz2));
    const double half_band = 0.5 * g.sampling_hz;
    const bool exact = options.mapping == StoltMapping::Exact;

    // Points (f Nt dt, k_x index) for every output (f'_j, k_x,l), j fastest, and their weights.
    const size_t m = nz2 * nx2;
    RArray coords = be.host_real({2, m});
    CArray weight = be.host_complex({nz2, nx2});
    float* k = coords.data();
    cfloat* w = weight.data();
    for (size_t l = 0; l < nx2; ++l) {
        const double kx_index = static_cast<double>(l) - static_cast<double>(nx2 / 2);
        const double kx = kx_index / (static_cast<double>(nx2) * g.pitch_m);  // cycles/m
        for (size_t j = 0; j < nz2; ++j) {
            const size_t p = j + l * nz2;
            const double fo = (static_cast<double>(j) - static_cast<double>(nz2 / 2)) / (static_cast<double>(nz2) * dt);
            k[2 * p + 1] = static_cast<float>(kx_index);
            // The input frequency f of this output and the Jacobian df/df' of Stolt's change of
            // variables, I(k_x, f') = S(k_x, f(f')) df/df' (Garcia: f'/f; exact: 1 - (k_x / k_z)^2).
            double fi = 0.0, jacobian = 0.0;
            bool defined = fo > 0.0;
            if (defined && exact) {
                const double q = c * c * kx * kx / (4.0 * fo * fo);  // (k_x / k_z)^2
                defined = q <= 1.0;  // beyond: no propagating echo maps there
                fi = fo * (1.0 + q);
                jacobian = 1.0 - q;
            } else if (defined) {
                fi = std::sqrt(fo * fo + v * v * kx * kx);
                jacobian = fo / fi;
            }
            if (!defined || fi > half_band) {
                // f' <= 0: removed by the analytic-signal filter (f' = 0, the DC row, carries no echo of
                // a band-pass pulse). |f| > fs/2: no data there.
                k[2 * p] = 0.f;
                w[p] = cfloat(0.f, 0.f);
                continue;
            }
            k[2 * p] = static_cast<float>(fi * static_cast<double>(nt) * dt);
            const double phase = -2.0 * kPi * (fi - fo) * t0;
            w[p] = std::complex<float>(std::polar(2.0 * jacobian * norm, phase));
        }
    }

    NufftOptions nopts;
    nopts.tolerance = options.tolerance;
    nufft_ = Nufft::create(be_, Shape{nt, nx2}, 1, coords, nopts);
    weight_ = be.to_device(weight);
    padded_ = be.zeros({nt, nx2});
    spectrum_ = be.empty({m, 1});
    dz_m_ = c * dt / 2.0;
    dx_m_ = g.pitch_m;
}

StoltMigration::~StoltMigration() = default;

void StoltMigration::migrate(const CArray& rf, CArray& image) {
    Backend& be = *be_;
    if (rf.shape() != Shape{nt_, nx_})
        throw std::invalid_argument("StoltMigration: RF data of shape " + rf.shape().str() + ", this migration is for " +
                                    Shape{nt_, nx_}.str());
    if (image.shape() != Shape{nt_, nx_} || image.device() != be.device())
        throw std::invalid_argument("StoltMigration: image of shape " + image.shape().str() + " on " +
                                    device_name(image.device()) + ", expected " + Shape{nt_, nx_}.str() + " on " +
                                    device_name(be.device()));
    // crop_pad_centred zero-fills the columns beyond the array (the lateral padding of step 4).
    be.crop_pad_centred(be.to_device(rf), padded_);
    nufft_->forward(padded_.reshaped({nt_, nx2_, 1}), spectrum_);
    CArray image2 = spectrum_.reshaped({nz2_, nx2_});
    be.mul(image2, weight_, image2);
    be.fft(image2, image2, 0x3u, FFTDirection::Inverse);
    be.crop_pad_centred(image2, image);
}

StoltImage stolt_migrate(const std::shared_ptr<Backend>& be, const CArray& rf, const PlaneWaveGeometry& geometry,
                         const StoltOptions& options) {
    if (!be) throw std::invalid_argument("stolt_migrate: no backend");
    if (rf.shape().rank() != 2)
        throw std::invalid_argument("stolt_migrate: RF data of shape " + rf.shape().str() +
                                    ", expected [samples, elements]");
    StoltMigration mig(be, rf.shape()[0], rf.shape()[1], geometry, options);
    StoltImage out;
    out.analytic = be->empty(rf.shape());
    mig.migrate(rf, out.analytic);
    out.dz_m = mig.dz_m();
    out.dx_m = mig.dx_m();
    return out;
}

RArray envelope(Backend& be, const CArray& analytic) {
    RArray out = be.host_real(analytic.shape());
    be.download_part(analytic, ComplexPart::Magnitude, out.data());
    return out;
}

}  // namespace larmor
