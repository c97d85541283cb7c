// Larmor's CPU NUFFT adjoint (core/linops/nufft.h) side by side with BART's `nufft -a` (the Debian
// `bart` binary) on the same data, the same machine and in the same run; scripts/bart-nufft-compare.sh
// runs it.
//
// The problem: a 256 x 256 image, C coils (default 8), a golden-angle radial trajectory of S spokes
// (default 402) x 512 samples with k in [-128, 128) cycles per FOV (BART's range; ours is the closed
// [-N/2, N/2]). The k-space data are Larmor's forward NUFFT (tolerance 1e-6) of a smooth phantom (an
// ellipse with a phase ramp, a different complex weight per coil), so both adjoints see the same,
// realistic samples. Both tools get the same coordinates (.cfl is column-major complex64 with a .hdr
// text file; BART's trajectory is [3, samples, spokes] with z = 0).
// Agreement: BART's adjoint is not N^{-1/2}-normalised like ours, so the images are compared after the
// complex least-squares scale that fits BART's to Larmor's (the fitted scale is printed: a real positive
// number means the same sign convention and centring).
//
// Timing (wall clock, median of --runs after one warm-up): Larmor's adjoint alone (the plan and its
// binning made once, as a reconstruction does), Larmor's plan + binning (Nufft::create), and BART's
// whole command (process start, file I/O, its plan, the adjoint) as a user runs it. Both run under the
// same OMP_NUM_THREADS / OMP_WAIT_POLICY (the script sets 2 threads, PASSIVE).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "bench/bart_io.h"
#include "core/backend.h"
#include "core/linops/nufft.h"

namespace {

using larmor::CArray;
using larmor::cfloat;
using larmor::RArray;
using larmor::Shape;
namespace fs = std::filesystem;
using larmor::bench::median_time;
using larmor::bench::read_cfl;
using larmor::bench::shell;
using larmor::bench::write_cfl;

constexpr size_t kN = 256, kSamples = 512;

struct Options {
    size_t coils = 8, spokes = 402;
    int runs = 5;
    double tolerance = 1e-3;
    bool keep = false;
};

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
            return argv[++i];
        };
        if (a == "--coils") o.coils = std::stoul(next());
        else if (a == "--spokes") o.spokes = std::stoul(next());
        else if (a == "--runs") o.runs = std::stoi(next());
        else if (a == "--tolerance") o.tolerance = std::stod(next());
        else if (a == "--keep") o.keep = true;
        else throw std::invalid_argument("unknown argument " + a + " (--coils C --spokes S --runs R --tolerance T --keep)");
    }
    return o;
}

// ||a - s b|| / ||a|| with s = <b, a> / <b, b>.
double nrmse_fitted(const cfloat* a, const cfloat* b, size_t n, std::complex<double>& s) {
    std::complex<double> ba = 0;
    double bb = 0, aa = 0;
    for (size_t i = 0; i < n; ++i) {
        ba += std::conj(std::complex<double>(b[i])) * std::complex<double>(a[i]);
        bb += std::norm(std::complex<double>(b[i]));
        aa += std::norm(std::complex<double>(a[i]));
    }
    s = ba / bb;
    double e = 0;
    for (size_t i = 0; i < n; ++i) e += std::norm(std::complex<double>(a[i]) - s * std::complex<double>(b[i]));
    return std::sqrt(e / aa);
}

}  // namespace

