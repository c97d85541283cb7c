// Larmor's exact adjoint NUDFT ("FHd", core/linops/nudft.h) and its regularised least-squares
// reconstruction by CG with the Toeplitz normal operator (core/recon/toeplitz_cg.h), side by side with
// BART (the Debian `bart` binary) on the same data, the same machine and in the same run, on the CPU;
// scripts/bart-fhd-compare.sh runs it.
//
// The problem (2D, one coil): an N x N image (default 128), S radial spokes (default 128, golden-angle
// as in nufft_vs_bart) of P samples (default 256) at k = (i - P/2) N / P, i.e. k in [-N/2, N/2) cycles
// per FOV: BART's unit ("pixel_size / FOV", the one its nufft warns about) and half-open range. The
// data are Larmor's exact forward NUDFT (Dirac basis, accurate sin/cos) of a smooth phantom (an
// ellipse and a Gaussian bump with a linear phase, as nufft_vs_bart), so the true image is known and
// neither tool sees gridding error in its input. Both tools get the same coordinates (.cfl:
// column-major complex64 plus a .hdr text file; BART's trajectory is [3, samples, spokes], z = 0).
//
// 1. The exact adjoint F^H d: Larmor's nudft adjoint against `bart nufft -a -s` (-s: BART's DFT,
//    src/noncart/nudft.c, an explicit sum over samples of exp(i 2 pi k (x - N/2) / N) with no
//    normalisation). Ours carries N^{-1/2}, so the complex least-squares scale that fits BART's image
//    to ours should come out as 1/N^{1/2} = 1/sqrt(N*N) and real: it is printed next to the NRMSE.
// 2. x = argmin ||F x - d||^2 + lambda ||x||^2 by 30 CG iterations from 0 (tolerance 0):
//    Larmor: toeplitz_cg (Dirac basis, exact FHd, exact Q, Toeplitz normal, identity regulariser).
//      Its lambda is relative to mean diag(F^H F) = q(0) = M / N^2 (Dirac, W = I), so the absolute
//      one in the normal equations (F^H F + lambda_abs I) x = F^H d is lambda_rel M / N^2.
//    BART: `pics -l2 -r lambda_B -i 30 -w 1 -S -t traj data sens out`, sens = ones. With only an l2
//      term pics picks CG on (A^H A + lambda_B I) x = A^H d (src/grecon/italgo.c: l2lambda = the
//      regulariser's lambda); -t builds its NUFFT with Toeplitz embedding on (nufft_conf: toeplitz =
//      true in pics.c); -w 1 turns off its data scaling (without it pics divides d by an estimate from
//      A^H d, which changes what lambda means), -S then multiplies by 1. BART's NUFFT is scaled like
//      ours (fftscale: N^{-1/2}), so A = c F with c = 1 up to its gridding error, A^H A = |c|^2 F^H F
//      and the same problem needs lambda_B = |c|^2 lambda_abs: lambda_B = lambda_abs is passed. The
//      program measures c once from `bart nufft -a` on the same data and prints it (BART 0.8's gridding
//      makes it 1.001, not 1; a different normalisation would be a factor of 2, 4 or N, so the run
//      fails only beyond 5 %). Where eigenvalues of F^H F exceed lambda, x_B = x / c: the fitted scale
//      of the two images, printed, is the check that pics poses the same problem.
//    Agreement: NRMSE of BART's image after the complex scale that fits it to ours, and each image's
//    NRMSE against the phantom (after its own fitted scale: the regulariser shrinks both alike, that
//    is not what we want to see). The problem is ill-conditioned: F^H F's eigenvalue at a frequency is
//    about the number of samples per unit k-space cell there, of order S at the centre where every
//    spoke crosses and M / N^2 on average, so with lambda_abs = 0.02 the condition number is in the
//    thousands. That amplifies BART's gridding error in A^H d and in its Toeplitz PSF, and the more
//    so the further CG gets: the NRMSE grows with the iterations (at 64^2, 64 spokes: 6e-4 at 5, 5e-3
//    at 30, 2e-2 at 100), while Larmor's exact Toeplitz CG stays within 2e-4 of its own NUFFT-pair CG
//    (tolerance 1e-6) even at 100.
//
// Timing (wall clock, median of --runs after one warm-up, taken in rounds that run every measurement
// once in turn, see measure_in_rounds; OMP_NUM_THREADS and OMP_WAIT_POLICY are inherited by bart, so
// both tools run under the same ones, and the header prints them with the load average):
//   Larmor FHd: nudft() + adjoint (the operator is cheap to make, so it is charged here).
//   Larmor CG: toeplitz_cg given Q's spectrum (its set-up: FHd as the right-hand side, the operators)
//     + 30 iterations, split into the two parts; Q alone (toeplitz_spectrum: an exact adjoint NUDFT
//     onto the 2N x 2N grid, made once per trajectory); and toeplitz_cg computing Q itself + 30
//     iterations, the one-off total. For reference, a row outside the exact setting: the same solver
//     with F^H d and Q by the NUFFT (tolerance 1e-6), BART's algorithm, and its NRMSE to ours.
//   BART: each whole command as a user runs it (process start, .cfl I/O, its plans, PSF and work);
//     its DFT (`nufft -a -s`) is slow enough (about a minute at the default size) that it runs last,
//     on its own, with its own count, --dft-runs (default 1);
//     for pics also the same command at -i 1, so (t30 - t1) / 29 is its time per iteration and
//     t1 less one iteration its fixed cost.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/bart_io.h"
#include "core/backend.h"
#include "core/linops/nudft.h"
#include "core/linops/toeplitz.h"
#include "core/recon/toeplitz_cg.h"

