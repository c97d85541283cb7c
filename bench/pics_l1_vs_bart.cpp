// Larmor's l1-wavelet SENSE (core/recon/l1_wavelet_sense.h, FISTA) on the CPU backend side by side
// with BART's `pics -l1` (the Debian `bart` binary, run as a program) on the same data, the same
// coil maps, the same machine and in the same run.
//
// Two problems. 2D: tests/core_l1_recon_test.cpp's at 256 x 256: larmor-phantom's analytic phantom,
// 8 coils, a variable-density Poisson-disc mask over the image plane (larmor-phantom's pattern of a
// (ky, kz) plane, one slice of a 3D scan whose readout has been transformed) with a 24 x 24
// calibration block. 3D: larmor-phantom's 3D phantom, 64 x 64 x 32 (--volume), 8 coils, its Poisson disc over
// (ky, kz) with a 16 x 16 calibration block, every readout sampled; both tools then transform and
// threshold over all three axes. Each at R = 4 (accel 2 x 2) and R = 6 (2 x 3), with complex Gaussian
// noise of 10 % of the k-space RMS on every sample. Truth: the root sum of squares of the noiseless fully sampled coil
// images. Both tools get Larmor's ESPIRiT maps (default EspiritSettings, computed once per case) and
// solve
//     x = argmin 1/2 ||M F S x - y||^2 + lambda ||W x||_1
// by 50 FISTA iterations from x = 0. What BART 0.8.00 does with the flags below (its src/pics.c,
// src/grecon/italgo.c, src/grecon/optreg.c, src/iter/italgos.c, src/wavelet/wavelet.c at v0.8.00):
//   * -l1 -r r: one l1-wavelet term and nothing else, so italgo_choose picks FISTA (ADMM only with a
//     second term or TV, CG only with l2 terms); its data term is 1/2 ||A x - y||^2, the prox
//     threshold r times the step;
//   * --wavelet dau2: Daubechies with two vanishing moments, the four-tap filter of Larmor's W, but
//     BART's transform extends the signal symmetrically at the edges (a slightly redundant frame,
//     bands of (n + 3) / 2), stops once a band is below 16 (Larmor: before a band would drop below 16),
//     and soft-thresholds every band, the coarse one included (Larmor leaves the low band unshrunk);
//   * -n: no random cycle spinning. BART by default shifts the wavelet grid by a random offset every
//     iteration, which averages the blocking of a fixed grid away; Larmor does the same by default, so
//     the fixed-basis columns (BART -n, Larmor fixed_wavelet) and the shifted ones (BART's default,
//     Larmor as it ships) pair up;
//   * -e: step 0.95 / (largest eigenvalue of E^H E by 30 power iterations); Larmor's is
//     1 / (1.01 x its 20-iteration power method), so both take the step from the measured Lipschitz
//     constant (with ESPIRiT maps it is close to 1 and -e changes little);
//   * -p: the mask, as it is (pics would otherwise take the non-zero samples, the same here);
//   * -w s -S: the data scaling, set explicitly. pics otherwise divides k-space by its own estimate
//     (the 90th percentile, or the maximum, of a low-resolution RSS image of the central 32 x 32
//     k-space, optcom.c's estimate_scaling) and -r is absolute in those units. Here s = the RMS of
//     Larmor's zero-filled SENSE image E^H y, exactly the unit of Larmor's relative lambda (its
//     threshold is lambda x RMS(E^H y)), so BART's -r r and Larmor's lambda = r are the same
//     objective up to the wavelet differences above. -S multiplies the result by s again. BART's own
//     estimate is printed, so r translates to what plain `pics -l1 -r` would mean: r x s / estimate.
// Also odd in BART 0.8's loop: each iteration thresholds first and takes the gradient step last, so
// the image it writes is the last gradient step, not thresholded (Larmor returns the prox output).
//
// Quality: NRMSE of the magnitude against the truth after the real scale that fits it best,
// ||a |x| - t|| / ||t||, so that a global shrinkage by the threshold does not count; per lambda of a
// small sweep for each tool (Larmor's relative lambda, BART's -r under the scaling above), the best of
// each, and zero-filled RSS. At the lambdas both sweeps share, the NRMSE between the two images says
// how close the solvers come on the same objective. Larmor runs twice per lambda: as it ships
// (random cycle spinning, as BART without -n) and in one fixed wavelet basis (as BART -n).
//
// The rest of Larmor's reconstructions on the same data and maps, for the accuracy table of the
// README: zero-filled, CG-SENSE and CG-SPIRiT (20 CG iterations each), l1-SPIRiT by POCS and in its
// penalised form by FISTA (50 iterations each, the best over the same lambda grid; SPIRiT kernels 5^2
// from the calibration block with the chains' calibration weights, 0.001 in 2D and 0.0003 for the 3D
// kernels, each readout position its own 2D problem), the SPIRiT coil images combined with the maps
// (the spirit gadget's default).
//
// Options for other problems: --volume XxYxZ and --volume-acs N (the 3D geometry), --only 2d|3d and
// --accel 2x2|2x3 (a subset of the cases), --lambdas a,b,c (one grid for both tools), and
// --spirit-calibration / --spirit-beta (the 3D SPIRiT kernels' calibration weight, the penalised
// form's consistency weight), --wavelet-coarsest / --shift-seed (l1-wavelet SENSE's low band per
// axis and the seed of its random shifts).
//
// Timing (wall clock, median of --runs after one warm-up; lambda 0.01 on both sides): Larmor's
// solver alone (set-up with the power method + 50 iterations), Larmor's maps (ESPIRiT) + solver,
// BART's whole `pics` command (process start, file I/O, scaling, power method, 50 iterations; the maps
// come from the file) and BART's per-iteration time from the same command at 1 iteration,
// (t50 - t1) / 49, times 50. Whatever OMP_WAIT_POLICY this program runs under, bart inherits, so both
// tools run under the same one (the header names it; on 2 cores it moves BART's time a lot).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/bart_io.h"
#include "core/backend.h"
#include "core/coils/calibration_matrix.h"
#include "core/coils/espirit.h"
#include "core/coils/spirit.h"
#include "core/iter/alg.h"
#include "core/iter/cg.h"
#include "core/linops/algebra.h"
#include "core/linops/sampled_fft.h"
#include "core/linops/sense.h"
#include "core/recon/cg_spirit.h"
#include "core/recon/l1_spirit.h"
#include "core/recon/l1_spirit_fista.h"
#include "core/recon/l1_wavelet_sense.h"
#include "tools/phantom/phantom.h"

