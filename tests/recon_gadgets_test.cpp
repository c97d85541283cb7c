// The Cartesian reconstruction gadgets (NoiseAdjust, RemoveROOversampling, AccumulateTrigger, FFT,
// CoilCombine, ImageFinish) driven synchronously by tests/support/gadget_harness. References are
// independent: noise statistics and prewhitening in double precision here, images by the exact centred
// DFT of tests/support/reference_dft.h applied to the same k-space samples.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <ismrmrd/version.h>
#include <ismrmrd/xml.h>

#include "core/backend.h"
#include "gadgets/chain_config.h"
#include "gadgets/encoding.h"
#include "gadgets/factories.h"
#include "gadgets/image_header.h"
#include "gadgets/image_magnitude.h"
#include "gadgets/line_ops.h"
#include "gadgets/typed_gadget.h"
#include "tests/support/gadget_harness.h"
#include "tests/support/image_masks.h"
#include "tests/support/reference_dft.h"
#include "tools/phantom/phantom.h"

namespace larmor {
namespace {

using test::cdouble;
using test::GadgetHarness;

// ---------------------------------------------------------------------------------------------------
// Synthetic scans: a header, a k-space grid and the readouts that sample it.

struct ScanSpec {
    size_t ro = 64, e1 = 48, e2 = 1, coils = 4;      // encoded grid (readout oversampled when ro != recon_x)
    size_t recon_x = 32, recon_y = 48, recon_z = 1;
    float fov_enc[3] = {256, 192, 5}, fov_recon[3] = {128, 192, 5};
    int e1_min = -1, e1_max = -1, e1_centre = -1;     // -1: 0, e1 - 1, e1 / 2
    int e2_min = -1, e2_max = -1, e2_centre = -1;
    float acq_dwell_us = 5.0f, noise_dwell_us = 5.0f;
    float receiver_bw = 0.793f;
};

int or_default(int v, int d) { return v < 0 ? d : v; }

std::string header_xml(const ScanSpec& s) {
    ISMRMRD::IsmrmrdHeader h;
    h.experimentalConditions.H1resonanceFrequency_Hz = 123000000;
    ISMRMRD::AcquisitionSystemInformation sys;
    sys.relativeReceiverNoiseBandwidth = s.receiver_bw;
    sys.receiverChannels = uint16_t(s.coils);
    h.acquisitionSystemInformation = sys;
    ISMRMRD::Encoding e;
    e.encodedSpace.matrixSize = ISMRMRD::MatrixSize(uint16_t(s.ro), uint16_t(s.e1), uint16_t(s.e2));
    e.encodedSpace.fieldOfView_mm.x = s.fov_enc[0];
    e.encodedSpace.fieldOfView_mm.y = s.fov_enc[1];
    e.encodedSpace.fieldOfView_mm.z = s.fov_enc[2];
    e.reconSpace.matrixSize = ISMRMRD::MatrixSize(uint16_t(s.recon_x), uint16_t(s.recon_y), uint16_t(s.recon_z));
    e.reconSpace.fieldOfView_mm.x = s.fov_recon[0];
    e.reconSpace.fieldOfView_mm.y = s.fov_recon[1];
    e.reconSpace.fieldOfView_mm.z = s.fov_recon[2];
    ISMRMRD::Limit l1(uint16_t(or_default(s.e1_min, 0)), uint16_t(or_default(s.e1_max, int(s.e1) - 1)),
                      uint16_t(or_default(s.e1_centre, int(s.e1) / 2)));
    ISMRMRD::Limit l2(uint16_t(or_default(s.e2_min, 0)), uint16_t(or_default(s.e2_max, int(s.e2) - 1)),
                      uint16_t(or_default(s.e2_centre, int(s.e2) / 2)));
    e.encodingLimits.kspace_encoding_step_1 = l1;
    e.encodingLimits.kspace_encoding_step_2 = l2;
    e.trajectory = ISMRMRD::TrajectoryType::CARTESIAN;
    h.encoding.push_back(e);
    std::ostringstream out;
    ISMRMRD::serialize(h, out);
    return out.str();
}

// Random complex k-space grid [RO, E1, E2, CH] as doubles (values exactly representable in float).
std::vector<cdouble> random_grid(const ScanSpec& s, unsigned seed) {
    std::vector<cdouble> g = test::to_double(test::random_array({s.ro, s.e1, s.e2, s.coils}, seed));
    return g;
}

uint64_t bit(int flag) { return uint64_t{1} << (flag - 1); }

// One readout of grid line (p1, p2) (array indices); the encode steps follow from the header centre.
// Samples [first, first + n) of the readout are sent; center_sample = RO/2 - first.
Acquisition readout(const ScanSpec& s, const std::vector<cdouble>& grid, size_t p1, size_t p2, uint32_t scan_counter,
                    size_t first = 0, size_t n = 0) {
    if (n == 0) n = s.ro - first;
    Acquisition a;
    a.head.version = ISMRMRD_VERSION_MAJOR;
    a.head.measurement_uid = 4242;
    a.head.scan_counter = scan_counter;
    a.head.acquisition_time_stamp = 1000 + scan_counter;
    a.head.physiology_time_stamp[0] = 7;
    a.head.number_of_samples = uint16_t(n);
    a.head.available_channels = uint16_t(s.coils);
    a.head.active_channels = uint16_t(s.coils);
    a.head.center_sample = uint16_t(s.ro / 2 - first);
    a.head.sample_time_us = s.acq_dwell_us;
    const float pos[3] = {1.5f, -2.5f, 12.0f}, rd[3] = {1, 0, 0}, pd[3] = {0, 1, 0}, sd[3] = {0, 0, 1},
                tab[3] = {0, 0, -30};
    // Byte copies: the header is packed to 2 bytes, so its float arrays may be misaligned for float*.
    std::memcpy(a.head.position, pos, sizeof pos);
    std::memcpy(a.head.read_dir, rd, sizeof rd);
    std::memcpy(a.head.phase_dir, pd, sizeof pd);
    std::memcpy(a.head.slice_dir, sd, sizeof sd);
    std::memcpy(a.head.patient_table_position, tab, sizeof tab);
    const int c1 = or_default(s.e1_centre, int(s.e1) / 2), c2 = or_default(s.e2_centre, int(s.e2) / 2);
    a.head.idx.kspace_encode_step_1 = uint16_t(int(p1) - (int(s.e1) / 2 - c1));
    a.head.idx.kspace_encode_step_2 = uint16_t(int(p2) - (int(s.e2) / 2 - c2));
    a.data.resize(s.coils * n);
    for (size_t c = 0; c < s.coils; ++c)
        for (size_t i = 0; i < n; ++i)
            a.data[c * n + i] = cfloat(grid[((c * s.e2 + p2) * s.e1 + p1) * s.ro + first + i]);
    return a;
}

// Noise readouts n = M w, w ~ CN(0, I): channels correlated and of unequal power.
struct NoiseModel {
    std::vector<cdouble> mixing;  // coils x coils, row-major
};

NoiseModel make_noise_model(size_t coils, unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<double> nd(0.0, 1.0);
    NoiseModel m;
    m.mixing.resize(coils * coils);
    for (size_t i = 0; i < coils; ++i)
        for (size_t j = 0; j < coils; ++j)
            m.mixing[i * coils + j] = i == j ? cdouble(1.0 + 0.3 * double(i), 0) : cdouble(0.2 * nd(gen), 0.2 * nd(gen));
    return m;
}

std::vector<Acquisition> noise_scans(const ScanSpec& s, const NoiseModel& m, size_t count, unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<double> nd(0.0, std::sqrt(0.5));
    std::vector<Acquisition> out;
    for (size_t k = 0; k < count; ++k) {
        Acquisition a;
        a.head.flags = bit(ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT);
        a.head.scan_counter = uint32_t(k);
        a.head.number_of_samples = uint16_t(s.ro);
        a.head.active_channels = uint16_t(s.coils);
        a.head.available_channels = uint16_t(s.coils);
        a.head.sample_time_us = s.noise_dwell_us;
        a.data.assign(s.coils * s.ro, cfloat(0));
        std::vector<cdouble> w(s.coils);
        for (size_t i = 0; i < s.ro; ++i) {
            for (auto& v : w) v = cdouble(nd(gen), nd(gen));
            for (size_t c = 0; c < s.coils; ++c) {
                cdouble acc = 0;
                for (size_t d = 0; d < s.coils; ++d) acc += m.mixing[c * s.coils + d] * w[d];
                a.data[c * s.ro + i] = cfloat(acc);
            }
        }
        out.push_back(std::move(a));
    }
    return out;
}

// ---------------------------------------------------------------------------------------------------
// Double-precision references.

// Sample covariance (N - 1 normalisation) of the noise readouts, row-major [c][d] = E[x_c conj(x_d)].
std::vector<cdouble> noise_covariance(const std::vector<Acquisition>& noise) {
    const size_t c = noise.at(0).head.active_channels;
    std::vector<cdouble> cov(c * c, 0.0);
    size_t n = 0;
    for (const Acquisition& a : noise) {
        const size_t ns = a.head.number_of_samples;
        for (size_t s = 0; s < ns; ++s)
            for (size_t i = 0; i < c; ++i)
                for (size_t j = 0; j < c; ++j)
                    cov[i * c + j] += cdouble(a.data[i * ns + s]) * std::conj(cdouble(a.data[j * ns + s]));
        n += ns;
    }
    for (auto& v : cov) v /= double(n - 1);
    return cov;
}

// W = scale * inverse(lower Cholesky factor of cov), by the textbook recurrences.
std::vector<cdouble> reference_whitener(const std::vector<cdouble>& cov, size_t c, double scale) {
    std::vector<cdouble> l(c * c, 0.0), inv(c * c, 0.0);
    for (size_t j = 0; j < c; ++j) {
        cdouble d = cov[j * c + j];
        for (size_t k = 0; k < j; ++k) d -= l[j * c + k] * std::conj(l[j * c + k]);
        l[j * c + j] = std::sqrt(d.real());
        for (size_t i = j + 1; i < c; ++i) {
            cdouble v = cov[i * c + j];
            for (size_t k = 0; k < j; ++k) v -= l[i * c + k] * std::conj(l[j * c + k]);
            l[i * c + j] = v / l[j * c + j];
        }
    }
    for (size_t i = 0; i < c; ++i) {
        inv[i * c + i] = 1.0 / l[i * c + i];
        for (size_t j = 0; j < i; ++j) {
            cdouble v = 0;
            for (size_t k = j; k < i; ++k) v += l[i * c + k] * inv[k * c + j];
            inv[i * c + j] = -v / l[i * c + i];
        }
    }
    for (auto& v : inv) v *= scale;
    return inv;
}

// y[..., c] = sum_d w[c][d] x[..., d] over the last axis of length c.
std::vector<cdouble> mix(const std::vector<cdouble>& x, const std::vector<cdouble>& w, size_t c) {
    const size_t n = x.size() / c;
    std::vector<cdouble> y(x.size(), 0.0);
    for (size_t i = 0; i < c; ++i)
        for (size_t j = 0; j < c; ++j)
            for (size_t p = 0; p < n; ++p) y[i * n + p] += w[i * c + j] * x[j * n + p];
    return y;
}

// Centred window of a 4-d array (index n/2 of each axis onto m/2), zero where the window is larger.
std::vector<cdouble> crop_centred(const std::vector<cdouble>& x, const Shape& from, const Shape& to) {
    std::vector<cdouble> y(to.size(), 0.0);
    for (size_t c = 0; c < to[3]; ++c)
        for (size_t z = 0; z < to[2]; ++z)
            for (size_t yy = 0; yy < to[1]; ++yy)
                for (size_t xx = 0; xx < to[0]; ++xx) {
                    const long sx = long(xx) + long(from[0] / 2) - long(to[0] / 2);
                    const long sy = long(yy) + long(from[1] / 2) - long(to[1] / 2);
                    const long sz = long(z) + long(from[2] / 2) - long(to[2] / 2);
                    if (sx < 0 || sy < 0 || sz < 0 || sx >= long(from[0]) || sy >= long(from[1]) || sz >= long(from[2]))
                        continue;
                    y[((c * to[2] + z) * to[1] + yy) * to[0] + xx] =
                        x[((c * from[2] + size_t(sz)) * from[1] + size_t(sy)) * from[0] + size_t(sx)];
                }
    return y;
}

// Per-coil images of a zero-filled grid [RO, E1, E2, CH]: exact inverse DFT, then the centred crop.
std::vector<cdouble> reference_images(const std::vector<cdouble>& grid, const Shape& grid_shape,
                                      const Shape& image_shape) {
    const AxisMask axes = grid_shape[2] > 1 ? 0b111u : 0b011u;
    return crop_centred(test::reference_centred_dft(grid, grid_shape, axes, FFTDirection::Inverse), grid_shape,
                        image_shape);
}

std::vector<cdouble> rss(const std::vector<cdouble>& x, size_t coils) {
    const size_t n = x.size() / coils;
    std::vector<cdouble> y(n, 0.0);
    for (size_t p = 0; p < n; ++p) {
        double acc = 0;
        for (size_t c = 0; c < coils; ++c) acc += std::norm(x[c * n + p]);
        y[p] = std::sqrt(acc);
    }
    return y;
}

double rel_l2(const std::vector<double>& a, const std::vector<double>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// ---------------------------------------------------------------------------------------------------
// Chains.

// Takes plain acquisitions only, so the typed gadget base materialises pending line operations for it.
class LineWise final : public TypedGadget<Acquisition> {
public:
    using Gadget::process;  // the typed overloads below do not hide the Message one
    void process(Acquisition& acq, Emitter& out) override { out.emit(std::move(acq)); }
};

struct ChainOptions {
    bool noise = true, roos = true, fft = true;
    int combine = -1;      // -1: none, else config::CombineMethod
    int finish = -1;       // -1: none, else config::ImageOutput
    bool ushort = false;
    config::TriggerDimension trigger = config::TRIGGER_AUTO;
    bool emit_calibration = false;
    bool line_wise_gadget = false;  // a plain pass-through after ROOS: forces host materialisation
};

std::vector<std::unique_ptr<Gadget>> make_chain(const ChainOptions& o) {
    std::vector<std::unique_ptr<Gadget>> g;
    if (o.noise) g.push_back(make_noise_adjust(config::NoiseAdjust{}));
    if (o.roos) g.push_back(make_remove_ro_oversampling(config::RemoveROOversampling{}));
    if (o.line_wise_gadget) g.push_back(std::make_unique<LineWise>());
    config::AccumulateTrigger acc;
    acc.set_trigger(o.trigger);
    acc.set_emit_calibration(o.emit_calibration);
    g.push_back(make_accumulate_trigger(acc));
    if (o.fft) g.push_back(make_fft(config::FFT{}));
    if (o.combine >= 0) {
        config::CoilCombine cc;
        cc.set_method(config::CombineMethod(o.combine));
        g.push_back(make_coil_combine(cc));
    }
    if (o.finish >= 0) {
        config::ImageFinish f;
        f.set_output(config::ImageOutput(o.finish));
        f.set_pixel_type(o.ushort ? config::PIXEL_USHORT : config::PIXEL_FLOAT);
        g.push_back(make_image_finish(f));
    }
    return g;
}

std::vector<Message> to_messages(const std::vector<Acquisition>& acqs) {
    return std::vector<Message>(acqs.begin(), acqs.end());
}

template <class T>
std::vector<T> only(std::vector<Message> msgs) {
    std::vector<T> out;
    for (Message& m : msgs)
        if (auto* t = std::get_if<T>(&m)) out.push_back(std::move(*t));
    return out;
}

std::vector<float> float_pixels(const Image& img) {
    EXPECT_EQ(img.head.data_type, ISMRMRD::ISMRMRD_FLOAT);
    std::vector<float> v(img.pixels.size() / sizeof(float));
    std::memcpy(v.data(), img.pixels.data(), v.size() * sizeof(float));
    return v;
}

std::vector<cfloat> complex_pixels(const Image& img) {
    EXPECT_EQ(img.head.data_type, ISMRMRD::ISMRMRD_CXFLOAT);
    std::vector<cfloat> v(img.pixels.size() / sizeof(cfloat));
    std::memcpy(v.data(), img.pixels.data(), v.size() * sizeof(cfloat));
    return v;
}

std::vector<cdouble> as_double(const std::vector<cfloat>& v) { return std::vector<cdouble>(v.begin(), v.end()); }
std::vector<double> abs_of(const std::vector<cdouble>& v) {
    std::vector<double> a(v.size());
    for (size_t i = 0; i < v.size(); ++i) a[i] = std::abs(v[i]);
    return a;
}

// ---------------------------------------------------------------------------------------------------
// (1) + (2): phantom through the whole chain against the exact DFT of the same samples.

struct PhantomScan {
    ScanSpec spec;
    std::vector<cdouble> grid;          // [RO, E1, 1, CH], fully sampled
    std::vector<Acquisition> noise, lines;
    std::vector<cdouble> whitener;      // reference W (double)
};

PhantomScan phantom_scan(size_t nx, size_t ny, size_t coils) {
    phantom::PhantomSpec ps;
    ps.nx = int(nx);
    ps.ny = int(ny);
    ps.coils = int(coils);
    ps.fov_mm[0] = 200;
    ps.fov_mm[1] = 200.0 * double(ny) / double(nx);
    ps.ro_oversampling = 2;
    ps.snr = 20;
    ps.noise_scan = true;
    phantom::Phantom ph(ps);

    PhantomScan s;
    s.spec.ro = 2 * nx;
    s.spec.e1 = ny;
    s.spec.coils = coils;
    s.spec.recon_x = nx;
    s.spec.recon_y = ny;
    s.spec.fov_enc[0] = float(2 * ps.fov_mm[0]);
    s.spec.fov_enc[1] = s.spec.fov_recon[1] = float(ps.fov_mm[1]);
    s.spec.fov_recon[0] = float(ps.fov_mm[0]);
    s.spec.acq_dwell_us = 2.5f;
    s.spec.noise_dwell_us = 5.0f;
    const std::vector<std::complex<float>> k = ph.kspace_all(0);
    s.grid.assign(k.begin(), k.end());
    EXPECT_EQ(s.grid.size(), s.spec.ro * ny * coils);

    // Noise readouts from the phantom's own correlated noise model.
    for (size_t r = 0; r < 32; ++r) {
        Acquisition a;
        a.head.flags = bit(ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT);
        a.head.scan_counter = uint32_t(r);
        a.head.number_of_samples = uint16_t(s.spec.ro);
        a.head.active_channels = a.head.available_channels = uint16_t(coils);
        a.head.sample_time_us = s.spec.noise_dwell_us;
        a.data.assign(coils * s.spec.ro, cfloat(0));
        ph.add_noise(a.data.data(), int(s.spec.ro), 1000 + r);
        s.noise.push_back(std::move(a));
    }
    // Imaging readouts carry noise too (part of "the same k-space samples" the reference sees).
    for (size_t p = 0; p < ny; ++p) {
        Acquisition a = readout(s.spec, s.grid, p, 0, uint32_t(100 + p));
        ph.add_noise(a.data.data(), int(s.spec.ro), 5000 + p);
        for (size_t c = 0; c < coils; ++c)
            for (size_t i = 0; i < s.spec.ro; ++i) s.grid[(c * ny + p) * s.spec.ro + i] = cdouble(a.data[c * s.spec.ro + i]);
        if (p + 1 == ny) a.head.flags |= bit(ISMRMRD::ISMRMRD_ACQ_LAST_IN_SLICE);
        s.lines.push_back(std::move(a));
    }
    const double scale = std::sqrt(2.0 * s.spec.acq_dwell_us / s.spec.noise_dwell_us * s.spec.receiver_bw);
    s.whitener = reference_whitener(noise_covariance(s.noise), coils, scale);
    return s;
}

std::vector<Message> run_phantom(const PhantomScan& s, const ChainOptions& o, std::shared_ptr<Backend> be) {
    std::vector<Message> in = to_messages(s.noise);
    for (const Acquisition& a : s.lines) in.push_back(a);
    return test::run_chain(make_chain(o), test::make_session(header_xml(s.spec), std::move(be)), in);
}

class PhantomChain : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        scan_ = std::make_unique<PhantomScan>(phantom_scan(64, 48, 8));
        const Shape grid_shape{scan_->spec.ro, scan_->spec.e1, 1, scan_->spec.coils};
        const Shape image_shape{scan_->spec.recon_x, scan_->spec.recon_y, 1, scan_->spec.coils};
        coil_ref_ = reference_images(mix(scan_->grid, scan_->whitener, scan_->spec.coils), grid_shape, image_shape);
        rss_ref_ = rss(coil_ref_, scan_->spec.coils);
    }
    static void TearDownTestSuite() { scan_.reset(); }