namespace {

using larmor::CArray;
using larmor::cfloat;
using larmor::RArray;
namespace fs = std::filesystem;
using larmor::bench::capture;
using larmor::bench::read_cfl;
using larmor::bench::shell;
using larmor::bench::write_cfl;
using Clock = std::chrono::steady_clock;

struct Options {
    size_t n = 128, spokes = 128, samples = 256;
    int iterations = 30, runs = 5;
    int dft_runs = 1;  // BART's DFT takes about a minute at the default size: one run after the warm-up
    double lambda = 0.01;  // Larmor's relative lambda
    std::string bart = "bart";
    bool keep = false;
};

size_t positive(const std::string& flag, const std::string& v) {
    size_t used = 0;
    long long x = 0;
    try {
        x = std::stoll(v, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != v.size() || x < 1) throw std::invalid_argument(flag + " " + v + ": need a whole number >= 1");
    return size_t(x);
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
            return argv[++i];
        };
        if (a == "--size") o.n = positive(a, value());
        else if (a == "--spokes") o.spokes = positive(a, value());
        else if (a == "--samples") o.samples = positive(a, value());
        else if (a == "--iterations") o.iterations = int(positive(a, value()));
        else if (a == "--runs") o.runs = int(positive(a, value()));
        else if (a == "--dft-runs") o.dft_runs = int(positive(a, value()));
        else if (a == "--lambda") {
            const std::string v = value();
            char* end = nullptr;
            o.lambda = std::strtod(v.c_str(), &end);
            if (end == v.c_str() || *end != '\0' || !(o.lambda >= 0) || !std::isfinite(o.lambda))
                throw std::invalid_argument("--lambda " + v + ": need a finite number >= 0");
        } else if (a == "--bart") o.bart = value();
        else if (a == "--keep") o.keep = true;
        else
            throw std::invalid_argument("unknown argument '" + a +
                                        "' (--size N --spokes S --samples P --iterations I --lambda L --runs R "
                                        "--dft-runs R --bart PATH --keep)");
    }
    // BART's DFT takes the centre at N/2 and ours at floor(N/2): equal only for even N.
    if (o.n % 2) throw std::invalid_argument("--size " + std::to_string(o.n) + ": need an even image size");
    if (o.iterations < 2) throw std::invalid_argument("--iterations " + std::to_string(o.iterations) +
                                                      ": need >= 2 (BART's per-iteration time is t(I) - t(1))");
    return o;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t h = v.size() / 2;
    return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

// One thing to time: `run` does it once and returns the durations of its parts (one or several).
struct Measurement {
    std::function<std::vector<double>()> run;
    std::vector<std::vector<double>> samples;  // [part][round]
    double median_of(size_t part) const { return median(samples.at(part)); }
};

// Runs every measurement once untimed (FFTW plans, page faults, bart's binary into the page cache),
// then `runs` rounds that each run every measurement once, in turn. The two cores may be shared (the
// other engineer builds and runs in the same tree): in rounds, load that comes and goes falls on both
// tools alike rather than on whichever happened to be running, so their ratio stays meaningful.
void measure_in_rounds(int runs, const std::vector<Measurement*>& ms) {
    for (Measurement* m : ms) m->run();
    for (int r = 0; r < runs; ++r)
        for (Measurement* m : ms) {
            const std::vector<double> t = m->run();
            m->samples.resize(t.size());
            for (size_t i = 0; i < t.size(); ++i) m->samples[i].push_back(t[i]);
        }
}

// One measurement of f's whole duration.
Measurement timed(const std::function<void()>& f) {
    Measurement m;
    m.run = [f] {
        const auto t0 = Clock::now();
        f();
        return std::vector<double>{seconds_since(t0)};
    };
    return m;
}

struct Fit {
    double nrmse = 0;
    std::complex<double> scale;  // s minimising ||a - s b||
};

// ||a - s b|| / ||a|| with s = <b, a> / <b, b>.
Fit fit(const cfloat* a, const cfloat* b, size_t n) {
    std::complex<double> ba = 0;
    double bb = 0, aa = 0;
    for (size_t i = 0; i < n; ++i) {
        ba += std::conj(std::complex<double>(b[i])) * std::complex<double>(a[i]);
        bb += std::norm(std::complex<double>(b[i]));
        aa += std::norm(std::complex<double>(a[i]));
    }
    if (bb == 0 || aa == 0) throw std::runtime_error("fit: an image is all zeros (||a||^2 " + std::to_string(aa) +
                                                     ", ||b||^2 " + std::to_string(bb) + ")");
    Fit f;
    f.scale = ba / bb;
    double rr = 0;
    for (size_t i = 0; i < n; ++i) rr += std::norm(std::complex<double>(a[i]) - f.scale * std::complex<double>(b[i]));
    f.nrmse = std::sqrt(rr / aa);
    return f;
}

// A directory under /tmp, removed with its contents however the run ends (unless kept).
struct TempDir {
    fs::path path;
    bool keep = false;
    TempDir() {
        std::string tmpl = (fs::temp_directory_path() / "larmor-fhd-bart-XXXXXX").string();
        if (!mkdtemp(tmpl.data())) throw std::runtime_error("cannot create a temporary directory from " + tmpl);
        path = tmpl;
    }
    ~TempDir() {
        if (keep) return;
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
};

// The 1-minute load average: the 2 cores may be shared (another build), which the timings would show,
// so the report carries it from before and after the measurements.
std::string load_average() {
    std::ifstream f("/proc/loadavg");
    std::string one;
    f >> one;
    return f ? one : "unknown";
}

std::string complex_str(std::complex<double> z) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g%+.3gi", z.real(), z.imag());
    return buf;
}

}  // namespace

