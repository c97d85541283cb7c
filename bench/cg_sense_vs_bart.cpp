// Larmor's Cartesian CG-SENSE on the CPU backend side by side with BART's `pics -l2` (the Debian
// `bart` binary) on the same data, the same machine and in the same run.
//
// The problem: a 256 x 256 analytic phantom (tools/phantom), C coils, every 4th line plus 24 ACS
// lines, SNR 40, unsampled lines zero; x = argmin ||E x - y||^2 + lambda ||x||^2 by 30 CG
// iterations from x = 0, E = M F S with Larmor's Walsh maps (computed once, given to both tools).
// BART solves the same problem when:
//   * its data scaling is off (-w 1): pics otherwise divides k-space by an estimated scale (0.53
//     here) and, without -S, returns the image divided by it; the l2 problem is linear, so that is
//     a global factor only, but with -w 1 the two images agree without any scale fit;
//   * its FFT is unitary: sense_init scales the maps by 1/sqrt(N) (fftscale) around an unnormalised
//     FFT, so E^H E has the spectrum of ours and lambda means the same;
//   * its pattern is the non-zero lines of k-space (pics estimates it when no -p is given);
//   * -l2 -r lambda leaves only l2 terms, so pics picks CG on (E^H E + lambda I) x = E^H y.
// The image NRMSE after a complex least-squares scale fit checks that this holds.
// A second table gives each tool its own ESPIRiT maps with the same knobs (Larmor's espirit_maps against
// `bart ecalib -m1 -k 6 -r 24 -t 0.02 -c 0.8`) before the same solve: maps + CG-SENSE end to end, the
// images then differ by the two ESPIRiT implementations (their NRMSE is printed, not required to vanish).
//
// OpenMP's wait policy changes BART's time a lot on 2 cores; whatever OMP_WAIT_POLICY this program
// runs under, bart inherits, so both tools always run under the same one (the header names it).
//
// Timing (wall clock, median of --runs after one warm-up): Larmor's solver alone (set-up + 30
// iterations; the warm-up measures the FFTW plans), Larmor's maps + solver, BART's whole command
// (process start, file I/O, its set-up, 30 iterations) and BART's per-iteration time from the same
// command at 1 iteration, (t30 - t1) / 29, so neither side is charged for the other's fixed costs.
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
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/bart_io.h"
#include "core/backend.h"
#include "core/coils/calibration.h"
#include "core/coils/espirit.h"
#include "core/iter/alg.h"
#include "gadgets/sense/cartesian_sense.h"
#include "tools/phantom/phantom.h"

namespace {

using larmor::CArray;
using larmor::cfloat;
namespace fs = std::filesystem;
using larmor::bench::capture;
using larmor::bench::median_time;
using larmor::bench::read_cfl;
using larmor::bench::seconds;
using larmor::bench::shell;
using larmor::bench::write_cfl;

constexpr size_t kN = 256;
constexpr int kIterations = 30;
constexpr float kLambda = 0.01f;

struct Options {
    std::vector<int> coils{8, 32};
    int runs = 5;
    std::string bart = "bart";
    std::string json;
    bool keep = false;  // leave the temporary directory (inputs, both images) for inspection
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
        } else if (a == "--coils") {
            const std::string v = value();
            o.coils.clear();
            std::stringstream ss(v);
            for (std::string item; std::getline(ss, item, ',');) {
                const int c = std::atoi(item.c_str());
                if (c < 2) throw std::invalid_argument("--coils " + v + ": '" + item + "' is not a coil count >= 2");
                o.coils.push_back(c);
            }
        } else {
            throw std::invalid_argument("unknown argument '" + a + "' (use --coils 8,32 --runs 5 --bart PATH --json FILE --keep)");
        }
    }
    return o;
}

// The acquisition: phantom k-space with noise on the acquired lines, zeros elsewhere.
struct Data {
    CArray kspace;                 // [256, 256, 1, C]
    std::vector<uint8_t> sampled;  // per e1 line
};

