// The seeds' problem (Stone et al., "Accelerating advanced MRI reconstructions on GPUs", J. Parallel
// Distrib. Comput. 68:1307, 2008): 128^3 voxels from 284,592 non-Cartesian samples, reconstructed by
// gridding, by FHd + CG with the Toeplitz normal operator (core/recon/toeplitz_cg.h) and by NUFFT + CG,
// each compared with the true object. Stone et al. report an image error of 12 % for their iterative
// reconstruction against 42 % for gridding (noiseless), 16 % against 47 % with noise.
//
// Here: the 3D modified Shepp-Logan of larmor-phantom (analytic k-space of its ellipsoids, one uniform
// coil), sampled on a kooshball of 1,617 spokes x 176 samples (= 284,592), the readout spanning
// [-N/2, N/2) twice oversampled; the truth is the object averaged over each voxel (supersampled 3^3),
// which is what the box voxel basis models (--basis box; Dirac is the chains' default, by measurement). Errors are ||a x - t|| / ||t|| with the real scale a that
// minimises it (the methods differ in units, not in what they show), PSNR = 20 log10(max t / rms(a x - t)).
// --snr adds complex Gaussian noise (mean centre signal / noise std, larmor-phantom's definition).
//
// Times (wall clock, the backend synchronised): Q (the Toeplitz kernel, once per trajectory), FHd (the
// right-hand side S^H F^H W d), CG per iteration, and the total of FHd + CG with Q cached (what a repeated
// protocol costs). Usage:
//   fhd_seeds [--backend cuda|cpu] [--n 128] [--spokes 1617] [--samples 88] [--snr 0] [--iterations 60]
//             [--lambda 0.01] [--regularizer identity|fd|anatomical] [--q exact|nufft] [--basis dirac|box] [--discrete 0|1]
//             [--reference truth|gridding] [--edge-threshold 0.05]
// --regularizer anatomical: finite differences not penalised across the edges of a reference image
// (core/recon/anatomical_weights.h; Haldar et al. 2008): --reference truth is a separate anatomical scan of the
// same object (modelled noiseless, on the same grid), --reference gridding the data's own gridding image.
// --density pipe-menon: W = Pipe-Menon weights in the data term of both CG reconstructions (a
// weighted least-squares problem that CG solves in far fewer iterations); default none (W = I).
// --discrete 1: the data are the exact DFT of the voxel truth itself (no detail beyond the matrix),
// the setting in which a reconstruction can reach the truth; 0 (default): the analytic object's samples.
// --samples is per readout before the 2x readout oversampling (88 -> 176 stored).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/linops/nudft.h"
#include "core/linops/nufft.h"
#include "core/recon/anatomical_weights.h"
#include "core/recon/pipe_menon_density.h"
#include "core/recon/toeplitz_cg.h"
#include "tools/phantom/phantom.h"

namespace {

using larmor::CArray;
using larmor::RArray;
using larmor::Shape;
using Clock = std::chrono::steady_clock;
namespace phantom = larmor::phantom;

struct Options {
    std::string backend = "cuda", regularizer = "identity", q = "exact", basis = "dirac", reference = "truth";
    int n = 128, spokes = 1617, samples = 88, iterations = 60;
    double snr = 0.0, lambda = 0.01, edge_threshold = 0.05;
    bool discrete = false, density = false, exact = true;
};

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
        const std::string v = argv[++i];
        if (a == "--backend") o.backend = v;
        else if (a == "--n") o.n = std::stoi(v);
        else if (a == "--spokes") o.spokes = std::stoi(v);
        else if (a == "--samples") o.samples = std::stoi(v);
        else if (a == "--snr") o.snr = std::stod(v);
        else if (a == "--iterations") o.iterations = std::stoi(v);
        else if (a == "--lambda") o.lambda = std::stod(v);
        else if (a == "--regularizer") o.regularizer = v;
        else if (a == "--q") o.q = v;
        else if (a == "--basis") o.basis = v;
        else if (a == "--discrete") o.discrete = v == "1";
        else if (a == "--density") o.density = v == "pipe-menon";
        else if (a == "--exact") o.exact = v == "1";
        else if (a == "--reference") o.reference = v;
        else if (a == "--edge-threshold") o.edge_threshold = std::stod(v);
        else throw std::invalid_argument("unknown option " + a);
    }
    if (o.backend != "cuda" && o.backend != "cpu") throw std::invalid_argument("--backend " + o.backend);
    if (o.regularizer != "identity" && o.regularizer != "fd" && o.regularizer != "anatomical")
        throw std::invalid_argument("--regularizer " + o.regularizer);
    if (o.reference != "truth" && o.reference != "gridding") throw std::invalid_argument("--reference " + o.reference);
    if (o.q != "exact" && o.q != "nufft") throw std::invalid_argument("--q " + o.q);
    if (o.basis != "dirac" && o.basis != "box") throw std::invalid_argument("--basis " + o.basis);
    return o;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Quality {
    double error = 0, psnr = 0;
};

