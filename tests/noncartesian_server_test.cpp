// Every shipped non-Cartesian chain end to end, as a user runs it from the README: larmor-phantom's
// radial, spiral, stack-of-stars and 3D radial files streamed by larmor-client to larmor-server, the
// images written back checked against the phantom's true object. The server picks its backend as in
// production (CUDA where a device is present), so on the GPU machine this runs the CUDA path.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/support/ismrmrd_files.h"
#include "tests/support/server_process.h"
#include "tools/phantom/phantom.h"

namespace larmor {
namespace {

using phantom::Trajectory;

struct Case {
    const char* chain;
    Trajectory trajectory;
    int matrix, matrix_z, coils, readouts, repetitions;
    size_t images;       // images expected back
    double max_nrmse;    // against the true object, after the best scale
};

// The object as root-sum-of-squares over the coils sees it: rho |s|, or, after noise prewhitening,
// rho sqrt(s^H Psi^-1 s) (the RSS of whitened coils W s, whatever square root W of Psi^-1 the chain
// uses). Each pixel averaged over 3 x 3 sub-points.
std::vector<double> true_object(const phantom::PhantomSpec& spec, bool whitened) {
    const phantom::Phantom ph(spec);
    const size_t nc = size_t(spec.coils);
    std::vector<std::vector<phantom::cdouble>> ci(nc);
    for (size_t c = 0; c < nc; ++c) ci[c] = ph.coil_image(int(c), 0, 3);
    // Psi^-1 by Gauss-Jordan elimination (Hermitian positive definite, a few coils).
    std::vector<phantom::cdouble> a = ph.noise_covariance(), inv(nc * nc, 0.0);
    for (size_t i = 0; i < nc; ++i) inv[i * nc + i] = 1.0;
    for (size_t col = 0; col < nc; ++col) {
        const phantom::cdouble p = a[col * nc + col];
        for (size_t j = 0; j < nc; ++j) {
            a[col * nc + j] /= p;
            inv[col * nc + j] /= p;
        }
        for (size_t r = 0; r < nc; ++r)
            if (r != col) {
                const phantom::cdouble f = a[r * nc + col];
                for (size_t j = 0; j < nc; ++j) {
                    a[r * nc + j] -= f * a[col * nc + j];
                    inv[r * nc + j] -= f * inv[col * nc + j];
                }
            }
    }
    std::vector<double> t(ci[0].size(), 0.0);
    for (size_t p = 0; p < t.size(); ++p) {
        double v = 0;
        if (!whitened) {
            for (size_t c = 0; c < nc; ++c) v += std::norm(ci[c][p]);
        } else {
            for (size_t i = 0; i < nc; ++i)
                for (size_t j = 0; j < nc; ++j) v += (std::conj(ci[i][p]) * inv[i * nc + j] * ci[j][p]).real();
        }
        t[p] = std::sqrt(std::max(v, 0.0));
    }
    return t;
}

double scaled_nrmse(const std::vector<double>& x, const std::vector<double>& t) {
    if (x.size() != t.size()) return INFINITY;
    double xt = 0, xx = 0, tt = 0;
    for (size_t i = 0; i < t.size(); ++i) {
        xt += x[i] * t[i];
        xx += x[i] * x[i];
        tt += t[i] * t[i];
    }
    const double a = xx > 0 ? xt / xx : 0;
    double e = 0;
    for (size_t i = 0; i < t.size(); ++i) e += (a * x[i] - t[i]) * (a * x[i] - t[i]);
    return std::sqrt(e / tt);
}

class NoncartesianServer : public ::testing::TestWithParam<Case> {};

TEST_P(NoncartesianServer, PhantomFileThroughClientAndServerGivesTheObject) {
    if (::access(test::client_binary().c_str(), X_OK) != 0 || ::access(test::server_binary().c_str(), X_OK) != 0)
        GTEST_SKIP() << "larmor-server / larmor-client not built";
    const Case c = GetParam();
    phantom::PhantomSpec spec;
    spec.trajectory = c.trajectory;
    spec.nx = spec.ny = c.matrix;
    spec.coils = c.coils;
    spec.fov_mm[0] = spec.fov_mm[1] = 240.0;
    spec.ro_oversampling = 2;
    spec.readouts = c.readouts;
    spec.repetitions = c.repetitions;
    spec.noise_scan = true;  // the chains prewhiten: correlated receiver noise, SNR 200
    spec.snr = 200.0;
    if (c.matrix_z > 1) {
        spec.dims = 3;
        spec.nz = c.matrix_z;
        spec.fov_mm[2] = 240.0 * c.matrix_z / c.matrix;
    }
    const std::string stem = "/tmp/larmor-noncart-" + std::to_string(::getpid()) + "-" + c.chain;
    const std::string in = stem + "-in.h5", out = stem + "-out.h5";
    phantom::write_dataset(spec, in);
    test::ServerProcess server;
    const auto r = test::run_process({test::client_binary(), "-a", "127.0.0.1", "-p", std::to_string(server.port()),
                                      "-f", in, "-c", c.chain, "-o", out, "-G", "recon", "-q"},
                                     std::chrono::seconds(300));
    ::unlink(in.c_str());
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const auto images = ::access(out.c_str(), F_OK) == 0 ? test::read_images(out, "recon") : std::vector<test::FileImage>{};
    ::unlink(out.c_str());
    ASSERT_EQ(images.size(), c.images) << r.output;
    // Every chain but the real-time one prewhitens (noise_adjust first).
    const auto truth = true_object(spec, std::string(c.chain) != "radial_realtime");
    double worst = 0;
    for (const auto& im : images) {
        EXPECT_EQ(im.matrix[0], size_t(c.matrix));
        EXPECT_EQ(im.matrix[1], size_t(c.matrix));
        worst = std::max(worst, scaled_nrmse(im.values, truth));
    }
    std::printf("[%s] %zu image(s) through the server, worst NRMSE against the object %.4f\n", c.chain,
                images.size(), worst);
    EXPECT_LT(worst, c.max_nrmse);
}

INSTANTIATE_TEST_SUITE_P(
    Chains, NoncartesianServer,
    ::testing::Values(Case{"radial_gridding", Trajectory::radial, 64, 1, 4, 0, 2, 2, 0.25},
                      Case{"spiral_gridding", Trajectory::spiral, 64, 1, 4, 0, 1, 1, 0.25},
                      Case{"radial_fbp", Trajectory::radial, 64, 1, 4, 0, 1, 1, 0.25},
                      Case{"radial3d_gridding", Trajectory::radial3d, 16, 16, 2, 300, 1, 1, 0.35},
                      Case{"cg_sense_radial", Trajectory::golden_angle, 64, 1, 8, 48, 1, 1, 0.25},
                      // 64 golden-angle spokes, windows of 32 every 8: (64 - 32) / 8 + 1 frames.
                      Case{"radial_realtime", Trajectory::golden_angle, 64, 1, 4, 64, 1, 5, 0.5}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.chain); });

}  // namespace
}  // namespace larmor