Data make_data(int coils) {
    larmor::phantom::PhantomSpec spec;
    spec.coils = coils;
    spec.ro_oversampling = 1;
    spec.sampling = larmor::phantom::Sampling::uniform;
    spec.accel_y = 4;
    spec.acs_lines = 24;
    spec.snr = 40;
    const larmor::phantom::Phantom ph(spec);
    const std::vector<std::complex<float>> full = ph.kspace_all(0);
    const size_t plane = kN * kN;
    if (full.size() != plane * size_t(coils))
        throw std::runtime_error("phantom k-space has " + std::to_string(full.size()) + " samples, expected " +
                                 std::to_string(plane * size_t(coils)));
    Data d;
    d.kspace = CArray::host({kN, kN, 1, size_t(coils)});
    std::fill(d.kspace.data(), d.kspace.data() + d.kspace.size(), cfloat(0.f, 0.f));
    d.sampled.assign(kN, 0);
    // add_noise works on one readout as ISMRMRD stores it, [coil][sample]: gather, add, scatter.
    std::vector<std::complex<float>> line(kN * size_t(coils));
    for (const auto& pe : ph.sampling()) {
        const size_t e1 = size_t(pe.e1);
        d.sampled[e1] = 1;
        for (int c = 0; c < coils; ++c)
            std::copy_n(full.data() + size_t(c) * plane + e1 * kN, kN, line.data() + size_t(c) * kN);
        ph.add_noise(line.data(), int(kN), 1 + e1);  // one noise stream per line
        for (int c = 0; c < coils; ++c)
            std::copy_n(line.data() + size_t(c) * kN, kN, d.kspace.data() + size_t(c) * plane + e1 * kN);
    }
    return d;
}

CArray compute_maps(larmor::Backend& cpu, const Data& d) {
    const larmor::coils::CalibrationRegion r = larmor::coils::fully_sampled_centre(d.sampled, kN, 1, 8);
    return larmor::coils::sense_maps(cpu, larmor::coils::calibration_images(cpu, d.kspace, r), 7, 7);
}

// ESPIRiT maps with BART ecalib's knobs as the ESPIRiT run below passes them (-k 6 -r 24 -t 0.02 -c 0.8, one set).
CArray compute_espirit_maps(larmor::Backend& cpu, const Data& d) {
    const larmor::coils::CalibrationRegion r = larmor::coils::fully_sampled_centre(d.sampled, kN, 1, 8);
    return larmor::coils::espirit_maps(cpu, d.kspace, r.e1_lo, r.e1_hi, larmor::coils::EspiritSettings{}).maps;
}

CArray solve(const std::shared_ptr<larmor::Backend>& cpu, const Data& d, const CArray& maps) {
    larmor::CartesianSense p = larmor::cartesian_sense(cpu, d.kspace, d.sampled, maps, kLambda, {kIterations, 0.0});
    larmor::run(*p.solver);
    return p.image;
}

struct Fit {
    double nrmse = 0;
    std::complex<double> scale;
};

// ||a - s b|| / ||a|| with s = <b, a> / <b, b>, the complex scale that fits b to a best.
Fit nrmse_fitted(const cfloat* a, const cfloat* b, size_t n) {
    std::complex<double> ba = 0;
    double bb = 0, aa = 0;
    for (size_t i = 0; i < n; ++i) {
        ba += std::conj(std::complex<double>(b[i])) * std::complex<double>(a[i]);
        bb += std::norm(std::complex<double>(b[i]));
        aa += std::norm(std::complex<double>(a[i]));
    }
    const std::complex<double> s = bb > 0 ? ba / bb : 0.0;
    double rr = 0;
    for (size_t i = 0; i < n; ++i) rr += std::norm(std::complex<double>(a[i]) - s * std::complex<double>(b[i]));
    return {aa > 0 ? std::sqrt(rr / aa) : 0.0, s};
}

struct Row {
    int coils = 0;
    double larmor_solver = 0, larmor_total = 0, bart_total = 0, bart_iter30 = 0;
    Fit fit;
    // Each tool's own ESPIRiT maps and then CG-SENSE: Larmor's espirit_maps + solver against
    // `bart ecalib` + `bart pics` (two processes, their file I/O included), and the two images' NRMSE.
    double larmor_espirit = 0, bart_espirit = 0;
    Fit fit_espirit;
};