namespace {

using larmor::CArray;
using larmor::cfloat;
using larmor::RArray;
namespace fs = std::filesystem;
using larmor::bench::capture;
using larmor::bench::median_time;
using larmor::bench::read_cfl;
using larmor::bench::seconds;
using larmor::bench::shell;
using larmor::bench::write_cfl;

constexpr size_t kN = 256, kCoils = 8, kAcs = 24;
// The 3D problem: RO x E1 x E2 and its calibration block (--volume, --volume-acs). The default's block
// is 1/8 of the (ky, kz) plane and about 3/4 of the samples at R = 6; --volume 128x128x64 keeps the
// block and brings it to about 1/5 of the samples, as in a clinical 3D scan.
struct VolumeGeometry {
    size_t x = 64, y = 64, z = 32, acs = 16;
};
VolumeGeometry g_volume;
// SPIRiT's calibration weight for the 3D kernels and the penalised form's consistency weight beta
// (--spirit-calibration, --spirit-beta): the chains' values by default.
float g_spirit_calibration_3d = 0.0003f;  // config/l1spirit_3d.pbtxt's
float g_spirit_beta = larmor::L1SpiritFistaSettings{}.consistency_lambda;
// Larmor's l1-wavelet SENSE: the wavelet's low band per axis and the seed of its shifts
// (--wavelet-coarsest, --shift-seed); the chain's values by default.
size_t g_coarsest = larmor::L1WaveletSenseSettings{}.coarsest;
uint64_t g_shift_seed = larmor::L1WaveletSenseSettings{}.shift_seed;
constexpr int kIterations = 50;
constexpr double kNoise = 0.1;  // of the k-space RMS, as tests/core_l1_recon_test.cpp
// BART's -r under -w s means the same numbers as Larmor's relative lambda, so both tools sweep one
// grid, with steps of at most 2x from 0.005 to 0.05 (session 17's coarser grids left Larmor's
// best at the grid's end at R = 4, and both tools' best between points 2.5x apart).
// --lambdas sets one grid for both (a shorter sweep for a larger problem).
std::vector<float> g_larmor_lambdas{0.002f, 0.005f, 0.01f, 0.015f, 0.02f, 0.03f, 0.05f};
std::vector<float> g_bart_lambdas{0.001f, 0.002f, 0.005f, 0.01f, 0.015f, 0.02f, 0.03f, 0.05f};
constexpr float kTimedLambda = 0.01f;
// Larmor's reconstructions stop the wavelet at a 16 x 16 low band (4 levels at 256), the nearest to
// BART's rule (256 -> 129 -> 65 -> 33 -> 17 -> 10 with its (n + 3) / 2 bands), and shift the basis at
// random every iteration as BART does without -n. The first run of this program, with every level
// down to 2 x 2 and no shifts, gave best NRMSE at R = 4 0.0414 (0.0338 with 4 levels) against BART -n
// 0.0351 and BART 0.0286. A second Larmor column keeps one fixed basis, to set beside BART -n.

struct Case {
    int accel_y, accel_z;
    bool volume;  // the 3D problem
};
// --only 2d / 3d keeps one kind.
std::vector<Case> g_cases{{2, 2, false}, {2, 3, false}, {2, 2, true}, {2, 3, true}};

struct Options {
    int runs = 3;
    std::string bart = "bart";
    std::string json;
    bool keep = false;  // leave the temporary directory (inputs, every image) for inspection
};

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw std::invalid_argument("option " + a + " needs a value");
            return argv[++i];
        };
        if (a == "--keep") {
            o.keep = true;
        } else if (a == "--json") {
            o.json = value();
        } else if (a == "--bart") {
            o.bart = value();
        } else if (a == "--runs") {
            const std::string v = value();
            o.runs = std::atoi(v.c_str());
            if (o.runs < 1) throw std::invalid_argument("--runs " + v + ": need at least 1");
        } else if (a == "--volume") {
            const std::string v = value();
            VolumeGeometry g = g_volume;
            if (std::sscanf(v.c_str(), "%zux%zux%zu", &g.x, &g.y, &g.z) != 3 || g.x < 8 || g.y < 8 || g.z < 8)
                throw std::invalid_argument("--volume " + v + ": want XxYxZ, each at least 8");
            g_volume = g;
        } else if (a == "--volume-acs") {
            const std::string v = value();
            const long n = std::atol(v.c_str());
            if (n < 6) throw std::invalid_argument("--volume-acs " + v + ": need at least 6");
            g_volume.acs = size_t(n);
        } else if (a == "--lambdas") {
            const std::string v = value();
            std::vector<float> grid;
            std::stringstream in(v);
            for (std::string item; std::getline(in, item, ',');) {
                const float l = std::strtof(item.c_str(), nullptr);
                if (!(l > 0.f)) throw std::invalid_argument("--lambdas " + v + ": '" + item + "' is not a lambda > 0");
                grid.push_back(l);
            }
            if (grid.empty()) throw std::invalid_argument("--lambdas " + v + ": empty");
            g_larmor_lambdas = g_bart_lambdas = grid;
        } else if (a == "--spirit-calibration" || a == "--spirit-beta") {
            const std::string v = value();
            const float x = std::strtof(v.c_str(), nullptr);
            if (!(x > 0.f) || !std::isfinite(x)) throw std::invalid_argument(a + " " + v + ": want a value > 0");
            (a == "--spirit-beta" ? g_spirit_beta : g_spirit_calibration_3d) = x;
        } else if (a == "--wavelet-coarsest") {
            const std::string v = value();
            g_coarsest = std::stoul(v);
            if (g_coarsest < 2) throw std::invalid_argument("--wavelet-coarsest " + v + ": need at least 2");
        } else if (a == "--shift-seed") {
            g_shift_seed = std::stoull(value());
        } else if (a == "--accel") {
            const std::string v = value();
            int y = 0, z = 0;
            if (std::sscanf(v.c_str(), "%dx%d", &y, &z) != 2) throw std::invalid_argument("--accel " + v + ": want YxZ");
            std::vector<Case> kept;
            for (const Case& c : g_cases)
                if (c.accel_y == y && c.accel_z == z) kept.push_back(c);
            if (kept.empty()) throw std::invalid_argument("--accel " + v + ": no such case (2x2 or 2x3)");
            g_cases = kept;
        } else if (a == "--only") {
            const std::string v = value();
            if (v != "2d" && v != "3d") throw std::invalid_argument("--only " + v + ": want 2d or 3d");
            const bool volume = v == "3d";
            std::vector<Case> kept;
            for (const Case& c : g_cases)
                if (c.volume == volume) kept.push_back(c);
            g_cases = kept;
        } else {
            throw std::invalid_argument("unknown argument '" + a +
                                        "' (use --runs 3 --bart PATH --json FILE --keep --volume XxYxZ --volume-acs N "
                                        "--lambdas a,b,c --only 2d|3d --accel 2x3 --spirit-calibration L --spirit-beta B --wavelet-coarsest N "
                                        "--shift-seed S)");
        }
    }
    return o;
}