// The best real scale of |x| (or Re x with phase removed: the object is real and positive) onto t.
Quality quality(larmor::Backend& be, const CArray& x, const std::vector<double>& t) {
    const CArray h = be.to_host(x);
    double xt = 0, xx = 0, tt = 0, tmax = 0;
    for (size_t i = 0; i < t.size(); ++i) {
        const double v = std::abs(h.data()[i]);
        xt += v * t[i];
        xx += v * v;
        tt += t[i] * t[i];
        tmax = std::max(tmax, t[i]);
    }
    const double a = xx > 0 ? xt / xx : 0.0;
    double ee = 0;
    for (size_t i = 0; i < t.size(); ++i) {
        const double d = a * std::abs(h.data()[i]) - t[i];
        ee += d * d;
    }
    return {std::sqrt(ee / tt), 20 * std::log10(tmax / std::sqrt(ee / double(t.size())))};
}

}  // namespace

int main(int argc, char** argv) try {
    const Options o = parse(argc, argv);
    auto be = o.backend == "cuda" ? larmor::make_cuda_backend() : larmor::make_cpu_backend();

    phantom::PhantomSpec spec;
    spec.dims = 3;
    spec.nx = spec.ny = spec.nz = o.n;
    spec.fov_mm[0] = spec.fov_mm[1] = spec.fov_mm[2] = 240.0;
    spec.coils = 1;
    spec.ro_oversampling = 2;
    spec.trajectory = phantom::Trajectory::radial3d;
    spec.readouts = o.spokes;
    spec.samples = o.samples;
    spec.snr = o.snr;
    phantom::validate(spec);
    const phantom::Phantom ph(spec);
    const RArray coords3 = phantom::trajectory_coords(spec, 0);  // [3, samples x 2, spokes]
    const size_t per = coords3.shape()[1], m = per * coords3.shape()[2];
    std::vector<std::complex<float>> samples = phantom::sample_trajectory(ph, 0, coords3);
    const RArray coords = coords3.reshaped({3, m});
    const Shape image{size_t(o.n), size_t(o.n), size_t(o.n)};
    const std::vector<double> truth = ph.image(0, 3);
    if (o.discrete) {
        // The data a voxel object would give: the exact DFT of the truth itself (no edges finer than a
        // voxel, so no model error), scaled onto the analytic samples so that the noise means the same.
        auto f = larmor::nudft(be, image, 1, coords, {larmor::VoxelBasis::Dirac, true});
        CArray t = CArray::host({image[0], image[1], image[2], 1});
        for (size_t i = 0; i < truth.size(); ++i) t.data()[i] = larmor::cfloat(float(truth[i]), 0.f);
        CArray y = be->empty({m, 1});
        f->forward(be->to_device(t), y);
        const CArray yh = be->to_host(y);
        std::complex<double> num = 0;
        double den = 0;
        for (size_t i = 0; i < m; ++i) {
            num += std::conj(std::complex<double>(yh.data()[i])) * std::complex<double>(samples[i]);
            den += std::norm(std::complex<double>(yh.data()[i]));
        }
        const std::complex<double> a = num / den;
        for (size_t i = 0; i < m; ++i) samples[i] = std::complex<float>(a * std::complex<double>(yh.data()[i]));
    }
    if (o.snr > 0)
        for (size_t r = 0; r < coords3.shape()[2]; ++r) ph.add_noise(samples.data() + r * per, int(per), 1000 + r);
    CArray d = CArray::host({m, 1});
    std::copy(samples.begin(), samples.end(), d.data());
    const CArray data = be->to_device(d);
    std::printf("seeds' problem: %d^3 voxels, %zu samples (%d spokes x %zu), %s data, SNR %s, backend %s\n", o.n, m,
                o.spokes, per, o.discrete ? "voxel-object (exact DFT of the truth)" : "analytic",
                o.snr > 0 ? std::to_string(o.snr).c_str() : "noiseless", be->describe().c_str());
    std::printf("| method | Q (s) | F^H d (s) | CG per iteration (ms) | FHd + CG (s) | error (%%) | PSNR (dB) |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|\n");

    // The floor of any reconstruction on this grid: the whole Cartesian k-space of the analytic object
    // (Nyquist, no noise), inverse DFT. Its error is the object's detail beyond the matrix.
    if (!o.discrete) {
        RArray kc = RArray::host({3, size_t(o.n), size_t(o.n) * size_t(o.n)});
        const size_t n = size_t(o.n);
        for (size_t i = 0; i < n * n * n; ++i) {
            kc.data()[3 * i] = float(double(i % n) - double(n / 2));
            kc.data()[3 * i + 1] = float(double((i / n) % n) - double(n / 2));
            kc.data()[3 * i + 2] = float(double(i / (n * n)) - double(n / 2));
        }
        const std::vector<std::complex<float>> full = phantom::sample_trajectory(ph, 0, kc);
        CArray g = CArray::host({n, n, n});
        std::copy(full.begin(), full.end(), g.data());
        CArray x = be->empty({n, n, n});
        be->fft(be->to_device(g), x, 7u, larmor::FFTDirection::Inverse);
        const Quality q = quality(*be, x, truth);
        std::printf("| floor: all of Cartesian k-space (%zu^3 samples), inverse DFT | | | | | %.1f | %.1f |\n", n,
                    100 * q.error, q.psnr);
    }

    // Gridding: the NUFFT adjoint of Pipe-Menon-weighted data.
    const RArray w = larmor::pipe_menon_density(be, image, coords);
    RArray reference = RArray::host(image);  // the anatomical regulariser's reference image
    for (size_t i = 0; i < truth.size(); ++i) reference.data()[i] = float(truth[i]);
    {
        const auto t0 = Clock::now();
        auto nu = larmor::Nufft::create(be, image, 1, coords);
        CArray dw = be->empty({m, 1}), x = be->empty({image[0], image[1], image[2], 1});
        be->mul(data, be->to_device(w), dw);
        nu->adjoint(dw, x);
        be->synchronize();
        const double t = seconds_since(t0);
        const Quality q = quality(*be, x, truth);
        std::printf("| gridding (Pipe-Menon, NUFFT 1e-3) | | %.3f | | | %.1f | %.1f |\n", t, 100 * q.error, q.psnr);
        if (o.reference == "gridding") {
            const CArray xh = be->to_host(x);
            for (size_t i = 0; i < reference.size(); ++i) reference.data()[i] = std::abs(xh.data()[i]);
        }
    }

    for (const bool exact : {true, false}) {
        if (exact && !o.exact) continue;  // --exact 0: the NUFFT rows only (CPU runs of large problems)
        larmor::ToeplitzCgSetup s;
        s.basis = o.basis == "box" ? larmor::VoxelBasis::Box : larmor::VoxelBasis::Dirac;
        s.adjoint = exact ? larmor::ToeplitzCgSetup::Adjoint::Exact : larmor::ToeplitzCgSetup::Adjoint::Nufft;
        s.q = (exact && o.q == "exact") ? larmor::ToeplitzOptions::Method::Exact : larmor::ToeplitzOptions::Method::Nufft;
        s.nufft.tolerance = exact ? 1e-6 : 1e-3;
        s.regularizer = o.regularizer == "fd"           ? larmor::ToeplitzCgSetup::Regularizer::FiniteDifference
                        : o.regularizer == "anatomical" ? larmor::ToeplitzCgSetup::Regularizer::AnatomicalFiniteDifference
                                                        : larmor::ToeplitzCgSetup::Regularizer::Identity;
        if (o.regularizer == "anatomical") {
            s.edge_weights = larmor::anatomical_edge_weights(reference, float(o.edge_threshold));
            std::printf("anatomical reference: %s, edge threshold %g: %.1f %% of the differences unpenalised\n",
                        o.reference.c_str(), o.edge_threshold, 100 * larmor::edge_fraction(s.edge_weights));
        }
        s.lambda = float(o.lambda);
        s.cg = {o.iterations, 0.0};
        // Q once (a repeated protocol has it cached), then the reconstruction with it.
        auto t0 = Clock::now();
        larmor::ToeplitzOptions to;
        to.basis = s.basis;
        to.method = s.q;
        to.nufft_tolerance = 1e-6;
        const RArray weights = o.density ? w : RArray();
        CArray spectrum = larmor::toeplitz_spectrum(be, image, coords, weights, to);
        be->synchronize();
        const double tq = seconds_since(t0);
        t0 = Clock::now();
        larmor::ToeplitzCg p = larmor::toeplitz_cg(be, image, coords, data, CArray(), weights, s, spectrum);
        be->synchronize();
        const double tf = seconds_since(t0);
        t0 = Clock::now();
        while (!p.solver->done()) p.solver->update();
        be->synchronize();
        const double tcg = seconds_since(t0);
        const Quality q = quality(*be, p.image, truth);
        std::printf("| %s + CG (%s Q, %s basis, W %s, %s, lambda %g, %d it.) | %.3f | %.3f | %.2f | %.3f | %.1f | %.1f |\n",
                    exact ? "FHd" : "NUFFT", s.q == larmor::ToeplitzOptions::Method::Exact ? "exact" : "NUFFT",
                    larmor::voxel_basis_name(s.basis), o.density ? "Pipe-Menon" : "none",
                    larmor::regularizer_name(s.regularizer), o.lambda, p.solver->iteration(), tq, tf,
                    1e3 * tcg / std::max(1, p.solver->iteration()), tf + tcg, 100 * q.error, q.psnr);
    }
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "fhd_seeds: %s\n", e.what());
    return 1;
}