std::string bart_command(const Options& o, const fs::path& dir, int iterations) {
    std::ostringstream c;
    c << "OMP_NUM_THREADS=2 " << o.bart << " pics -l2 -r " << kLambda << " -i " << iterations << " -w 1 -S "
      << (dir / "kspace").string() << ' ' << (dir / "sens").string() << ' ' << (dir / "out").string() << " > "
      << (dir / "bart.log").string() << " 2>&1";
    return c.str();
}

Row bench(const Options& o, int coils, const fs::path& root) {
    const fs::path dir = root / ("coils" + std::to_string(coils));  // per coil count, for --keep
    fs::create_directory(dir);
    auto cpu = larmor::make_cpu_backend();
    Row row;
    row.coils = coils;
    const Data d = make_data(coils);
    const CArray maps = compute_maps(*cpu, d);
    write_cfl(dir / "kspace", d.kspace);
    write_cfl(dir / "sens", maps);

    row.larmor_solver = median_time(o.runs, [&] { solve(cpu, d, maps); });
    row.larmor_total = median_time(o.runs, [&] { solve(cpu, d, compute_maps(*cpu, d)); });
    const CArray image = solve(cpu, d, maps);

    const std::string cmd30 = bart_command(o, dir, kIterations), cmd1 = bart_command(o, dir, 1);
    std::cout << "  " << cmd30 << '\n';
    const double t1 = median_time(o.runs, [&] { shell(cmd1); });
    row.bart_total = median_time(o.runs, [&] { shell(cmd30); });  // last: out.cfl is the 30-iteration image
    row.bart_iter30 = (row.bart_total - t1) / (kIterations - 1) * kIterations;

    const std::vector<cfloat> bart = read_cfl(dir / "out", kN * kN);
    row.fit = nrmse_fitted(image.data(), bart.data(), kN * kN);

    row.larmor_espirit = median_time(o.runs, [&] { solve(cpu, d, compute_espirit_maps(*cpu, d)); });
    const CArray espirit_image = solve(cpu, d, compute_espirit_maps(*cpu, d));
    std::ostringstream ecalib;
    ecalib << "OMP_NUM_THREADS=2 " << o.bart << " ecalib -m1 -k 6 -r 24 -t 0.02 -c 0.8 " << (dir / "kspace").string()
           << ' ' << (dir / "sens_e").string() << " > " << (dir / "ecalib.log").string() << " 2>&1 && OMP_NUM_THREADS=2 "
           << o.bart << " pics -l2 -r " << kLambda << " -i " << kIterations << " -w 1 -S " << (dir / "kspace").string()
           << ' ' << (dir / "sens_e").string() << ' ' << (dir / "out_e").string() << " > "
           << (dir / "bart_e.log").string() << " 2>&1";
    std::cout << "  " << ecalib.str() << '\n';
    row.bart_espirit = median_time(o.runs, [&] { shell(ecalib.str()); });
    const std::vector<cfloat> bart_e = read_cfl(dir / "out_e", kN * kN);
    row.fit_espirit = nrmse_fitted(espirit_image.data(), bart_e.data(), kN * kN);
    if (o.keep) write_cfl(dir / "larmor", image);
    return row;
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
        std::string tmpl = (fs::temp_directory_path() / "larmor-bart-XXXXXX").string();
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

std::string fixed(double v, int digits) {
    std::ostringstream s;
    s.setf(std::ios::fixed);
    s.precision(digits);
    s << v;
    return s.str();
}

std::string sci(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1e", v);
    return buf;
}

}  // namespace