    static std::unique_ptr<PhantomScan> scan_;
    static std::vector<cdouble> coil_ref_, rss_ref_;
};
std::unique_ptr<PhantomScan> PhantomChain::scan_;
std::vector<cdouble> PhantomChain::coil_ref_, PhantomChain::rss_ref_;

TEST_F(PhantomChain, PerCoilImagesMatchExactDft) {
    auto be = make_cpu_backend();
    for (bool line_wise : {false, true}) {
        ChainOptions o;
        o.line_wise_gadget = line_wise;  // also through materialize(): the host path must agree
        auto imgs = only<ImageArray>(run_phantom(*scan_, o, be));
        ASSERT_EQ(imgs.size(), 1u);
        const ImageArray& img = imgs[0];
        EXPECT_EQ(img.data.shape(), (Shape{64, 48, 1, 8}));
        EXPECT_EQ(img.head.channels, 8);
        const double err = test::relative_error(be->to_host(img.data), coil_ref_);
        std::cout << "per-coil images vs exact DFT (" << (line_wise ? "line-wise host path" : "batched") << "): rel L2 "
                  << err << "\n";
        EXPECT_LT(err, 1e-4) << (line_wise ? "materialised per line" : "batched in the accumulator");
    }
}

TEST_F(PhantomChain, RssMagnitudeAndComplexMatchExactDft) {
    auto be = make_cpu_backend();
    ChainOptions o;
    o.combine = config::COMBINE_RSS;
    o.finish = config::OUTPUT_MAGNITUDE;
    auto mag = only<Image>(run_phantom(*scan_, o, be));
    ASSERT_EQ(mag.size(), 1u);
    EXPECT_EQ(mag[0].head.matrix_size[0], 64);
    EXPECT_EQ(mag[0].head.matrix_size[1], 48);
    EXPECT_EQ(mag[0].head.channels, 1);
    EXPECT_EQ(mag[0].head.image_type, ISMRMRD::ISMRMRD_IMTYPE_MAGNITUDE);
    const std::vector<float> m = float_pixels(mag[0]);
    const double mag_err = rel_l2(std::vector<double>(m.begin(), m.end()), abs_of(rss_ref_));
    std::cout << "RSS magnitude vs exact DFT: rel L2 " << mag_err << "\n";
    EXPECT_LT(mag_err, 1e-4);

    o.finish = config::OUTPUT_COMPLEX;
    auto cx = only<Image>(run_phantom(*scan_, o, be));
    ASSERT_EQ(cx.size(), 1u);
    EXPECT_EQ(cx[0].head.image_type, ISMRMRD::ISMRMRD_IMTYPE_COMPLEX);
    EXPECT_LT(test::relative_error(as_double(complex_pixels(cx[0])), rss_ref_), 1e-4);

    // Per-coil complex images straight out of ImageFinish (no combination).
    o.combine = -1;
    auto coils = only<Image>(run_phantom(*scan_, o, be));
    ASSERT_EQ(coils.size(), 1u);
    EXPECT_EQ(coils[0].head.channels, 8);
    EXPECT_LT(test::relative_error(as_double(complex_pixels(coils[0])), coil_ref_), 1e-4);
}

TEST_F(PhantomChain, CudaMatchesCpu) {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
    auto cpu = make_cpu_backend();
    auto gpu = make_cuda_backend();
    for (int combine : {-1, int(config::COMBINE_RSS), int(config::COMBINE_WALSH)}) {
        ChainOptions o;
        o.combine = combine;
        o.finish = config::OUTPUT_COMPLEX;
        auto a = only<Image>(run_phantom(*scan_, o, cpu));
        auto b = only<Image>(run_phantom(*scan_, o, gpu));
        ASSERT_EQ(a.size(), 1u);
        ASSERT_EQ(b.size(), 1u);
        EXPECT_EQ(a[0].head.matrix_size[0], b[0].head.matrix_size[0]);
        const double err = test::relative_error(as_double(complex_pixels(b[0])), as_double(complex_pixels(a[0])));
        std::cout << "CUDA vs CPU, combine " << combine << ": rel L2 " << err << "\n";
        EXPECT_LT(err, 1e-5) << "combine " << combine;
    }
}

TEST_F(PhantomChain, WalshCombinationGivesOneChannel) {
    auto be = make_cpu_backend();
    ChainOptions o;
    o.combine = config::COMBINE_WALSH;
    o.finish = config::OUTPUT_MAGNITUDE;
    auto imgs = only<Image>(run_phantom(*scan_, o, be));
    ASSERT_EQ(imgs.size(), 1u);
    EXPECT_EQ(imgs[0].head.channels, 1);
    const std::vector<float> m = float_pixels(imgs[0]);
    ASSERT_EQ(m.size(), 64u * 48u);
    // Walsh combination of whitened data is at least as strong as RSS normalised by the maps, and
    // never exceeds RSS (Cauchy-Schwarz with unit-norm maps).
    const std::vector<double> r = abs_of(rss_ref_);
    for (size_t i = 0; i < m.size(); ++i) {
        ASSERT_TRUE(std::isfinite(m[i]));
        EXPECT_LE(m[i], r[i] * (1 + 1e-3) + 1e-6) << "pixel " << i;
    }
    ISMRMRD::MetaContainer meta = parse_meta(imgs[0].meta);
    ASSERT_GE(meta.length(kMetaHistory), 3u);
    EXPECT_STREQ(meta.as_str(kMetaHistory, 0), "FFT");
    EXPECT_STREQ(meta.as_str(kMetaHistory, 1), "COMBINE_WALSH");
}

TEST_F(PhantomChain, UshortOutputPeaksAt4095) {
    auto be = make_cpu_backend();
    ChainOptions o;
    o.combine = config::COMBINE_RSS;
    o.finish = config::OUTPUT_MAGNITUDE;
    o.ushort = true;
    auto imgs = only<Image>(run_phantom(*scan_, o, be));
    ASSERT_EQ(imgs.size(), 1u);
    EXPECT_EQ(imgs[0].head.data_type, ISMRMRD::ISMRMRD_USHORT);
    std::vector<uint16_t> v(imgs[0].pixels.size() / 2);
    std::memcpy(v.data(), imgs[0].pixels.data(), v.size() * 2);
    EXPECT_EQ(*std::max_element(v.begin(), v.end()), 4095);
    const std::vector<double> r = abs_of(rss_ref_);
    const double peak = *std::max_element(r.begin(), r.end());
    for (size_t i = 0; i < v.size(); i += 97) EXPECT_NEAR(v[i], r[i] / peak * 4095.0, 1.0) << "pixel " << i;
}

// ---------------------------------------------------------------------------------------------------
// (3) + (4): the real Siemens dataset.

std::string real_dataset_path() {
    return std::string(LARMOR_SHARED_DATA_DIR) + "/gadgetron-grappa-r3/meas_MID00349_FID09273_SNR_R3.h5";
}

bool exists(const std::string& p) { return std::ifstream(p).good(); }

TEST(RealData, PrewhitenedNoiseHasIdentityCovariance) {
    const std::string path = real_dataset_path();
    if (!exists(path)) GTEST_SKIP() << path << " absent";
    test::Dataset ds = test::read_dataset(path);
    auto be = make_cpu_backend();
    config::NoiseAdjust cfg;
    cfg.set_pass_noise_scans(true);
    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(make_noise_adjust(cfg));
    const std::vector<Message> out =
        test::run_chain(std::move(g), test::make_session(ds.header_xml, be), to_messages(ds.acquisitions));
    ASSERT_EQ(out.size(), ds.acquisitions.size());

    // Noise scans pass as they are; imaging data go on with the whitener attached.
    const std::vector<Acquisition> noise = only<Acquisition>(out);
    const std::vector<PendingAcquisition> imaging = only<PendingAcquisition>(out);
    ASSERT_EQ(noise.size() + imaging.size(), out.size());
    for (const Acquisition& a : noise) EXPECT_TRUE(a.flag(ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT));
    ASSERT_FALSE(noise.empty());
    ASSERT_FALSE(imaging.empty());
    const PendingAcquisition* first_image = &imaging[0];
    ASSERT_TRUE(first_image->ops.coil_mix);
    const size_t c = noise[0].head.active_channels;
    EXPECT_EQ(c, 14u);
    for (const PendingAcquisition& p : imaging) {
        EXPECT_FALSE(p.acq.flag(ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT));
        EXPECT_EQ(p.ops.coil_mix, first_image->ops.coil_mix);
    }

    // Gadgetron's bandwidth scale s: W Sigma W^H = s^2 I.
    const double s = std::sqrt(2.0 * first_image->acq.head.sample_time_us / noise[0].head.sample_time_us * 0.793);
    // Whiten the noise scans themselves with W (host path), then measure their covariance.
    std::vector<Acquisition> white;
    for (const Acquisition& a : noise) white.push_back(materialize(PendingAcquisition{a, first_image->ops}));
    const std::vector<cdouble> cov = noise_covariance(white);
    double worst = 0;
    for (size_t i = 0; i < c; ++i)
        for (size_t j = 0; j < c; ++j)
            worst = std::max(worst, std::abs(cov[i * c + j] / (s * s) - (i == j ? 1.0 : 0.0)));
    std::cout << "prewhitened noise: max |Sigma / s^2 - I| = " << worst << " (s = " << s << ")\n";
    EXPECT_LT(worst, 1e-3);
    // Before whitening the channels are far from white (the test is not vacuous).
    const std::vector<cdouble> raw = noise_covariance(noise);
    double raw_off = 0, raw_diag = 0;
    for (size_t i = 0; i < c; ++i) {
        raw_diag = std::max(raw_diag, raw[i * c + i].real());
        for (size_t j = 0; j < i; ++j) raw_off = std::max(raw_off, std::abs(raw[i * c + j]));
    }
    EXPECT_GT(raw_off / raw_diag, 0.05);
}

// Fraction of the image energy outside the object's support: ghosts of an aliased image land outside.
// The support is the object in the ACS image (smooth, unaliased), grown by a margin for its blur.
std::vector<char> support_of(const std::vector<float>& img, size_t nx, size_t ny, float threshold, int margin) {
    const float peak = *std::max_element(img.begin(), img.end());
    std::vector<char> core(img.size(), 0);
    for (size_t i = 0; i < img.size(); ++i) core[i] = img[i] > threshold * peak;
    return test::grow(core, nx, ny, margin);
}

double energy_outside(const std::vector<float>& img, const std::vector<char>& support) {
    double in = 0, out = 0;
    for (size_t i = 0; i < img.size(); ++i) (support[i] ? in : out) += double(img[i]) * img[i];
    return out / (in + out);
}

TEST(RealData, ReconstructsImageAndArtifactFreeCalibrationImage) {
    const std::string path = real_dataset_path();
    if (!exists(path)) GTEST_SKIP() << path << " absent";
    test::Dataset ds = test::read_dataset(path);
    auto be = make_cpu_backend();
    ChainOptions o;
    o.emit_calibration = true;
    o.combine = config::COMBINE_RSS;
    o.finish = config::OUTPUT_MAGNITUDE;
    auto imgs = only<Image>(test::run_chain(make_chain(o), test::make_session(ds.header_xml, be),
                                            to_messages(ds.acquisitions)));
    ASSERT_EQ(imgs.size(), 2u);
    const Image& acs = imgs[0];   // calibration is emitted before the data
    const Image& main = imgs[1];
    EXPECT_EQ(acs.head.image_series_index, 2);
    EXPECT_EQ(main.head.image_series_index, 1);
    EXPECT_EQ(parse_meta(acs.meta).as_long(kMetaCalibration), 1);
    EXPECT_EQ(parse_meta(main.meta).length(kMetaCalibration), 0u);

    const Acquisition* centre = nullptr;
    for (const Acquisition& a : ds.acquisitions)
        if (!a.flag(ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT) && a.head.idx.kspace_encode_step_1 == 54) centre = &a;
    ASSERT_NE(centre, nullptr);
    for (const Image* img : {&acs, &main}) {
        const auto& h = img->head;
        EXPECT_EQ(h.matrix_size[0], 192);
        EXPECT_EQ(h.matrix_size[1], 144);
        EXPECT_EQ(h.matrix_size[2], 1);
        EXPECT_FLOAT_EQ(h.field_of_view[0], 280.f);
        EXPECT_FLOAT_EQ(h.field_of_view[1], 210.f);
        EXPECT_FLOAT_EQ(h.field_of_view[2], 8.f);
        EXPECT_EQ(h.channels, 1);
        EXPECT_EQ(h.data_type, ISMRMRD::ISMRMRD_FLOAT);
        EXPECT_EQ(h.image_index, 1);
        EXPECT_EQ(uint32_t{h.measurement_uid}, uint32_t{centre->head.measurement_uid});  // copied: packed headers
        for (int i = 0; i < 3; ++i) {
            EXPECT_FLOAT_EQ(h.position[i], centre->head.position[i]);
            EXPECT_FLOAT_EQ(h.read_dir[i], centre->head.read_dir[i]);
            EXPECT_FLOAT_EQ(h.phase_dir[i], centre->head.phase_dir[i]);
            EXPECT_FLOAT_EQ(h.slice_dir[i], centre->head.slice_dir[i]);
            EXPECT_FLOAT_EQ(h.patient_table_position[i], centre->head.patient_table_position[i]);
        }
        EXPECT_EQ(img->pixels.size(), 192u * 144u * sizeof(float));
    }
    EXPECT_EQ(uint32_t{main.head.acquisition_time_stamp}, uint32_t{centre->head.acquisition_time_stamp});

    const std::vector<float> a = float_pixels(acs), m = float_pixels(main);
    const std::vector<char> support = support_of(a, 192, 144, 0.1f, 3);
    const double acs_out = energy_outside(a, support);
    const double r3_out = energy_outside(m, support);
    std::cout << "energy outside the object: ACS image " << acs_out << ", R=3 zero-filled image " << r3_out << "\n";
    // The ACS image is artifact-free; the R=3 image (the negative control) is aliased.
    EXPECT_LT(acs_out, 0.01);
    EXPECT_GT(r3_out, 5 * acs_out);
    EXPECT_GT(r3_out, 0.05);
}

// ---------------------------------------------------------------------------------------------------
// (5) placement, 3D, triggers, errors.

// One k-space of an emitted recon buffer, flattened in emission order: the calibration lines (ref)
// before the imaging data, as the accumulator keeps them.
struct Buf {
    CArray data;
    std::vector<uint8_t> sampled;
    ISMRMRD::ISMRMRD_AcquisitionHeader reference{};
    EncodingGeometry geometry;
    bool calibration_only = false;
};

std::vector<Buf> flatten(const std::vector<ReconBuffer>& rbs) {
    std::vector<Buf> out;
    for (const ReconBuffer& rb : rbs)
        for (const KSpace* k : {&rb.ref, &rb.data})
            if (!k->empty()) out.push_back({k->data, k->sampled, k->reference, rb.geometry, k == &rb.ref});
    return out;
}

// Runs Accumulate alone and returns the emitted buffers, on the host.
std::vector<Buf> accumulate(const ScanSpec& s, const std::vector<Acquisition>& lines,
                            config::AccumulateTrigger cfg = {}) {
    auto be = make_cpu_backend(1);
    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(make_accumulate_trigger(cfg));
    auto out = flatten(only<ReconBuffer>(test::run_chain(std::move(g), test::make_session(header_xml(s), be), to_messages(lines))));
    for (auto& b : out) b.data = be->to_host(b.data);
    return out;
}

TEST(Accumulate, PartialFourierLinesLandAroundTheCentre) {
    // 5/8 partial Fourier both ways: the header's centre maps onto E1/2 wherever the limits start.
    for (int convention = 0; convention < 2; ++convention) {
        ScanSpec s;
        s.ro = 16;
        s.recon_x = 16;
        s.e1 = s.recon_y = 32;
        s.coils = 2;
        s.fov_enc[0] = s.fov_recon[0] = 100;
        const size_t first = 12;  // array lines 12..31 sampled
        if (convention == 0) {    // Siemens: counters are grid indices, limits [12, 31], centre 16
            s.e1_min = 12, s.e1_max = 31, s.e1_centre = 16;
        } else {                  // counters from 0: limits [0, 19], centre 4
            s.e1_min = 0, s.e1_max = 19, s.e1_centre = 4;
        }
        const std::vector<cdouble> grid = random_grid(s, 3);
        std::vector<Acquisition> lines;
        for (size_t p = first; p < s.e1; ++p) lines.push_back(readout(s, grid, p, 0, uint32_t(p)));
        auto bufs = accumulate(s, lines);
        ASSERT_EQ(bufs.size(), 1u);
        const Buf& b = bufs[0];
        ASSERT_EQ(b.data.shape(), (Shape{16, 32, 1, 2}));
        for (size_t p = 0; p < s.e1; ++p) {
            EXPECT_EQ(b.sampled[p], p >= first ? 1 : 0) << "line " << p;
            for (size_t c = 0; c < 2; ++c)
                for (size_t x = 0; x < 16; ++x) {
                    const size_t i = (c * 32 + p) * 16 + x;
                    EXPECT_EQ(b.data.data()[i], p >= first ? cfloat(grid[i]) : cfloat(0)) << "line " << p;
                }
        }
        // The reference header is the k-space centre line.
        EXPECT_EQ(b.reference.idx.kspace_encode_step_1, s.e1_centre);
    }
}

TEST(Accumulate, AsymmetricEchoIsPlacedAtItsCentreSample) {
    ScanSpec s;
    s.ro = 32;
    s.recon_x = 32;
    s.fov_enc[0] = s.fov_recon[0] = 100;
    s.e1 = s.recon_y = 8;
    s.coils = 3;
    const std::vector<cdouble> grid = random_grid(s, 5);
    std::vector<Acquisition> lines;
    for (size_t p = 0; p < s.e1; ++p) lines.push_back(readout(s, grid, p, 0, uint32_t(p), 10, 22));  // centre 6
    ASSERT_EQ(lines[0].head.center_sample, 6);
    auto bufs = accumulate(s, lines);
    ASSERT_EQ(bufs.size(), 1u);
    for (size_t c = 0; c < 3; ++c)
        for (size_t p = 0; p < s.e1; ++p)
            for (size_t x = 0; x < 32; ++x) {
                const size_t i = (c * 8 + p) * 32 + x;
                EXPECT_EQ(bufs[0].data.data()[i], x >= 10 ? cfloat(grid[i]) : cfloat(0));
            }
}

TEST(Accumulate, AsymmetricEchoWithOversamplingMatchesDft) {
    // Oversampled asymmetric echo through ROOS on the buffer: the image is the exact DFT of the
    // zero-filled grid. (Removing the oversampling line by line, as Gadgetron's gadget does, transforms
    // the acquired samples alone: exact only for objects inside the reconstructed FOV, so not compared
    // here on random data.)
    ScanSpec s;
    s.ro = 64;
    s.recon_x = 32;
    s.e1 = s.recon_y = 24;
    s.coils = 3;
    std::vector<cdouble> grid = random_grid(s, 9);
    const size_t first = 16;
    for (size_t c = 0; c < s.coils; ++c)
        for (size_t p = 0; p < s.e1; ++p)
            for (size_t x = 0; x < first; ++x) grid[(c * s.e1 + p) * s.ro + x] = 0;
    std::vector<Acquisition> lines;
    for (size_t p = 0; p < s.e1; ++p) lines.push_back(readout(s, grid, p, 0, uint32_t(p), first, s.ro - first));
    const std::vector<cdouble> ref =
        reference_images(grid, {s.ro, s.e1, 1, s.coils}, {s.recon_x, s.recon_y, 1, s.coils});
    auto be = make_cpu_backend(1);
    ChainOptions o;
    o.noise = false;
    auto imgs = only<ImageArray>(test::run_chain(make_chain(o), test::make_session(header_xml(s), be), to_messages(lines)));
    ASSERT_EQ(imgs.size(), 1u);
    EXPECT_LT(test::relative_error(be->to_host(imgs[0].data), ref), 1e-5);
}

TEST(Accumulate, ThreeDimensionalBufferAndSliceOversamplingCrop) {
    ScanSpec s;
    s.ro = 32;
    s.recon_x = 16;
    s.e1 = s.recon_y = 12;
    s.e2 = 10;
    s.recon_z = 8;
    s.fov_enc[2] = 100, s.fov_recon[2] = 80;  // 25% slice oversampling: 10 partitions, 8 reconstructed
    s.coils = 2;
    const std::vector<cdouble> grid = random_grid(s, 11);
    std::vector<Acquisition> lines;
    uint32_t n = 0;
    for (size_t p2 = 0; p2 < s.e2; ++p2)
        for (size_t p1 = 0; p1 < s.e1; ++p1) lines.push_back(readout(s, grid, p1, p2, n++));
    lines.back().head.flags |= bit(ISMRMRD::ISMRMRD_ACQ_LAST_IN_MEASUREMENT);
    auto be = make_cpu_backend(1);
    ChainOptions o;
    o.noise = false;
    auto imgs = only<ImageArray>(test::run_chain(make_chain(o), test::make_session(header_xml(s), be), to_messages(lines)));
    ASSERT_EQ(imgs.size(), 1u);
    ASSERT_EQ(imgs[0].data.shape(), (Shape{16, 12, 8, 2}));
    EXPECT_EQ(imgs[0].head.matrix_size[2], 8);
    EXPECT_FLOAT_EQ(imgs[0].head.field_of_view[2], 80.f);
    const std::vector<cdouble> ref = reference_images(grid, {32, 12, 10, 2}, {16, 12, 8, 2});
    EXPECT_LT(test::relative_error(be->to_host(imgs[0].data), ref), 1e-5);
}

TEST(Accumulate, SparserSecondFrameOnCudaStartsClean) {
    // The batch slots of one buffer are reused: a sparser second frame (partial Fourier, asymmetric
    // echo) must not see the first frame's samples.
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
    ScanSpec s;
    s.ro = s.recon_x = 32;
    s.fov_enc[0] = s.fov_recon[0] = 100;
    s.e1 = s.recon_y = 16;
    s.coils = 2;
    const std::vector<cdouble> g1 = random_grid(s, 1), g2 = random_grid(s, 2);
    std::vector<Acquisition> lines;
    for (size_t p = 0; p < 16; ++p) lines.push_back(readout(s, g1, p, 0, uint32_t(p)));
    lines.back().head.flags |= bit(ISMRMRD::ISMRMRD_ACQ_LAST_IN_SLICE);
    for (size_t p = 6; p < 16; ++p) {
        lines.push_back(readout(s, g2, p, 0, uint32_t(16 + p), 8, 24));
        lines.back().head.idx.repetition = 1;
    }
    auto gpu = make_cuda_backend();
    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(make_accumulate_trigger(config::AccumulateTrigger{}));
    auto gpu_bufs = flatten(only<ReconBuffer>(test::run_chain(std::move(g), test::make_session(header_xml(s), gpu), to_messages(lines))));
    auto cpu_bufs = accumulate(s, lines);
    ASSERT_EQ(gpu_bufs.size(), 2u);
    ASSERT_EQ(cpu_bufs.size(), 2u);
    const CArray second = gpu->to_host(gpu_bufs[1].data);
    EXPECT_EQ(test::relative_error(second, test::to_double(cpu_bufs[1].data)), 0.0);
}

TEST(Accumulate, RepeatedLinesOnCudaAreAveraged) {
    // Repeated lines are averaged on the device (running mean); the result must be the CPU one.
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
    ScanSpec s;
    s.ro = s.recon_x = 16;
    s.fov_enc[0] = s.fov_recon[0] = 100;
    s.e1 = s.recon_y = 8;
    s.coils = 3;
    const std::vector<cdouble> g1 = random_grid(s, 1), g2 = random_grid(s, 2);
    std::vector<Acquisition> lines;
    for (size_t p = 0; p < 8; ++p) lines.push_back(readout(s, g1, p, 0, uint32_t(p)));
    for (size_t p = 2; p < 5; ++p) {
        lines.push_back(readout(s, g2, p, 0, uint32_t(8 + p)));
        lines.back().head.idx.average = 1;
    }
    auto gpu = make_cuda_backend();
    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(make_accumulate_trigger(config::AccumulateTrigger{}));
    auto gpu_bufs = flatten(only<ReconBuffer>(test::run_chain(std::move(g), test::make_session(header_xml(s), gpu), to_messages(lines))));
    auto cpu_bufs = accumulate(s, lines);
    ASSERT_EQ(gpu_bufs.size(), 1u);
    ASSERT_EQ(cpu_bufs.size(), 1u);
    EXPECT_LT(test::relative_error(gpu->to_host(gpu_bufs[0].data), test::to_double(cpu_bufs[0].data)), 1e-7);
}

// Many readouts in an order that crosses batch boundaries, with repeats inside one batch and across
// batches, full and asymmetric-echo readouts, and both pending line operations (readout oversampling
// removal, coil mixing): the buffer must equal a double-precision reference built line by line
// (zero-fill the readout, centred inverse DFT, keep the centre half, forward DFT, mix, average).
void check_batched_line_operations(std::shared_ptr<Backend> be) {
    ScanSpec s;
    s.ro = 48;
    s.recon_x = 24;
    s.e1 = s.recon_y = 20;
    s.coils = 3;
    const size_t out_ch = 2;
    const std::vector<cdouble> g1 = random_grid(s, 21), g2 = random_grid(s, 22);
    auto mix = std::make_shared<std::vector<cfloat>>();
    std::vector<cdouble> mixd;
    for (size_t i = 0; i < out_ch * s.coils; ++i) {
        const cfloat m(0.3f + 0.1f * float(i), -0.2f + 0.07f * float(i * i % 5));
        mix->push_back(m);
        mixd.push_back(cdouble(m));
    }
    struct Shot {
        size_t line, first;
        int copy;
    };
    std::vector<Shot> shots;
    for (size_t p = 0; p < s.e1; ++p) shots.push_back({(p * 7) % s.e1, p % 3 == 0 ? size_t(10) : 0, 0});
    for (size_t p : {3u, 4u, 3u, 17u, 0u, 4u, 4u}) shots.push_back({p, p % 2 ? size_t(6) : 0, 1});
    std::vector<PendingAcquisition> lines;
    for (size_t i = 0; i < shots.size(); ++i) {
        const Shot& sh = shots[i];
        PendingAcquisition p{readout(s, sh.copy ? g2 : g1, sh.line, 0, uint32_t(i), sh.first), {}};
        p.ops.remove_ro_oversampling = true;
        p.ops.coil_mix = mix;
        lines.push_back(std::move(p));
    }
    // Reference.
    const size_t half = s.ro / 2;
    std::vector<cdouble> sum(half * s.e1 * out_ch, 0.0);
    std::vector<int> n(s.e1, 0);
    for (const Shot& sh : shots) {
        const std::vector<cdouble>& g = sh.copy ? g2 : g1;
        std::vector<cdouble> line(s.ro * s.coils, 0.0);
        for (size_t c = 0; c < s.coils; ++c)
            for (size_t x = sh.first; x < s.ro; ++x) line[c * s.ro + x] = g[(c * s.e1 + sh.line) * s.ro + x];
        const std::vector<cdouble> img = test::reference_centred_dft(line, {s.ro, s.coils}, 1u, FFTDirection::Inverse);
        std::vector<cdouble> crop(half * s.coils);
        for (size_t c = 0; c < s.coils; ++c)
            for (size_t x = 0; x < half; ++x) crop[c * half + x] = img[c * s.ro + x + half / 2];
        const std::vector<cdouble> k = test::reference_centred_dft(crop, {half, s.coils}, 1u, FFTDirection::Forward);
        for (size_t o = 0; o < out_ch; ++o)
            for (size_t x = 0; x < half; ++x) {
                cdouble v = 0;
                for (size_t c = 0; c < s.coils; ++c) v += mixd[o * s.coils + c] * k[c * half + x];
                sum[(o * s.e1 + sh.line) * half + x] += v;
            }
        ++n[sh.line];
    }
    for (size_t o = 0; o < out_ch; ++o)
        for (size_t p = 0; p < s.e1; ++p)
            for (size_t x = 0; x < half; ++x)
                if (n[p]) sum[(o * s.e1 + p) * half + x] /= double(n[p]);

    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(make_accumulate_trigger(config::AccumulateTrigger{}));
    const std::vector<Message> in(lines.begin(), lines.end());
    auto bufs = flatten(only<ReconBuffer>(test::run_chain(std::move(g), test::make_session(header_xml(s), be), in)));
    ASSERT_EQ(bufs.size(), 1u);
    ASSERT_EQ(bufs[0].data.shape(), (Shape{half, s.e1, 1, out_ch}));
    EXPECT_EQ(bufs[0].reference.number_of_samples, half);
    EXPECT_EQ(bufs[0].reference.active_channels, out_ch);
    EXPECT_EQ(bufs[0].geometry.encoded_matrix[0], half);
    EXPECT_LT(test::relative_error(be->to_host(bufs[0].data), sum), 2e-6);
}

TEST(Accumulate, BatchedLineOperationsMatchLineByLineReference) { check_batched_line_operations(make_cpu_backend(2)); }

TEST(Accumulate, BatchedLineOperationsOnCudaMatchLineByLineReference) {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
    check_batched_line_operations(make_cuda_backend());
}

TEST(Accumulate, RepeatedLinesAreAveraged) {
    ScanSpec s;
    s.ro = s.recon_x = 8;
    s.fov_enc[0] = s.fov_recon[0] = 100;
    s.e1 = s.recon_y = 4;
    s.coils = 1;
    const std::vector<cdouble> g1 = random_grid(s, 1), g2 = random_grid(s, 2);
    std::vector<Acquisition> lines;
    for (size_t p = 0; p < 4; ++p) lines.push_back(readout(s, g1, p, 0, uint32_t(p)));
    for (size_t p = 0; p < 4; ++p) {
        lines.push_back(readout(s, g2, p, 0, uint32_t(4 + p)));
        lines.back().head.idx.average = 1;
    }
    auto bufs = accumulate(s, lines);
    ASSERT_EQ(bufs.size(), 1u);
    for (size_t i = 0; i < 32; ++i)
        EXPECT_NEAR(std::abs(bufs[0].data.data()[i] - cfloat((g1[i] + g2[i]) / 2.0)), 0, 1e-6);
    config::AccumulateTrigger by_average;
    by_average.set_trigger(config::TRIGGER_AVERAGE);
    EXPECT_EQ(accumulate(s, lines, by_average).size(), 2u);  // one buffer per average
}

// Two slices x two repetitions of a 4-line scan; returns how many buffers were out after each push.
std::vector<size_t> emissions(config::TriggerDimension trigger, bool flags) {
    ScanSpec s;
    s.ro = s.recon_x = 8;
    s.fov_enc[0] = s.fov_recon[0] = 100;
    s.e1 = s.recon_y = 4;
    s.coils = 1;
    const std::vector<cdouble> grid = random_grid(s, 4);
    auto be = make_cpu_backend(1);
    config::AccumulateTrigger cfg;
    cfg.set_trigger(trigger);
    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(make_accumulate_trigger(cfg));
    GadgetHarness h(std::move(g));
    h.start(test::make_session(header_xml(s), be));
    std::vector<size_t> counts;
    uint32_t n = 0;
    for (uint16_t rep = 0; rep < 2; ++rep)
        for (uint16_t slice = 0; slice < 2; ++slice)
            for (size_t p = 0; p < 4; ++p) {
                Acquisition a = readout(s, grid, p, 0, n++);
                a.head.idx.slice = slice;
                a.head.idx.repetition = rep;
                if (flags && p == 3) a.head.flags |= bit(ISMRMRD::ISMRMRD_ACQ_LAST_IN_SLICE);
                if (flags && p == 3 && slice == 1) a.head.flags |= bit(ISMRMRD::ISMRMRD_ACQ_LAST_IN_REPETITION);
                h.push(a);
                counts.push_back(h.output().size());
            }
    h.finish();
    counts.push_back(h.output().size());
    for (const Message& m : h.output()) EXPECT_TRUE(std::holds_alternative<ReconBuffer>(m));
    return counts;
}

TEST(Accumulate, TriggersOnFlagsOrCounterChange) {
    // Flags: a buffer at the end of every slice.
    std::vector<size_t> c = emissions(config::TRIGGER_AUTO, true);
    EXPECT_EQ(c[3], 1u);
    EXPECT_EQ(c[7], 2u);
    EXPECT_EQ(c[11], 3u);
    EXPECT_EQ(c[15], 4u);
    EXPECT_EQ(c.back(), 4u);
    // Without flags, AUTO flushes at the end only.
    c = emissions(config::TRIGGER_AUTO, false);
    EXPECT_EQ(c[15], 0u);
    EXPECT_EQ(c.back(), 4u);
    // Repetition counter: both slices of repetition 0 leave when the first line of repetition 1 arrives.
    c = emissions(config::TRIGGER_REPETITION, false);
    EXPECT_EQ(c[7], 0u);
    EXPECT_EQ(c[8], 2u);
    EXPECT_EQ(c.back(), 4u);
    // Slice counter: every slice change.
    c = emissions(config::TRIGGER_SLICE, false);
    EXPECT_EQ(c[4], 1u);
    EXPECT_EQ(c[8], 2u);
    EXPECT_EQ(c[12], 3u);
    EXPECT_EQ(c.back(), 4u);
    // NONE ignores the flags.
    c = emissions(config::TRIGGER_NONE, true);
    EXPECT_EQ(c[15], 0u);
    EXPECT_EQ(c.back(), 4u);
}

TEST(Accumulate, CalibrationLinesGoToTheirOwnBuffer) {
    ScanSpec s;
    s.ro = s.recon_x = 8;
    s.fov_enc[0] = s.fov_recon[0] = 100;
    s.e1 = s.recon_y = 12;
    s.coils = 1;
    const std::vector<cdouble> grid = random_grid(s, 6);
    std::vector<Acquisition> lines;
    for (size_t p = 0; p < 12; ++p) {
        const bool imaging = p % 3 == 0, acs = p >= 4 && p < 8;
        if (!imaging && !acs) continue;
        Acquisition a = readout(s, grid, p, 0, uint32_t(p));
        if (acs) a.head.flags |= bit(imaging ? ISMRMRD::ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION_AND_IMAGING
                                             : ISMRMRD::ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION);
        lines.push_back(a);
    }
    Acquisition nav = readout(s, grid, 1, 0, 99);
    nav.head.flags |= bit(ISMRMRD::ISMRMRD_ACQ_IS_NAVIGATION_DATA);
    lines.push_back(nav);
    config::AccumulateTrigger cfg;
    cfg.set_emit_calibration(true);
    auto bufs = accumulate(s, lines, cfg);
    ASSERT_EQ(bufs.size(), 2u);
    EXPECT_TRUE(bufs[0].calibration_only);
    EXPECT_FALSE(bufs[1].calibration_only);
    for (size_t p = 0; p < 12; ++p) {
        EXPECT_EQ(bufs[0].sampled[p], p >= 4 && p < 8) << p;
        EXPECT_EQ(bufs[1].sampled[p], p % 3 == 0) << p;  // no ACS-only lines, no navigator
    }
    cfg.set_emit_calibration(false);
    bufs = accumulate(s, lines, cfg);
    ASSERT_EQ(bufs.size(), 1u);
    EXPECT_FALSE(bufs[0].calibration_only);
    cfg.set_keep_special_lines(true);
    bufs = accumulate(s, lines, cfg);
    EXPECT_EQ(bufs[0].sampled[1], 1);  // the navigator line was kept
}

template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

TEST(Errors, BadEncodeStepsNameTheValueAndScanCounter) {
    ScanSpec s;
    s.ro = s.recon_x = 8;
    s.fov_enc[0] = s.fov_recon[0] = 100;
    s.e1 = s.recon_y = 8;
    s.coils = 2;
    const std::vector<cdouble> grid = random_grid(s, 1);
    Acquisition bad = readout(s, grid, 2, 0, 17);
    bad.head.idx.kspace_encode_step_1 = 40;
    std::string msg = error_of([&] { accumulate(s, {bad}); });
    EXPECT_NE(msg.find("kspace_encode_step_1 40"), std::string::npos) << msg;
    EXPECT_NE(msg.find("scan_counter 17"), std::string::npos) << msg;

    Acquisition e2 = readout(s, grid, 2, 0, 18);
    e2.head.idx.kspace_encode_step_2 = 3;
    msg = error_of([&] { accumulate(s, {e2}); });
    EXPECT_NE(msg.find("kspace_encode_step_2 3"), std::string::npos) << msg;

    Acquisition too_long = readout(s, grid, 2, 0, 19);
    too_long.head.number_of_samples = 9;
    too_long.data.resize(18);
    msg = error_of([&] { accumulate(s, {too_long}); });
    EXPECT_NE(msg.find("9 samples"), std::string::npos) << msg;

    Acquisition a = readout(s, grid, 2, 0, 20), b = readout(s, grid, 3, 0, 21);
    b.head.active_channels = 1;
    b.data.resize(8);
    msg = error_of([&] { accumulate(s, {a, b}); });
    EXPECT_NE(msg.find("1 channels"), std::string::npos) << msg;
    EXPECT_NE(msg.find("have 2"), std::string::npos) << msg;

    Acquisition short_data = readout(s, grid, 2, 0, 22);
    short_data.data.resize(5);
    msg = error_of([&] { accumulate(s, {short_data}); });
    EXPECT_NE(msg.find("scan_counter 22"), std::string::npos) << msg;
}

TEST(Errors, NoiseChannelMismatchNamesBothCounts) {
    ScanSpec s;
    s.coils = 4;
    const NoiseModel m = make_noise_model(4, 1);
    std::vector<Acquisition> in = noise_scans(s, m, 2, 1);
    ScanSpec three = s;
    three.coils = 3;
    const std::vector<cdouble> grid = random_grid(three, 1);
    in.push_back(readout(three, grid, 0, 0, 5));
    auto be = make_cpu_backend(1);
    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(make_noise_adjust(config::NoiseAdjust{}));
    const std::string msg =
        error_of([&] { test::run_chain(std::move(g), test::make_session(header_xml(s), be), to_messages(in)); });
    EXPECT_NE(msg.find("3 channels"), std::string::npos) << msg;
    EXPECT_NE(msg.find("noise scans 4"), std::string::npos) << msg;
}

TEST(Errors, CoilCombineMapStrideOutOfRangeNamesTheValue) {
    for (int bad : {-1, 65}) {
        config::CoilCombine cfg;
        cfg.set_method(config::COMBINE_WALSH);
        cfg.set_map_stride(bad);
        try {
            make_coil_combine(cfg);
            ADD_FAILURE() << "map_stride " << bad << " accepted";
        } catch (const ConfigError& e) {
            EXPECT_NE(std::string(e.what()).find("map_stride " + std::to_string(bad)), std::string::npos) << e.what();
        }
    }
    for (int good : {0, 1, 7, 64}) {
        config::CoilCombine cfg;
        cfg.set_map_stride(good);
        EXPECT_NO_THROW(make_coil_combine(cfg)) << good;
    }
}

TEST(Errors, HeaderWithoutEncodingFailsAtStart) {
    // ISMRMRD::deserialize already refuses such XML; a context built in code can still lack it.
    SessionContext ctx;
    ctx.backend = make_cpu_backend(1);
    for (int which = 0; which < 3; ++which) {
        std::vector<std::unique_ptr<Gadget>> g;
        if (which == 0) g.push_back(make_accumulate_trigger(config::AccumulateTrigger{}));
        if (which == 1) g.push_back(make_remove_ro_oversampling(config::RemoveROOversampling{}));
        if (which == 2) g.push_back(make_noise_adjust(config::NoiseAdjust{}));
        GadgetHarness harness(std::move(g));
        const std::string msg = error_of([&] { harness.start(ctx); });
        if (which < 2) {
            EXPECT_NE(msg.find("no <encoding>"), std::string::npos) << msg;
        } else {
            EXPECT_EQ(msg, "");  // NoiseAdjust needs no encoding
        }
    }
}

TEST(NoiseAdjust, WithoutNoiseScansDataPassUnchanged) {
    ScanSpec s;
    const std::vector<cdouble> grid = random_grid(s, 1);
    std::vector<Acquisition> in{readout(s, grid, 0, 0, 0), readout(s, grid, 1, 0, 1)};
    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(make_noise_adjust(config::NoiseAdjust{}));
    const std::vector<Message> msgs =
        test::run_chain(std::move(g), test::make_session(header_xml(s), make_cpu_backend(1)), to_messages(in));
    EXPECT_TRUE(only<PendingAcquisition>(msgs).empty());  // nothing to apply: plain acquisitions go on
    auto out = only<Acquisition>(msgs);
    ASSERT_EQ(out.size(), 2u);
    for (size_t i = 0; i < 2; ++i) EXPECT_EQ(out[i].data, in[i].data);
}

TEST(NoiseAdjust, WhitenerMatchesDoublePrecisionReference) {
    ScanSpec s;
    s.coils = 6;
    s.acq_dwell_us = 3.0f;
    s.noise_dwell_us = 6.0f;
    const NoiseModel m = make_noise_model(6, 3);
    std::vector<Acquisition> in = noise_scans(s, m, 8, 4);
    const std::vector<cdouble> grid = random_grid(s, 1);
    in.push_back(readout(s, grid, 0, 0, 9));
    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(make_noise_adjust(config::NoiseAdjust{}));
    auto out = only<PendingAcquisition>(
        test::run_chain(std::move(g), test::make_session(header_xml(s), make_cpu_backend(1)), to_messages(in)));
    ASSERT_EQ(out.size(), 1u);  // noise scans dropped
    ASSERT_TRUE(out[0].ops.coil_mix);
    const std::vector<cfloat>& w = *out[0].ops.coil_mix;
    const std::vector<cdouble> ref =
        reference_whitener(noise_covariance(std::vector<Acquisition>(in.begin(), in.end() - 1)), 6,
                           std::sqrt(2.0 * 3.0 / 6.0 * 0.793));
    ASSERT_EQ(w.size(), ref.size());
    EXPECT_LT(test::relative_error(as_double(w), ref), 1e-5);
}

// A reference image a client sends may be of any ISMRMRD pixel type and of several channels: its
// magnitude is what a gadget reads (root sum of squares over channels), and a header that does not fit
// its bytes is refused naming the sizes.
TEST(ImageMagnitude, EveryPixelTypeAndChannelsByRootSumOfSquares) {
    Image u;
    u.head.matrix_size[0] = 3;
    u.head.matrix_size[1] = 2;
    u.head.matrix_size[2] = 1;
    u.head.channels = 1;
    u.head.data_type = ISMRMRD::ISMRMRD_USHORT;
    const uint16_t us[6] = {0, 1, 2, 3, 4, 65535};
    u.pixels.assign(reinterpret_cast<const uint8_t*>(us), reinterpret_cast<const uint8_t*>(us) + sizeof us);
    EXPECT_EQ(image_magnitude(u), (std::vector<float>{0, 1, 2, 3, 4, 65535}));

    Image c = u;
    c.head.channels = 2;
    c.head.data_type = ISMRMRD::ISMRMRD_CXFLOAT;
    std::vector<std::complex<float>> px(12);
    for (size_t i = 0; i < 6; ++i) {
        px[i] = {3.f * float(i), 0.f};         // channel 0
        px[6 + i] = {0.f, -4.f * float(i)};    // channel 1
    }
    c.pixels.resize(px.size() * sizeof(px[0]));
    std::memcpy(c.pixels.data(), px.data(), c.pixels.size());
    const std::vector<float> m = image_magnitude(c);
    for (size_t i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(m[i], 5.f * float(i));

    Image s = u;
    s.head.data_type = ISMRMRD::ISMRMRD_SHORT;
    const int16_t ss[6] = {-7, 7, 0, -32768, 1, -1};
    std::memcpy(s.pixels.data(), ss, sizeof ss);
    EXPECT_EQ(image_magnitude(s), (std::vector<float>{7, 7, 0, 32768, 1, 1}));

    Image bad = u;
    bad.pixels.pop_back();
    try {
        image_magnitude(bad);
        FAIL() << "a short pixel buffer was accepted";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("11 bytes, not 12"), std::string::npos) << e.what();
    }
    bad = u;
    bad.head.data_type = 99;
    EXPECT_THROW(image_magnitude(bad), std::runtime_error);
}

}  // namespace
}  // namespace larmor