int main(int argc, char** argv) try {
    const Options o = parse(argc, argv);
    const size_t M = o.spokes * kSamples, C = o.coils;
    auto be = larmor::make_cpu_backend();

    // Golden-angle spokes, samples k = -128 .. 127.5 along each (BART's half-open range).
    RArray k = RArray::host({2, M});
    const double pi = std::acos(-1.0), golden = pi * (std::sqrt(5.0) - 1.0) / 2.0;
    for (size_t s = 0; s < o.spokes; ++s)
        for (size_t i = 0; i < kSamples; ++i) {
            const double r = (double(i) - double(kSamples) / 2) * double(kN) / double(kSamples);
            k.data()[2 * (s * kSamples + i)] = float(r * std::cos(double(s) * golden));
            k.data()[2 * (s * kSamples + i) + 1] = float(r * std::sin(double(s) * golden));
        }
    // The phantom: an ellipse with a linear phase, one complex weight per coil, plus a smooth bump.
    CArray image = be->host_complex({kN, kN, C});
    for (size_t c = 0; c < C; ++c)
        for (size_t y = 0; y < kN; ++y)
            for (size_t x = 0; x < kN; ++x) {
                const double fx = (double(x) - 128) / 90, fy = (double(y) - 128) / 110;
                const double v = (fx * fx + fy * fy < 1 ? 1.0 : 0.0) + std::exp(-((fx - .3) * (fx - .3) + fy * fy) * 20);
                image.data()[x + kN * (y + kN * c)] =
                    cfloat(std::polar(v, 0.01 * double(x) + 0.7 * double(c)) * (1.0 + 0.1 * double(c)));
            }
    CArray ksp = be->empty({M, C});
    larmor::Nufft::create(be, {kN, kN}, C, k, {1e-6, 2.0})->forward(image, ksp);

    const fs::path dir = fs::temp_directory_path() / ("larmor-nufft-bart-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::vector<cfloat> traj(3 * M);
    for (size_t m = 0; m < M; ++m) traj[3 * m] = k.data()[2 * m], traj[3 * m + 1] = k.data()[2 * m + 1];
    write_cfl(dir / "traj", {3, kSamples, o.spokes}, traj.data());
    write_cfl(dir / "ksp", {1, kSamples, o.spokes, C}, ksp.data());

    // Larmor.
    std::shared_ptr<larmor::Nufft> op;
    const double t_plan = median_time(o.runs, [&] { op = larmor::Nufft::create(be, {kN, kN}, C, k, {o.tolerance, 2.0}); });
    CArray ours = be->empty({kN, kN, C});
    const double t_adj = median_time(o.runs, [&] { op->adjoint(ksp, ours); });
    // BART.
    const std::string cmd = "bart nufft -a -d " + std::to_string(kN) + ":" + std::to_string(kN) + ":1 " +
                            (dir / "traj").string() + " " + (dir / "ksp").string() + " " + (dir / "out").string();
    const double t_bart = median_time(o.runs, [&] { shell(cmd); });
    const std::vector<cfloat> bart = read_cfl(dir / "out", kN * kN * C);

    std::complex<double> s;
    const double nrmse = nrmse_fitted(ours.data(), bart.data(), kN * kN * C, s);
    const char* th = std::getenv("OMP_NUM_THREADS");
    const char* wp = std::getenv("OMP_WAIT_POLICY");
    std::printf("NUFFT adjoint, %zux%zu, %zu coils, %zu spokes x %zu samples (%zu points), OMP_NUM_THREADS=%s, "
                "OMP_WAIT_POLICY=%s, %s, median of %d runs\n\n",
                kN, kN, C, o.spokes, kSamples, M, th ? th : "(unset)", wp ? wp : "(unset)", be->describe().c_str(),
                o.runs);
    std::printf("| tool | what | time (s) |\n|---|---|---|\n");
    std::printf("| Larmor (tol %.0e, sigma 2, width %d) | adjoint | %.4f |\n", o.tolerance, op->grid().width, t_adj);
    std::printf("| Larmor | plan + binning (create) | %.4f |\n", t_plan);
    std::printf("| BART %s | `nufft -a`, whole command | %.4f |\n\n", "(bart on PATH)", t_bart);
    std::printf("BART / Larmor adjoint: %.2fx; BART / Larmor (create + adjoint): %.2fx\n", t_bart / t_adj,
                t_bart / (t_plan + t_adj));
    std::printf("images: NRMSE %.2e after fitting BART's to Larmor's by the complex scale %.6g%+.6gi\n", nrmse,
                s.real(), s.imag());
    if (o.keep)
        std::printf("files kept in %s\n", dir.string().c_str());
    else
        fs::remove_all(dir);
    return nrmse < 1e-2 ? 0 : 2;
} catch (const std::exception& e) {
    std::fprintf(stderr, "nufft_vs_bart: %s\n", e.what());
    return 1;
}