struct Data {
    larmor::Shape image;  // [N, N, 1] or [X, Y, Z]
    bool volume = false;
    CArray full;     // noiseless, host [image, C]
    CArray sampled;  // noisy and masked, host [image, C]
    RArray mask;     // host [image]
    double rate = 0; // sampled fraction
};

// Complex Gaussian noise of kNoise times the k-space RMS on every sampled sample (the test's stream).
void add_noise(Data& d) {
    double e = 0;
    for (size_t i = 0; i < d.full.size(); ++i) e += std::norm(d.full.data()[i]);
    const float sigma = float(kNoise * std::sqrt(e / double(d.full.size())));
    std::mt19937 rng(17);
    std::normal_distribution<float> gauss(0.f, sigma / std::sqrt(2.f));
    d.sampled = CArray::host(d.full.shape());
    const size_t n = d.mask.size();
    for (size_t i = 0; i < d.full.size(); ++i)
        d.sampled.data()[i] = d.mask.data()[i % n] * (d.full.data()[i] + cfloat(gauss(rng), gauss(rng)));
}

// The 3D problem: larmor-phantom's volume and its own Poisson-disc pattern over (ky, kz).
Data volume_data(int accel_y, int accel_z) {
    larmor::phantom::PhantomSpec s;
    s.dims = 3;
    s.nx = int(g_volume.x);
    s.ny = int(g_volume.y);
    s.nz = int(g_volume.z);
    s.coils = int(kCoils);
    s.fov_mm[0] = s.fov_mm[1] = 240.0;
    s.fov_mm[2] = 120.0;
    s.ro_oversampling = 1;
    s.sampling = larmor::phantom::Sampling::poisson;
    s.accel_y = accel_y;
    s.accel_z = accel_z;
    s.acs_lines = int(g_volume.acs);
    s.seed = 5;
    const std::vector<std::complex<float>> k = larmor::phantom::Phantom(s).kspace_all();
    Data d;
    d.image = {g_volume.x, g_volume.y, g_volume.z};
    d.volume = true;
    if (k.size() != d.image.size() * kCoils)
        throw std::runtime_error("3D phantom k-space has " + std::to_string(k.size()) + " samples, expected " +
                                 std::to_string(d.image.size() * kCoils));
    d.mask = RArray::host(d.image);
    std::fill(d.mask.data(), d.mask.data() + d.mask.size(), 0.f);
    size_t count = 0;
    for (const larmor::phantom::PhaseEncode& e : larmor::phantom::sampling_pattern(s))
        if (e.imaging || e.calibration) {
            for (size_t x = 0; x < g_volume.x; ++x) d.mask.data()[x + g_volume.x * (size_t(e.e1) + g_volume.y * size_t(e.e2))] = 1.f;
            ++count;
        }
    d.rate = double(count) / double(g_volume.y * g_volume.z);
    d.full = CArray::host({g_volume.x, g_volume.y, g_volume.z, kCoils});
    std::copy(k.begin(), k.end(), d.full.data());
    add_noise(d);
    return d;
}

