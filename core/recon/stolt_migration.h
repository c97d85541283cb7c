#pragma once
// Plane-wave ultrasound imaging by Stolt's f-k migration (Stolt, Geophysics 43:23, 1978), in the
// plane-wave form of Garcia et al., "Stolt's f-k migration for plane wave ultrasound imaging", IEEE
// TUFFC 60:1853 (2013), run as the GPU pipeline of Sumanaweera & Liu, GPU Gems 2 ch. 48.5.3: a 2D
// FFT of the element signals, the frequency remap f_t -> f_z, an inverse 2D FFT and the envelope.
//
// Geometry (the conventions every caller shares):
//  * rf is [Nt, Nx]: time sample n of element e at n + e Nt (time fastest, one column per element).
//    Sample n is taken at t = n / fs after the transmit, t = 0 being the instant the plane wavefront
//    crosses the array (z = 0).
//  * Element e sits at x_e = (e - (Nx - 1) / 2) pitch, the array centred on x = 0.
//  * The image is [Nz, Nx] with Nz = Nt: column j is the line below element j (x = x_j), row i is at
//    depth z_i = i dz, dz = c / (2 fs) (one time sample of the two-way path at normal incidence).
#include <cstddef>
#include <memory>

#include "core/backend.h"

namespace larmor {

struct PlaneWaveGeometry {
    double pitch_m = 0.3e-3;        // element spacing
    double sampling_hz = 20e6;      // fs
    double sound_speed_m_s = 1540;  // c
    double angle_rad = 0.0;         // transmit steering angle; only 0 (unsteered) is supported
};

// The f_t -> f_z remap (output temporal frequency f' = c k_z / 2, lateral wavenumber k_x in cycles/m).
enum class StoltMapping {
    // Garcia et al. 2013, eqs. 7-10: the exploding-reflector model with v = c / sqrt(2) at 0 deg,
    // f = sqrt(f'^2 + v^2 k_x^2). The two-way time is fitted by a hyperbola, exact to second order in
    // k_x: positions are right, the widest angles are slightly defocused.
    ExplodingReflector,
    // The exact 0-deg relation of a plane-wave transmit and a spherical echo (Lu, IEEE TUFFC 44:839,
    // 1997; Cheng & Lu, IEEE TUFFC 53:1990, 2006): k_z = f / c + sqrt(f^2 / c^2 - k_x^2), i.e.
    // f = f' + c^2 k_x^2 / (4 f'), defined where |k_x| <= k_z.
    Exact,
};

struct StoltOptions {
    StoltMapping mapping = StoltMapping::ExplodingReflector;
    // Accuracy of the remap (the NUFFT's relative L2 tolerance, core/linops/nufft.h).
    double tolerance = 1e-4;
};

struct StoltImage {
    // Analytic image [Nz, Nx] on the backend's device: its modulus is the envelope (B-mode before log
    // compression), its real part the migrated RF.
    CArray analytic;
    double dz_m = 0.0;  // depth of row i = i dz
    double dx_m = 0.0;  // lateral spacing (= pitch); column j at (j - (Nx - 1) / 2) dx
};

class Nufft;

// The migration of shots of one shape and geometry: the remap's points, weights and workspaces are
// built once (the NUFFT plan included), so a stream of shots allocates nothing per shot. Used by one
// thread at a time (its workspaces are not shared).
class StoltMigration {
public:
    // Throws std::invalid_argument naming the offending value for fewer than 2 samples or elements,
    // non-positive or non-finite geometry, or a non-zero steering angle.
    StoltMigration(std::shared_ptr<Backend> be, size_t samples, size_t elements, const PlaneWaveGeometry& geometry,
                   const StoltOptions& options = {});
    ~StoltMigration();
    StoltMigration(const StoltMigration&) = delete;
    StoltMigration& operator=(const StoltMigration&) = delete;

    // rf: [samples, elements] on the backend's device (or the host): real RF data held as complex
    // (imaginary part zero) or already analytic (I/Q) data. image: [samples, elements] on the device,
    // the caller's (never rebound), overwritten with the analytic image.
    void migrate(const CArray& rf, CArray& image);

    double dz_m() const { return dz_m_; }
    double dx_m() const { return dx_m_; }

private:
    std::shared_ptr<Backend> be_;
    size_t nt_, nx_, nx2_, nz2_;
    double dz_m_, dx_m_;
    std::shared_ptr<Nufft> nufft_;
    CArray weight_, padded_, spectrum_;
};

// One shot: StoltMigration built for rf's shape, run once. Throws std::invalid_argument as the class
// does, and for rf of rank != 2.
StoltImage stolt_migrate(const std::shared_ptr<Backend>& be, const CArray& rf, const PlaneWaveGeometry& geometry,
                         const StoltOptions& options = {});

// The envelope |analytic| downloaded to the host, [Nz, Nx].
RArray envelope(Backend& be, const CArray& analytic);

}  // namespace larmor