int main(int argc, char** argv) try {
    const Options o = parse(argc, argv);
    const std::string version = capture(o.bart + " version 2>&1");
    if (version.empty()) throw std::runtime_error("'" + o.bart + " version' printed nothing: is BART installed?");

    TempDir tmp;
    tmp.keep = o.keep;
    const fs::path& dir = tmp.path;
    if (o.keep) std::cout << "keeping " << dir.string() << '\n';

    const unsigned cores = std::thread::hardware_concurrency();
    const std::string model = cpu_model(), date = now_utc();
    const char* policy_env = std::getenv("OMP_WAIT_POLICY");  // inherited by bart through std::system
    const std::string policy = policy_env ? policy_env : "unset";
    std::vector<Row> rows;
    for (int c : o.coils) {
        std::cout << "coils " << c << " ...\n" << std::flush;
        rows.push_back(bench(o, c, dir));
    }

    std::cout << "\nCG-SENSE 256x256, R=4 + 24 ACS, SNR 40, lambda " << kLambda << ", " << kIterations
              << " CG iterations from 0; median of " << o.runs << " runs (wall clock)\n"
              << "machine: " << cores << " cores, " << model << "; BART " << version << "; " << date
              << "; OMP_WAIT_POLICY " << policy << " (both tools)\n\n"
              << "| coils | Larmor solver (s) | Larmor maps+solver (s) | BART pics (s) | BART 30 x per-iter (s) "
                 "| speed-up (pics / maps+solver) | speed-up (iter) | image NRMSE |\n"
              << "|---|---|---|---|---|---|---|---|\n";
    for (const Row& r : rows)
        std::cout << "| " << r.coils << " | " << fixed(r.larmor_solver, 3) << " | " << fixed(r.larmor_total, 3) << " | "
                  << fixed(r.bart_total, 3) << " | " << fixed(r.bart_iter30, 3) << " | "
                  << fixed(r.bart_total / r.larmor_total, 2) << "x | " << fixed(r.bart_iter30 / r.larmor_solver, 2)
                  << "x | " << sci(r.fit.nrmse) << " |\n";
    std::cout << "\nEach tool's own ESPIRiT maps (kernel 6, calibration 24, threshold 0.02, crop 0.8, one set), then the same "
                 "CG-SENSE:\n\n"
              << "| coils | Larmor ESPIRiT + solver (s) | BART ecalib + pics (s) | speed-up | image NRMSE |\n"
              << "|---|---|---|---|---|\n";
    for (const Row& r : rows)
        std::cout << "| " << r.coils << " | " << fixed(r.larmor_espirit, 3) << " | " << fixed(r.bart_espirit, 3) << " | "
                  << fixed(r.bart_espirit / r.larmor_espirit, 2) << "x | " << fixed(r.fit_espirit.nrmse, 4) << " |\n";

    if (!o.json.empty()) {
        std::ofstream j(o.json);
        j << "{\n  \"machine\": {\"nproc\": " << cores << ", \"cpu\": \"" << model << "\", \"date\": \"" << date
          << "\", \"bart\": \"" << version << "\", \"omp_wait_policy\": \"" << policy << "\"},\n  \"lambda\": " << kLambda << ", \"iterations\": " << kIterations
          << ", \"runs\": " << o.runs << ",\n  \"results\": [\n";
        for (size_t i = 0; i < rows.size(); ++i) {
            const Row& r = rows[i];
            j << "    {\"coils\": " << r.coils << ", \"larmor_solver_s\": " << r.larmor_solver
              << ", \"larmor_maps_solver_s\": " << r.larmor_total << ", \"bart_pics_s\": " << r.bart_total
              << ", \"bart_per_iteration_x30_s\": " << r.bart_iter30 << ", \"larmor_espirit_solver_s\": " << r.larmor_espirit
              << ", \"bart_ecalib_pics_s\": " << r.bart_espirit << ", \"espirit_nrmse\": " << r.fit_espirit.nrmse
              << ", \"nrmse\": " << r.fit.nrmse << ", \"bart_to_larmor_scale\": [" << r.fit.scale.real() << ", "
              << r.fit.scale.imag() << "]}"
              << (i + 1 < rows.size() ? ",\n" : "\n");
        }
        j << "  ]\n}\n";
        if (!j) throw std::runtime_error("cannot write --json file " + o.json);
    }
    return 0;
} catch (const std::exception& e) {
    std::cerr << "cg_sense_vs_bart: " << e.what() << '\n';
    return 1;
}