// tests/core_l1_recon_test.cpp's poisson_data at N = 256: the same phantom geometry, pattern seed
// and noise stream, so the two agree on what "R = 4" and "10 % noise" are.
Data poisson_data(int accel_y, int accel_z) {
    larmor::phantom::PhantomSpec s;
    s.nx = s.ny = int(kN);
    s.coils = int(kCoils);
    s.fov_mm[0] = s.fov_mm[1] = 240.0;
    s.ro_oversampling = 1;
    const std::vector<std::complex<float>> k = larmor::phantom::Phantom(s).kspace_all();
    if (k.size() != kN * kN * kCoils)
        throw std::runtime_error("phantom k-space has " + std::to_string(k.size()) + " samples, expected " +
                                 std::to_string(kN * kN * kCoils));

    larmor::phantom::PhantomSpec p;  // the (ky, kz) plane of a 3D scan
    p.dims = 3;
    p.nx = 16;
    p.ny = p.nz = int(kN);
    p.fov_mm[2] = 240.0;
    p.sampling = larmor::phantom::Sampling::poisson;
    p.accel_y = accel_y;
    p.accel_z = accel_z;
    p.acs_lines = int(kAcs);
    p.seed = 5;
    Data d;
    d.image = {kN, kN, 1};
    d.mask = RArray::host({kN, kN, 1});
    std::fill(d.mask.data(), d.mask.data() + d.mask.size(), 0.f);
    size_t count = 0;
    for (const larmor::phantom::PhaseEncode& e : larmor::phantom::sampling_pattern(p))
        if (e.imaging || e.calibration) d.mask.data()[size_t(e.e1) + kN * size_t(e.e2)] = 1.f, ++count;
    d.rate = double(count) / double(kN * kN);

    d.full = CArray::host({kN, kN, 1, kCoils});
    std::copy(k.begin(), k.end(), d.full.data());
    add_noise(d);
    return d;
}

Data case_data(const Case& c) { return c.volume ? volume_data(c.accel_y, c.accel_z) : poisson_data(c.accel_y, c.accel_z); }

// Root sum of squares over the coils of images [voxels, C], or the magnitude of one image.
std::vector<double> magnitude(const cfloat* x, size_t count, size_t n) {
    const size_t nc = count / n;
    std::vector<double> out(n, 0.0);
    for (size_t c = 0; c < nc; ++c)
        for (size_t i = 0; i < n; ++i) out[i] += std::norm(std::complex<double>(x[i + n * c]));
    for (double& v : out) v = std::sqrt(v);
    return out;
}

std::vector<double> rss_of_kspace(larmor::Backend& cpu, const Data& d, const CArray& kspace) {
    CArray images = cpu.empty(kspace.shape());
    cpu.fft(kspace, images, d.volume ? 0b111u : 0b011u, larmor::FFTDirection::Inverse);
    const CArray h = cpu.to_host(images);
    return magnitude(h.data(), h.size(), d.image.size());
}

// ||a x - t|| / ||t|| with the real a = <x, t> / <x, x> that minimises it: both tools return the
// image shrunk by their threshold and in their own units, which a global factor absorbs.
double nrmse_scaled(const std::vector<double>& x, const std::vector<double>& t) {
    double xt = 0, xx = 0, tt = 0;
    for (size_t i = 0; i < x.size(); ++i) xt += x[i] * t[i], xx += x[i] * x[i], tt += t[i] * t[i];
    const double a = xx > 0 ? xt / xx : 0.0;
    double rr = 0;
    for (size_t i = 0; i < x.size(); ++i) rr += (a * x[i] - t[i]) * (a * x[i] - t[i]);
    return tt > 0 ? std::sqrt(rr / tt) : 0.0;
}

// ESPIRiT on the central 24 x 24 block, the test's way: kernels, then maps on the full grid; 3D: the
// chains' way, per readout position from the 16 x 16 block (coils::espirit_maps_3d).
CArray compute_maps(larmor::Backend& cpu, const Data& d) {
    if (d.volume) {
        const size_t y0 = g_volume.y / 2 - g_volume.acs / 2, z0 = g_volume.z / 2 - g_volume.acs / 2;
        return larmor::coils::espirit_maps_3d(cpu, d.sampled, y0, y0 + g_volume.acs, z0, z0 + g_volume.acs,
                                              larmor::coils::EspiritSettings{})
            .maps.reshaped({g_volume.x, g_volume.y, g_volume.z, kCoils});
    }
    const CArray block = larmor::coils::calibration_block(d.sampled, kN / 2 - kAcs / 2, kN / 2 + kAcs / 2, kAcs, kAcs);
    const larmor::coils::EspiritSettings es;
    const larmor::coils::EspiritMaps m =
        larmor::coils::espirit_maps(cpu, larmor::coils::espirit_kernels(cpu, block, es), kN, kN, es);
    return m.maps.reshaped({kN, kN, 1, kCoils});
}

larmor::L1WaveletSense solve(const std::shared_ptr<larmor::Backend>& cpu, const Data& d, const CArray& maps, float lambda,
                             bool cycle_spinning = true) {
    larmor::L1WaveletSenseSettings s;
    s.lambda = lambda;
    s.iterations = kIterations;
    s.cycle_spinning = cycle_spinning;
    s.coarsest = g_coarsest;
    s.shift_seed = g_shift_seed;
    larmor::L1WaveletSense p = larmor::l1_wavelet_sense(cpu, d.sampled, d.mask, maps, s);
    larmor::run(*p.solver);
    return p;
}