int main(int argc, char** argv) try {
    const Options o = parse(argc, argv);
    const size_t N = o.n, P = o.samples, S = o.spokes, M = S * P, NN = N * N;
    const std::string version = capture(o.bart + " version 2>&1");
    if (version.empty()) throw std::runtime_error("'" + o.bart + " version' printed nothing: is BART installed?");
    auto be = larmor::make_cpu_backend();
    const std::string load_before = load_average();

    // Golden-angle spokes, k = (i - P/2) N / P along each: [-N/2, N/2) cycles per FOV.
    RArray coords = RArray::host({2, M});
    const double pi = std::acos(-1.0), golden = pi * (std::sqrt(5.0) - 1.0) / 2.0;
    for (size_t s = 0; s < S; ++s)
        for (size_t i = 0; i < P; ++i) {
            const double r = (double(i) - double(P) / 2) * double(N) / double(P);
            coords.data()[2 * (s * P + i)] = float(r * std::cos(double(s) * golden));
            coords.data()[2 * (s * P + i) + 1] = float(r * std::sin(double(s) * golden));
        }
    // The phantom (x fastest): an ellipse of semi-axes 0.35 N and 0.43 N, plus a Gaussian bump, under a
    // linear phase of 0.02 rad per voxel along x.
    CArray truth = be->host_complex({N, N, 1});
    const double c = double(N / 2);
    for (size_t y = 0; y < N; ++y)
        for (size_t x = 0; x < N; ++x) {
            const double fx = (double(x) - c) / (0.35 * double(N)), fy = (double(y) - c) / (0.43 * double(N));
            const double v = (fx * fx + fy * fy < 1 ? 1.0 : 0.0) + std::exp(-((fx - .3) * (fx - .3) + fy * fy) * 20);
            truth.data()[x + N * y] = cfloat(std::polar(v, 0.02 * double(x)));
        }
    const larmor::NudftOptions exact{larmor::VoxelBasis::Dirac, true};
    CArray data = be->empty({M, 1});
    larmor::nudft(be, {N, N}, 1, coords, exact)->forward(truth, data);

    TempDir tmp;
    tmp.keep = o.keep;
    const fs::path& dir = tmp.path;
    std::vector<cfloat> traj(3 * M, cfloat(0.f, 0.f));
    for (size_t m = 0; m < M; ++m) traj[3 * m] = coords.data()[2 * m], traj[3 * m + 1] = coords.data()[2 * m + 1];
    write_cfl(dir / "traj", {3, P, S}, traj.data());
    write_cfl(dir / "data", {1, P, S}, data.data());
    const std::vector<cfloat> ones(NN, cfloat(1.f, 0.f));
    write_cfl(dir / "sens", {N, N}, ones.data());
    const std::string quiet = " > " + (dir / "bart.log").string() + " 2>&1";
    const std::string tdo = " " + (dir / "traj").string() + " " + (dir / "data").string() + " ";
    const std::string dims = std::to_string(N) + ":" + std::to_string(N) + ":1";

    // The Larmor set-up: the exact adjoint (FHd) and the Toeplitz CG with Dirac basis, exact F^H d,
    // exact Q, identity regulariser, a fixed number of iterations (tolerance 0).
    larmor::ToeplitzCgSetup setup;
    setup.basis = larmor::VoxelBasis::Dirac;
    setup.adjoint = larmor::ToeplitzCgSetup::Adjoint::Exact;
    setup.normal = larmor::ToeplitzCgSetup::Normal::Toeplitz;
    setup.q = larmor::ToeplitzOptions::Method::Exact;
    setup.accurate_sincos = true;
    setup.regularizer = larmor::ToeplitzCgSetup::Regularizer::Identity;
    setup.lambda = float(o.lambda);
    setup.cg = {o.iterations, 0.0};
    larmor::ToeplitzOptions qopt;
    qopt.basis = setup.basis;
    qopt.method = setup.q;
    qopt.accurate_sincos = setup.accurate_sincos;
    // For reference only (not the exact problem): the same solver with F^H d and Q both by the NUFFT at
    // tolerance 1e-6, the algorithm BART's pics uses, to show what the exact O(N M) parts cost.
    larmor::ToeplitzCgSetup approx = setup;
    approx.adjoint = larmor::ToeplitzCgSetup::Adjoint::Nufft;
    approx.q = larmor::ToeplitzOptions::Method::Nufft;
    approx.nufft.tolerance = 1e-6;

    // Q once for the "Q given" runs, and lambda_abs (toeplitz_cg's set-up computes it) for BART's -r.
    const CArray spectrum = larmor::toeplitz_spectrum(be, {N, N}, coords, RArray(), qopt);
    double lambda_abs = 0, mean_diag = 0;
    {
        const larmor::ToeplitzCg probe = larmor::toeplitz_cg(be, {N, N}, coords, data, CArray(), RArray(), setup, spectrum);
        lambda_abs = probe.lambda_absolute;
        mean_diag = probe.data_term_scale;
    }
    const double lambda_bart = lambda_abs;  // BART's A = c F with |c| = 1 (checked below)

    // One reconstruction into `image`, timed as set-up and iterations; `q` empty: Q is computed inside.
    auto reconstruct = [&](const larmor::ToeplitzCgSetup& st, const CArray& q, CArray& image) {
        const auto t0 = Clock::now();
        larmor::ToeplitzCg p = larmor::toeplitz_cg(be, {N, N}, coords, data, CArray(), RArray(), st, q);
        const double t_setup = seconds_since(t0);
        const auto t1 = Clock::now();
        while (!p.solver->done()) p.solver->update();
        be->synchronize();
        const double t_iter = seconds_since(t1);
        if (p.solver->iteration() != st.cg.max_iterations)
            throw std::runtime_error("Larmor's CG stopped after " + std::to_string(p.solver->iteration()) +
                                     " iterations, not " + std::to_string(st.cg.max_iterations));
        image = be->to_host(p.image);
        return std::vector<double>{t_setup, t_iter, t_setup + t_iter};
    };
    auto pics = [&](int iterations) {
        std::ostringstream c;
        c.precision(9);
        c << o.bart << " pics -l2 -r " << lambda_bart << " -i " << iterations << " -w 1 -S -t " << (dir / "traj").string()
          << ' ' << (dir / "data").string() << ' ' << (dir / "sens").string() << ' '
          << (dir / ("pics" + std::to_string(iterations))).string() << quiet;
        return c.str();
    };
    const std::string cmd_pics = pics(o.iterations), cmd_pics1 = pics(1);
    std::printf("running: %s\n", cmd_pics.c_str());
    std::fflush(stdout);

    CArray fhd = be->empty({N, N, 1}), ours, ours_nufft, scratch;
    Measurement m_fhd = timed([&] { larmor::nudft(be, {N, N}, 1, coords, exact)->adjoint(data, fhd); });
    Measurement m_q = timed([&] { scratch = larmor::toeplitz_spectrum(be, {N, N}, coords, RArray(), qopt); });
    Measurement m_cg{[&] { return reconstruct(setup, spectrum, ours); }, {}};
    Measurement m_cg_q{[&] { return reconstruct(setup, CArray(), scratch); }, {}};
    Measurement m_cg_nufft{[&] { return reconstruct(approx, CArray(), ours_nufft); }, {}};
    Measurement m_pics = timed([&] { shell(cmd_pics); });
    Measurement m_pics1 = timed([&] { shell(cmd_pics1); });
    measure_in_rounds(o.runs, {&m_fhd, &m_cg, &m_pics, &m_q, &m_cg_q, &m_pics1, &m_cg_nufft});
    const double t_fhd = m_fhd.median_of(0), t_q = m_q.median_of(0), t_cg_q = m_cg_q.median_of(2),
                 t_cg_nufft = m_cg_nufft.median_of(2), t_pics = m_pics.median_of(0), t_pics1 = m_pics1.median_of(0);
    const std::vector<double> t_cg{m_cg.median_of(0), m_cg.median_of(1), m_cg.median_of(2)};
    const double bart_per_iter = (t_pics - t_pics1) / double(o.iterations - 1);

    const std::vector<cfloat> bart_img = read_cfl(dir / ("pics" + std::to_string(o.iterations)), NN);
    const Fit fit_cg = fit(ours.data(), bart_img.data(), NN), fit_nufft_cg = fit(ours.data(), ours_nufft.data(), NN);
    const Fit ours_truth = fit(truth.data(), ours.data(), NN), bart_truth = fit(truth.data(), bart_img.data(), NN);
    if (o.keep) write_cfl(dir / "larmor", {N, N}, ours.data());

    // BART's NUFFT against the exact adjoint: A^H d = conj(c) F^H d, so ours = s (BART's) with s =
    // 1 / conj(c), and |c|^2 = 1 / |s|^2 relates BART's lambda to ours.
    shell(o.bart + " nufft -a -d " + dims + tdo + (dir / "nufft").string() + quiet);
    const Fit fit_nufft = fit(fhd.data(), read_cfl(dir / "nufft", NN).data(), NN);
    const double c2 = 1.0 / std::norm(fit_nufft.scale);

    const std::string load_after = load_average();
    // BART's DFT last: it takes minutes, and the short measurements above are better taken close
    // together (the cores may be shared, and load that comes and goes then hits both tools alike).
    const std::string cmd_dft = o.bart + " nufft -a -s -d " + dims + tdo + (dir / "dft").string() + quiet;
    std::printf("running: %s\n", cmd_dft.c_str());
    std::fflush(stdout);
    Measurement m_dft = timed([&] { shell(cmd_dft); });
    measure_in_rounds(o.dft_runs, {&m_dft});
    const double t_dft = m_dft.median_of(0);
    const Fit fit_dft = fit(fhd.data(), read_cfl(dir / "dft", NN).data(), NN);

    // ---- Report.
    const char* th = std::getenv("OMP_NUM_THREADS");
    const char* wp = std::getenv("OMP_WAIT_POLICY");
    const double it = double(o.iterations);
    std::printf("\nExact adjoint and regularised least squares, %zux%zu, 1 coil, %zu golden-angle spokes x %zu samples "
                "(%zu points, k in [-%zu, %zu) cycles/FOV), %d CG iterations; OMP_NUM_THREADS=%s, OMP_WAIT_POLICY=%s; "
                "Larmor %s; BART %s; wall clock, median of %d runs after a warm-up (BART's DFT: %d); load average %s "
                "before, %s after the timings other than BART's DFT\n\n",
                N, N, S, P, M, N / 2, N / 2, o.iterations, th ? th : "(unset)", wp ? wp : "(unset)",
                be->describe().c_str(), version.c_str(), o.runs, o.dft_runs, load_before.c_str(), load_after.c_str());
    std::printf("| problem | tool | what is timed | time (s) | agreement with Larmor |\n|---|---|---|---|---|\n");
    std::printf("| F^H d, exact | Larmor | nudft() + adjoint (Dirac) | %.4f | |\n", t_fhd);
    std::printf("| F^H d, exact | BART | `nufft -a -s`, whole command | %.4f | NRMSE %.1e after scale %s (1/N = %.6g) |\n",
                t_dft, fit_dft.nrmse, complex_str(fit_dft.scale).c_str(), 1.0 / double(N));
    std::printf("| LS, lambda_abs %.4g | Larmor | toeplitz_cg set-up with Q given (FHd, operators) | %.4f | |\n",
                lambda_abs, t_cg[0]);
    std::printf("| | Larmor | %d iterations (Toeplitz normal, 2N FFTs) | %.4f | |\n", o.iterations, t_cg[1]);
    std::printf("| | Larmor | **set-up + %d iterations, Q given** | **%.4f** | |\n", o.iterations, t_cg[2]);
    std::printf("| | Larmor | Q alone: toeplitz_spectrum (exact, %zux%zu grid) | %.4f | |\n", 2 * N, 2 * N, t_q);
    std::printf("| | Larmor | **toeplitz_cg computing Q + %d iterations (one-off)** | **%.4f** | |\n", o.iterations, t_cg_q);
    std::printf("| | BART | **`pics -l2 -i %d`, whole command** | **%.4f** | NRMSE %.1e after scale %s |\n", o.iterations,
                t_pics, fit_cg.nrmse, complex_str(fit_cg.scale).c_str());
    std::printf("| | BART | `pics -i 1`, whole command | %.4f | |\n", t_pics1);
    std::printf("| | BART | per iteration, (t%d - t1) / %d; x %d | %.4f; %.4f | |\n", o.iterations, o.iterations - 1,
                o.iterations, bart_per_iter, bart_per_iter * it);
    std::printf("| | Larmor, for reference | toeplitz_cg with F^H d and Q by the NUFFT (tol 1e-6) + %d iterations, "
                "one-off | %.4f | NRMSE %.1e after scale %s |\n",
                o.iterations, t_cg_nufft, fit_nufft_cg.nrmse, complex_str(fit_nufft_cg.scale).c_str());
    std::printf("\nBART / Larmor: F^H d %.2fx; LS with Q given %.2fx; LS one-off (Q computed) %.2fx; per iteration %.2fx\n",
                t_dft / t_fhd, t_pics / t_cg[2], t_pics / t_cg_q, bart_per_iter / (t_cg[1] / it));
    std::printf("\nThe two least-squares problems (N^2 = %zu voxels, M = %zu samples):\n", NN, M);
    std::printf("- Larmor: min ||F x - d||^2 + lambda_abs ||x||^2, F = N^-1 sum exp(-2 pi i k.(x - N/2)/N) (unitary "
                "scaling), lambda_abs = lambda %.4g x mean diag(F^H F) %.6g (= M / N^2) = %.6g\n",
                o.lambda, mean_diag, lambda_abs);
    std::printf("- BART: min ||A x - d||^2 + lambda_B ||x||^2 with lambda_B = %.6g (`-r`), data unscaled (`-w 1`); "
                "A = c F with c = %s measured from `nufft -a` (NRMSE %.1e), |c|^2 = %.5f, so lambda_B / |c|^2 = %.6g "
                "in Larmor's units\n",
                lambda_bart, complex_str(1.0 / std::conj(fit_nufft.scale)).c_str(), fit_nufft.nrmse, c2, lambda_bart / c2);
    std::printf("- against the phantom (each image's own fitted scale): Larmor NRMSE %.4f (scale %s), BART NRMSE %.4f "
                "(scale %s)\n",
                ours_truth.nrmse, complex_str(ours_truth.scale).c_str(), bart_truth.nrmse,
                complex_str(bart_truth.scale).c_str());
    if (o.keep) std::printf("files kept in %s\n", dir.string().c_str());

    if (std::abs(c2 - 1.0) > 0.05)
        throw std::runtime_error("BART's NUFFT is scaled by |c|^2 = " + std::to_string(c2) +
                                 " relative to Larmor's F, not 1: lambda_B = lambda_abs no longer poses the same problem");
    return fit_dft.nrmse < 1e-3 && fit_cg.nrmse < 2e-2 ? 0 : 2;
} catch (const std::exception& e) {
    std::fprintf(stderr, "fhd_vs_bart: %s\n", e.what());
    return 1;
}