std::string num(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

// A lambda as it was typed (0.005, not the float's 0.00499999989).
std::string lam(float v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", double(v));
    return buf;
}

std::string fixed(double v, int digits) {
    std::ostringstream s;
    s.setf(std::ios::fixed);
    s.precision(digits);
    s << v;
    return s.str();
}

// `bart pics` on the case's files: l1-wavelet SENSE by FISTA (see the top of the file for each flag).
// cycle_spin: BART's default random wavelet shifts instead of -n.
std::string pics_command(const Options& o, const fs::path& dir, float r, int iterations, double scale, bool cycle_spin,
                         const std::string& out) {
    std::ostringstream c;
    c << "OMP_NUM_THREADS=2 " << o.bart << " pics -l1 -r " << lam(r) << " -i " << iterations << " -e"
      << (cycle_spin ? "" : " -n") << " --wavelet dau2 -w " << num(scale) << " -S -p " << (dir / "pattern").string()
      << ' ' << (dir / "kspace").string() << ' ' << (dir / "sens").string() << ' ' << (dir / out).string() << " > "
      << (dir / (out + ".log")).string() << " 2>&1";
    return c.str();
}

// BART's own data scale for this k-space (what pics would divide by without -w): its debug output at
// level 3 names it. One iteration is enough; 0 when the line is not found.
std::string ecalib_command(const Options& o, const fs::path& dir) {
    const larmor::coils::EspiritSettings es;
    std::ostringstream c;
    c << "OMP_NUM_THREADS=2 " << o.bart << " ecalib -m 1 -k " << es.kernel << " -r " << es.calibration << " -t "
      << num(es.threshold) << " -c " << num(es.crop) << ' ' << (dir / "kspace").string() << ' '
      << (dir / "bart_sens").string() << " > " << (dir / "ecalib.log").string() << " 2>&1";
    return c.str();
}

double bart_own_scale(const Options& o, const fs::path& dir) {
    const std::string log = capture("OMP_NUM_THREADS=2 " + o.bart + " pics -d 3 -l1 -r 0.01 -i 1 -n -p " +
                                    (dir / "pattern").string() + ' ' + (dir / "kspace").string() + ' ' +
                                    (dir / "sens").string() + ' ' + (dir / "out_autoscale").string() + " 2>&1");
    const std::string key = "Inverse scaling of the data:";
    const size_t at = log.find(key);
    return at == std::string::npos ? 0.0 : std::atof(log.c_str() + at + key.size());
}

struct Point {
    float lambda = 0;
    double nrmse = 0;
};

// The other reconstructions on the same data (see the top of the file).
struct Others {
    double cg_sense = 0, cg_spirit = 0;
    std::vector<Point> pocs, fista;  // l1-SPIRiT per lambda
};

// The SPIRiT problem of a case: k-space with the readout transformed for 3D, the mask and G.
struct SpiritInput {
    CArray kspace, g;
    RArray mask;
};

SpiritInput spirit_input(larmor::Backend& cpu, const Data& d) {
    SpiritInput in;
    larmor::coils::SpiritSettings ks;
    if (d.volume) {
        ks.lambda = g_spirit_calibration_3d;
        const size_t y0 = g_volume.y / 2 - g_volume.acs / 2, z0 = g_volume.z / 2 - g_volume.acs / 2;
        in.g = larmor::coils::spirit_image_kernels_3d(cpu, d.sampled, y0, y0 + g_volume.acs, z0, z0 + g_volume.acs, 24, ks);
        in.kspace = cpu.empty(d.sampled.shape());
        cpu.fft(d.sampled, in.kspace, 0b001u, larmor::FFTDirection::Inverse);
        in.mask = d.mask;
    } else {
        ks.lambda = 0.001f;  // config/spirit_2d.pbtxt's
        const CArray block =
            larmor::coils::calibration_block(d.sampled, kN / 2 - kAcs / 2, kN / 2 + kAcs / 2, kAcs, kAcs);
        in.g = larmor::coils::spirit_image_kernels(cpu, larmor::coils::spirit_kernels(cpu, block, ks), kN, kN);
        in.kspace = d.sampled;
        in.mask = d.mask.reshaped({kN, kN});
    }
    return in;
}

// sum_c conj(S_c) x_c: coil images [image, C] to one image, its magnitude.
std::vector<double> combined(larmor::Backend& cpu, const CArray& maps, const CArray& images, const Data& d) {
    CArray plane = cpu.empty(d.image);
    cpu.reduce_conj_mul(maps.reshaped(images.shape()), images, plane);
    const CArray h = cpu.to_host(plane);
    return magnitude(h.data(), h.size(), h.size());
}

Others others(const std::shared_ptr<larmor::Backend>& cpu, const Data& d, const CArray& maps,
              const std::vector<double>& truth) {
    Others o;
    larmor::CGOptions cg;
    cg.max_iterations = 20;
    const larmor::Shape ks = d.sampled.shape();
    const larmor::AxisMask axes = d.volume ? 0b111u : 0b011u;
    const larmor::LinOp e = larmor::compose(larmor::sampled_fft(cpu, ks, axes, d.mask), larmor::sense(cpu, maps));
    CArray x = cpu->zeros(d.image);
    auto sense_cg = larmor::cg_least_squares(e, d.sampled, x, 0.f, cg);
    larmor::run(*sense_cg);
    const CArray hx = cpu->to_host(x);
    o.cg_sense = nrmse_scaled(magnitude(hx.data(), hx.size(), hx.size()), truth);

    const SpiritInput in = spirit_input(*cpu, d);
    larmor::CgSpirit cs = larmor::cg_spirit(cpu, in.kspace, in.mask, in.g, 1.f, cg);
    larmor::run(*cs.solver);
    o.cg_spirit = nrmse_scaled(combined(*cpu, maps, cs.images, d), truth);
    for (float lambda : g_larmor_lambdas) {
        larmor::L1SpiritSettings ps;
        ps.lambda = lambda;
        ps.iterations = kIterations;
        larmor::L1Spirit p = larmor::l1_spirit(cpu, in.kspace, in.mask, in.g, ps);
        larmor::run(*p.solver);
        o.pocs.push_back({lambda, nrmse_scaled(combined(*cpu, maps, p.images, d), truth)});
        larmor::L1SpiritFistaSettings fs;
        fs.lambda = lambda;
        fs.iterations = kIterations;
        fs.consistency_lambda = g_spirit_beta;
        larmor::L1SpiritFista f = larmor::l1_spirit_fista(cpu, in.kspace, in.mask, in.g, fs);
        larmor::run(*f.solver);
        o.fista.push_back({lambda, nrmse_scaled(combined(*cpu, maps, f.images, d), truth)});
    }
    return o;
}

struct Result {
    Case c{};
    double rate = 0;
    double zero_filled = 0;
    double scale = 0;       // RMS(E^H y): BART's -w, Larmor's unit of lambda
    double bart_scale = 0;  // what BART would have used
    std::vector<Point> larmor, larmor4, bart, bart_spin;  // larmor4: one fixed wavelet basis (no cycle spinning)
    // NRMSE between Larmor's (default, and fixed basis) and BART's (-n) images at a shared lambda.
    std::vector<Point> agreement, agreement4;
    Others others;
    double larmor_solver = 0, larmor_total = 0, bart_total = 0, bart_iter = 0;
    double bart_ecalib = 0;  // BART computing its own maps from the same k-space (ecalib), for the end-to-end time
};

Point best(const std::vector<Point>& v) {
    return *std::min_element(v.begin(), v.end(), [](const Point& a, const Point& b) { return a.nrmse < b.nrmse; });
}

Result bench(const Options& o, const Case& cs, const fs::path& root) {
    const fs::path dir = root / ((cs.volume ? "3d_accel" : "accel") + std::to_string(cs.accel_y) + "x" +
                                 std::to_string(cs.accel_z));
    fs::create_directory(dir);
    auto cpu = larmor::make_cpu_backend();
    Result r;
    r.c = cs;
    const Data d = case_data(cs);
    const size_t n = d.image.size();
    r.rate = d.rate;
    const std::vector<double> truth = rss_of_kspace(*cpu, d, d.full);
    r.zero_filled = nrmse_scaled(rss_of_kspace(*cpu, d, d.sampled), truth);

    const CArray maps = compute_maps(*cpu, d);
    CArray pattern = CArray::host(d.image);
    for (size_t i = 0; i < pattern.size(); ++i) pattern.data()[i] = cfloat(d.mask.data()[i], 0.f);
    write_cfl(dir / "kspace", d.sampled);
    write_cfl(dir / "sens", maps);
    write_cfl(dir / "pattern", pattern);

    std::vector<std::vector<double>> larmor_images, larmor4_images;
    for (float lambda : g_larmor_lambdas) {
        const larmor::L1WaveletSense p = solve(cpu, d, maps, lambda);
        const CArray h = cpu->to_host(p.image);
        larmor_images.push_back(magnitude(h.data(), h.size(), n));
        r.larmor.push_back({lambda, nrmse_scaled(larmor_images.back(), truth)});
        if (lambda > 0.f) r.scale = double(p.threshold) / double(lambda);  // the threshold is lambda x RMS(E^H y)
        if (o.keep) write_cfl(dir / ("larmor_" + lam(lambda)), h);
        const larmor::L1WaveletSense p4 = solve(cpu, d, maps, lambda, false);
        const CArray h4 = cpu->to_host(p4.image);
        larmor4_images.push_back(magnitude(h4.data(), h4.size(), n));
        r.larmor4.push_back({lambda, nrmse_scaled(larmor4_images.back(), truth)});
        if (o.keep) write_cfl(dir / ("larmor4_" + lam(lambda)), h4);
    }
    if (!(r.scale > 0)) throw std::runtime_error("the zero-filled image E^H y is zero: no scale for BART's -w");
    r.others = others(cpu, d, maps, truth);
    r.bart_scale = bart_own_scale(o, dir);

    for (size_t i = 0; i < g_bart_lambdas.size(); ++i) {
        const float lambda = g_bart_lambdas[i];
        for (bool spin : {false, true}) {
            const std::string out = (spin ? "bart_spin_" : "bart_") + std::to_string(i);
            shell(pics_command(o, dir, lambda, kIterations, r.scale, spin, out));
            const std::vector<double> image = magnitude(read_cfl(dir / out, n).data(), n, n);
            (spin ? r.bart_spin : r.bart).push_back({lambda, nrmse_scaled(image, truth)});
            if (spin) continue;
            for (size_t j = 0; j < g_larmor_lambdas.size(); ++j)
                if (g_larmor_lambdas[j] == lambda) {
                    r.agreement.push_back({lambda, nrmse_scaled(image, larmor_images[j])});
                    r.agreement4.push_back({lambda, nrmse_scaled(image, larmor4_images[j])});
                }
        }
    }

    r.larmor_solver = median_time(o.runs, [&] { solve(cpu, d, maps, kTimedLambda); });
    r.larmor_total = median_time(o.runs, [&] { solve(cpu, d, compute_maps(*cpu, d), kTimedLambda); });
    const std::string cmd = pics_command(o, dir, kTimedLambda, kIterations, r.scale, false, "timed"),
                      cmd1 = pics_command(o, dir, kTimedLambda, 1, r.scale, false, "timed1");
    std::cout << "  " << cmd << '\n' << std::flush;
    const double t1 = median_time(o.runs, [&] { shell(cmd1); });
    r.bart_total = median_time(o.runs, [&] { shell(cmd); });
    r.bart_iter = (r.bart_total - t1) / (kIterations - 1) * kIterations;
    // Larmor's end-to-end time includes its maps; BART's pics reads them from a file. BART's own maps
    // from the same k-space, with Larmor's ESPIRiT settings (kernel 6, calibration at most 24 per axis,
    // threshold 0.02, crop 0.8, one set), make BART's end-to-end time (its 3D calibration is a 3D one;
    // Larmor's decouples the readout positions first).
    const std::string ecalib = ecalib_command(o, dir);
    std::cout << "  " << ecalib << '\n' << std::flush;
    r.bart_ecalib = median_time(o.runs, [&] { shell(ecalib); });
    return r;
}

std::string cpu_model() {
    std::ifstream f("/proc/cpuinfo");
    for (std::string l; std::getline(f, l);)
        if (l.rfind("model name", 0) == 0) return l.substr(l.find(':') + 2);
    return "unknown";
}

// A directory under /tmp removed with everything in it when the run ends, however it ends.
struct TempDir {
    fs::path path;
    TempDir() {
        std::string tmpl = (fs::temp_directory_path() / "larmor-bart-l1-XXXXXX").string();
        if (!mkdtemp(tmpl.data())) throw std::runtime_error("cannot create a temporary directory from " + tmpl);
        path = tmpl;
    }
    bool keep = false;
    ~TempDir() {
        if (keep) return;
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
};

std::string now_utc() {
    const std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
}

std::string label(const Result& r) {
    return (r.c.volume ? "3D " + std::to_string(g_volume.x) + "x" + std::to_string(g_volume.y) + "x" + std::to_string(g_volume.z) : std::string("2D 256x256")) + " R=" + fixed(1.0 / r.rate, 2) + " (" +
           std::to_string(r.c.accel_y) + "x" + std::to_string(r.c.accel_z) + ")";
}

// The NRMSE at `lambda` in v, or a dash where that tool's sweep has no such lambda.
std::string cell(const std::vector<Point>& v, float lambda) {
    for (const Point& p : v)
        if (p.lambda == lambda) return fixed(p.nrmse, 4);
    return "-";
}

std::string json_points(const std::vector<Point>& v) {
    std::ostringstream j;
    j << '[';
    for (size_t i = 0; i < v.size(); ++i)
        j << (i ? ", " : "") << "{\"lambda\": " << lam(v[i].lambda) << ", \"nrmse\": " << v[i].nrmse << '}';
    j << ']';
    return j.str();
}

}  // namespace

int main(int argc, char** argv) try {
    const Options o = parse(argc, argv);
    const std::string version = capture(o.bart + " version 2>&1");
    if (version.empty()) throw std::runtime_error("'" + o.bart + " version' printed nothing: is BART installed?");

    TempDir tmp;
    tmp.keep = o.keep;
    if (o.keep) std::cout << "keeping " << tmp.path.string() << '\n';

    const unsigned cores = std::thread::hardware_concurrency();
    const std::string model = cpu_model(), date = now_utc();
    const char* policy_env = std::getenv("OMP_WAIT_POLICY");  // inherited by bart through std::system
    const std::string policy = policy_env ? policy_env : "unset";
    std::vector<Result> results;
    for (const Case& c : g_cases) {
        std::cout << (c.volume ? "3D " : "2D ") << "accel " << c.accel_y << "x" << c.accel_z << " ...\n" << std::flush;
        results.push_back(bench(o, c, tmp.path));
    }

    std::vector<float> lambdas = g_larmor_lambdas;
    lambdas.insert(lambdas.end(), g_bart_lambdas.begin(), g_bart_lambdas.end());
    std::sort(lambdas.begin(), lambdas.end());
    lambdas.erase(std::unique(lambdas.begin(), lambdas.end()), lambdas.end());

    std::cout << "\nl1-wavelet SENSE, 2D " << kN << "x" << kN << " with " << kAcs << "x" << kAcs << " ACS and 3D " << g_volume.x
              << "x" << g_volume.y << "x" << g_volume.z << " with " << g_volume.acs << "x" << g_volume.acs << " ACS, " << kCoils
              << " coils, Poisson disc, noise " << kNoise * 100 << " % of the k-space RMS, Larmor ESPIRiT maps for both, "
              << kIterations << " FISTA iterations from 0; median of " << o.runs << " runs (wall clock)\n"
              << "machine: " << cores << " cores, " << model << "; BART " << version << "; " << date
              << "; OMP_WAIT_POLICY " << policy << " (both tools)\n"
              << "BART: pics -l1 -r LAMBDA -i " << kIterations << " -e -n --wavelet dau2 -w s -S -p pattern, s = RMS of "
                 "E^H y (Larmor's unit of lambda):";
    for (const Result& r : results)
        std::cout << ' ' << label(r) << " s = " << num(r.scale) << " (BART's own estimate " << num(r.bart_scale) << ")";
    std::cout << "\n\nNRMSE of the magnitude against the noiseless RSS truth after the best real scale, per lambda (Larmor: "
                 "relative; BART: -r under -w s). Larmor fixed: one wavelet basis, no random shifts (as BART -n); BART cs: BART's "
                 "default random cycle spinning (no -n); X vs BART -n: the two images against each other.\n";
    for (const Result& r : results) {
        std::cout << '\n' << label(r) << ", sampled " << fixed(100.0 * r.rate, 1) << " %:\n\n"
                  << "| lambda | Larmor | Larmor fixed | BART -n | BART cs | Larmor vs BART -n | Larmor fixed vs BART -n |\n"
                  << "|---|---|---|---|---|---|---|\n";
        for (float l : lambdas)
            std::cout << "| " << lam(l) << " | " << cell(r.larmor, l) << " | " << cell(r.larmor4, l) << " | "
                      << cell(r.bart, l) << " | " << cell(r.bart_spin, l) << " | " << cell(r.agreement, l) << " | "
                      << cell(r.agreement4, l) << " |\n";
        std::cout << "| best |";
        for (const auto* v : {&r.larmor, &r.larmor4, &r.bart, &r.bart_spin}) {
            const Point b = best(*v);
            std::cout << ' ' << fixed(b.nrmse, 4) << " (" << lam(b.lambda) << ") |";
        }
        std::cout << " | |\n| zero-filled RSS | " << fixed(r.zero_filled, 4) << " | | | | | |\n";
    }

    std::cout << "\nEvery Larmor reconstruction on the same data and maps, NRMSE as above (l1 methods: the best over the "
                 "lambda grid, its lambda in brackets; SPIRiT coil images combined with the maps):\n\n"
              << "| case | zero-filled | CG-SENSE | CG-SPIRiT | l1-SPIRiT POCS | l1-SPIRiT FISTA | l1-wavelet SENSE | BART pics "
                 "-l1 |\n|---|---|---|---|---|---|---|---|\n";
    for (const Result& r : results) {
        const Point pocs = best(r.others.pocs), fista = best(r.others.fista), sense = best(r.larmor),
                    bart = best(r.bart_spin);
        std::cout << "| " << label(r) << " | " << fixed(r.zero_filled, 4) << " | " << fixed(r.others.cg_sense, 4) << " | "
                  << fixed(r.others.cg_spirit, 4) << " | " << fixed(pocs.nrmse, 4) << " (" << lam(pocs.lambda) << ") | "
                  << fixed(fista.nrmse, 4) << " (" << lam(fista.lambda) << ") | " << fixed(sense.nrmse, 4) << " ("
                  << lam(sense.lambda) << ") | " << fixed(bart.nrmse, 4) << " (" << lam(bart.lambda) << ") |\n";
    }

    std::cout << "\nTimes at lambda " << lam(kTimedLambda) << " (Larmor as it ships; BART with -n):\n\n"
              << "| case | Larmor solver (s) | Larmor maps+solver (s) | BART pics (s) | BART ecalib (s) | BART " << kIterations
              << " x per-iter (s) | speed-up (pics / maps+solver) | speed-up (ecalib+pics / maps+solver) | speed-up "
                 "(iter / solver) |\n"
              << "|---|---|---|---|---|---|---|---|---|\n";
    for (const Result& r : results)
        std::cout << "| " << label(r) << " | " << fixed(r.larmor_solver, 3) << " | " << fixed(r.larmor_total, 3) << " | "
                  << fixed(r.bart_total, 3) << " | " << fixed(r.bart_ecalib, 3) << " | " << fixed(r.bart_iter, 3) << " | "
                  << fixed(r.bart_total / r.larmor_total, 2) << "x | "
                  << fixed((r.bart_ecalib + r.bart_total) / r.larmor_total, 2) << "x | "
                  << fixed(r.bart_iter / r.larmor_solver, 2) << "x |\n";

    if (!o.json.empty()) {
        std::ofstream j(o.json);
        j << "{\n  \"machine\": {\"nproc\": " << cores << ", \"cpu\": \"" << model << "\", \"date\": \"" << date
          << "\", \"bart\": \"" << version << "\", \"omp_wait_policy\": \"" << policy << "\"},\n  \"n\": " << kN
          << ", \"coils\": " << kCoils << ", \"iterations\": " << kIterations << ", \"noise\": " << kNoise
          << ", \"timed_lambda\": " << lam(kTimedLambda)
          << ", \"runs\": " << o.runs << ",\n  \"results\": [\n";
        for (size_t i = 0; i < results.size(); ++i) {
            const Result& r = results[i];
            j << "    {\"volume\": " << (r.c.volume ? "true" : "false") << ", \"accel\": [" << r.c.accel_y << ", " << r.c.accel_z << "], \"rate\": " << r.rate
              << ", \"scale\": " << r.scale << ", \"bart_own_scale\": " << r.bart_scale
              << ", \"zero_filled_nrmse\": " << r.zero_filled << ",\n     \"larmor\": " << json_points(r.larmor)
              << ",\n     \"bart\": " << json_points(r.bart) << ",\n     \"bart_cycle_spinning\": " << json_points(r.bart_spin)
              << ",\n     \"larmor_fixed_basis\": " << json_points(r.larmor4)
              << ",\n     \"larmor_vs_bart\": " << json_points(r.agreement)
              << ",\n     \"larmor_fixed_basis_vs_bart\": " << json_points(r.agreement4)
              << ",\n     \"cg_sense_nrmse\": " << r.others.cg_sense << ", \"cg_spirit_nrmse\": " << r.others.cg_spirit
              << ",\n     \"l1_spirit_pocs\": " << json_points(r.others.pocs)
              << ",\n     \"l1_spirit_fista\": " << json_points(r.others.fista) << ",\n     \"larmor_solver_s\": " << r.larmor_solver
              << ", \"larmor_maps_solver_s\": " << r.larmor_total << ", \"bart_pics_s\": " << r.bart_total
              << ", \"bart_ecalib_s\": " << r.bart_ecalib
              << ", \"bart_per_iteration_x" << kIterations << "_s\": " << r.bart_iter << '}'
              << (i + 1 < results.size() ? ",\n" : "\n");
        }
        j << "  ]\n}\n";
        if (!j) throw std::runtime_error("cannot write --json file " + o.json);
    }
    return 0;
} catch (const std::exception& e) {
    std::cerr << "pics_l1_vs_bart: " << e.what() << '\n';
    return 1;
}
