#include "core/linops/nufft.h"

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/linops/nufft_kernel_params.h"

namespace larmor {
namespace nufft_detail {

// What the operator and its interpolation() share: the grid, the points in grid units (on the
// backend's device) and their binning, which set_points() replaces in place.
struct Plan {
    NufftGrid g;
    Shape image;
    RArray u;                   // [dims, M], grid units wrapped into [0, n_a)
    RArray u_host;              // staging for set_points (the device's u is uploaded from it)
    std::shared_ptr<const NufftPointSet> points;
    bool shared_points = false;  // from a NufftBinSource: other plans (other streams) may hold it too
    std::shared_ptr<Backend> be;
    std::unique_ptr<NufftGridFft> fft;  // plain in-place DFT over the grid's axes

    Plan() = default;
    Plan(const Plan&) = delete;
    Plan& operator=(const Plan&) = delete;
    // A shared set is freed on the stream of the backend that binned it, so this plan's own work
    // that reads it must be done before letting go.
    void let_go_of_points() {
        if (shared_points && points && be) be->synchronize();
        points.reset();
        shared_points = false;
    }
    ~Plan() {
        try {
            let_go_of_points();
        } catch (...) {  // a failed device: nothing left to wait for
        }
    }
};

}  // namespace nufft_detail

namespace {

using nufft_detail::Plan;

std::string num(double v) {
    std::ostringstream s;
    s.precision(9);
    s << v;
    return s.str();
}

void spread(Backend& be, const Plan& p, const CArray& samples, CArray& grid) {
    if (be.device() == Device::Cpu)
        cpu::nufft_spread(p.g, *p.points, samples, grid);
    else
        cuda::nufft_spread(be, p.g, *p.points, samples, grid);
}

void pad(Backend& be, const Plan& p, const RArray& weight, const CArray& x, CArray& grid) {
    if (be.device() == Device::Cpu)
        cpu::nufft_pad(p.g, p.image, weight, x, grid);
    else
        cuda::nufft_pad(be, p.g, p.image, weight, x, grid);
}

void crop(Backend& be, const Plan& p, const RArray& weight, const CArray& grid, CArray& x) {
    if (be.device() == Device::Cpu)
        cpu::nufft_crop(p.g, p.image, weight, grid, x);
    else
        cuda::nufft_crop(be, p.g, p.image, weight, grid, x);
}

void interp(Backend& be, const Plan& p, const CArray& grid, CArray& samples) {
    if (be.device() == Device::Cpu)
        cpu::nufft_interp(p.g, *p.points, grid, samples);
    else
        cuda::nufft_interp(be, p.g, *p.points, grid, samples);
}

// Validates coords [dims, M] (cycles per FOV) and writes the grid coordinates u = sigma_a k + n_a/2,
// wrapped into [0, n_a), into p.u_host; then uploads them and bins the points.
void load_points(Backend& be, Plan& p, const RArray& coords, const char* who, NufftBinSource* source) {
    const int dims = p.g.dims;
    const long long M = p.g.points;
    if (coords.shape().rank() != 2 || coords.shape()[0] != size_t(dims) || coords.shape()[1] != size_t(M))
        throw std::invalid_argument(std::string(who) + ": coordinates are " + coords.shape().str() + ", expected [" +
                                    std::to_string(dims) + "x" + std::to_string(M) + "] (dims x points)");
    if (coords.device() != Device::Cpu && coords.device() != be.device())
        throw std::invalid_argument(std::string(who) + ": coordinates live on " + device_name(coords.device()) +
                                    ", the operator on " + device_name(be.device()));
    const RArray host = be.to_host(coords);
    const float* k = host.data();
    float* u = p.u_host.data();
    for (long long m = 0; m < M; ++m)
        for (int a = 0; a < dims; ++a) {
            const double v = k[m * dims + a];
            const double N = double(p.image[a]), n = double(p.g.n[a]);
            if (!(v >= -N / 2 && v <= N / 2))  // NaN fails both
                throw std::invalid_argument(std::string(who) + ": point " + std::to_string(m) + " axis " +
                                            std::to_string(a) + " has k = " + num(v) + ", outside [" + num(-N / 2) +
                                            ", " + num(N / 2) + "] (cycles per FOV)");
            double g = v * (n / N) + n / 2;
            float gf = float(g);
            if (gf >= float(n)) gf -= float(n);
            if (gf < 0.f) gf += float(n);
            if (!(gf >= 0.f && gf < float(n))) gf = 0.f;  // rounding at the wrap: g = n or a hair below 0
            u[m * dims + a] = gf;
        }
    p.let_go_of_points();
    be.copy(p.u_host, p.u);
    if (source) {
        p.points = source->bins(be, p.g, p.u, p.u_host);
        if (!p.points) throw std::runtime_error(std::string(who) + ": the bin source gave no point set");
        p.shared_points = true;
    } else {
        p.points = nufft_bin_points(be, p.g, p.u);
    }
}

}  // namespace

std::unique_ptr<NufftPointSet> nufft_bin_points(Backend& be, const NufftGrid& g, const RArray& u) {
    return be.device() == Device::Cpu ? cpu::nufft_bin_points(g, u) : cuda::nufft_bin_points(be, g, u);
}

namespace {

// C: the convolution alone, grid [n..., batch] -> points [M, batch].
class NufftInterpolation final : public LinearOperator {
public:
    NufftInterpolation(std::shared_ptr<Backend> be, const Shape& grid, const Shape& points,
                       std::shared_ptr<Plan> plan)
        : LinearOperator(std::move(be), grid, points, "nufft_interpolation"), plan_(std::move(plan)) {}

protected:
    void apply_forward(const CArray& x, CArray& y) override { interp(backend(), *plan_, x, y); }
    void apply_adjoint(const CArray& y, CArray& x) override { spread(backend(), *plan_, y, x); }

private:
    std::shared_ptr<Plan> plan_;
};

}  // namespace

std::shared_ptr<Nufft> Nufft::create(std::shared_ptr<Backend> be, const Shape& image, size_t batch,
                                     const RArray& coords, const NufftOptions& opts, NufftBinSource* bins) {
    if (!be) throw std::invalid_argument("Nufft: null backend");
    const int dims = image.rank();
    if (dims < 1 || dims > 3)
        throw std::invalid_argument("Nufft: image " + image.str() + " must have 1, 2 or 3 axes");
    for (int a = 0; a < dims; ++a)
        if (image[a] < 2)
            throw std::invalid_argument("Nufft: image " + image.str() + " axis " + std::to_string(a) + " has " +
                                        std::to_string(image[a]) + " pixels (at least 2)");
    if (batch < 1) throw std::invalid_argument("Nufft: batch " + std::to_string(batch) + " (at least 1)");
    if (!(opts.tolerance >= 1e-6 * (1 - 1e-9) && opts.tolerance <= 1e-1))
        throw std::invalid_argument("Nufft: tolerance " + num(opts.tolerance) + " outside [1e-6, 1e-1]");
    if (!(opts.upsampling >= 1.25 && opts.upsampling <= 2.0))
        throw std::invalid_argument("Nufft: upsampling " + num(opts.upsampling) + " outside [1.25, 2]");
    if (coords.shape().rank() != 2 || coords.shape()[0] != size_t(dims) || coords.shape()[1] < 1)
        throw std::invalid_argument("Nufft: coordinates are " + coords.shape().str() + ", expected [" +
                                    std::to_string(dims) + "xM] (dims x points, M >= 1) for image " + image.str());

    const nufft_detail::KernelShape ks = nufft_detail::choose_kernel(opts.tolerance, opts.upsampling);
    auto plan = std::make_shared<Plan>();
    plan->be = be;
    plan->image = image;
    NufftGrid& g = plan->g;
    g.dims = dims;
    g.batch = (long long)batch;
    g.points = (long long)coords.shape()[1];
    g.width = ks.width;
    g.beta = float(ks.beta);
    Shape grid;
    for (int a = 0; a < dims; ++a) {
        // At least the kernel's width, so that a point never covers one grid point twice.
        g.n[a] = std::max<long long>(nufft_detail::next_smooth_even(opts.upsampling * double(image[a])),
                                     nufft_detail::next_smooth_even(ks.width));
        grid.push_back(size_t(g.n[a]));
    }
    grid.push_back(batch);

    // Deapodisation: forward = C F P D x with F the plain DFT over n = prod n_a grid points and P the
    // zero-padding that puts pixel offset j = i - N/2 at j mod n (core/linops/nufft_kernels.h). The
    // points sit at u = sigma k + n/2, i.e. grid point g holds frequency g - n/2, and
    // exp(-2 pi i (g - n/2) j / n) = (-1)^j exp(-2 pi i g j / n) for even n: the sign centres the
    // transform. The periodic convolution with psi multiplies the grid's Fourier coefficient at image
    // offset j by psi_hat(j / n_a) per axis (Barnett et al. 2019, eq. 3.4), so
    // D = (-1)^(sum_a j_a) N^{-1/2} / prod psi_hat makes C F P D x the N^{-1/2}-normalised sum. One
    // real weight per pixel, in double until stored.
    std::vector<std::vector<double>> ph(3, std::vector<double>(1, 1.0));
    for (int a = 0; a < dims; ++a) ph[size_t(a)] = nufft_detail::kernel_fourier(ks, (long long)image[a], g.n[a]);
    const double s = 1.0 / std::sqrt(double(image.size()));
    RArray w = be->host_real(image);
    const size_t n0 = image[0], n1 = dims > 1 ? image[1] : 1, n2 = dims > 2 ? image[2] : 1;
    auto offset = [](size_t i, size_t N) { return (long long)i - (long long)(N / 2); };
    for (size_t k = 0; k < n2; ++k)
        for (size_t j = 0; j < n1; ++j)
            for (size_t i = 0; i < n0; ++i) {
                const long long offsets = offset(i, n0) + offset(j, n1) + offset(k, n2);
                const double sign = (offsets % 2 == 0) ? 1.0 : -1.0;
                w.data()[i + n0 * (j + n1 * k)] =
                    float(sign * s / (ph[0][i] * ph[1][dims > 1 ? j : 0] * ph[2][dims > 2 ? k : 0]));
            }
    RArray weight = be->empty_real(image);
    be->copy(w, weight);

    Shape cshape{size_t(dims), size_t(g.points)};
    plan->u_host = be->host_real(cshape);
    plan->u = be->empty_real(cshape);
    load_points(*be, *plan, coords, "Nufft", bins);
    plan->fft = be->device() == Device::Cpu ? cpu::nufft_grid_fft(g, image) : cuda::nufft_grid_fft(*be, g, image);

    Shape ishape = image;
    ishape.push_back(batch);
    const Shape oshape{size_t(g.points), batch};
    auto op = std::make_shared<Nufft>(Key{}, be, ishape, oshape, std::move(plan), std::move(weight));
    return op;
}

Nufft::Nufft(Key, std::shared_ptr<Backend> be, const Shape& ishape, const Shape& oshape,
             std::shared_ptr<nufft_detail::Plan> plan, RArray weight)
    : LinearOperator(std::move(be), ishape, oshape, "NUFFT"), plan_(std::move(plan)), weight_(std::move(weight)) {
    image_ = plan_->image;
    for (int a = 0; a < plan_->g.dims; ++a) grid_.push_back(size_t(plan_->g.n[a]));
    grid_.push_back(size_t(plan_->g.batch));
}

Nufft::~Nufft() = default;

void Nufft::set_points(const RArray& coords) {
    load_points(backend(), *plan_, coords, "Nufft::set_points", nullptr);
}

bool Nufft::shared_bins() const { return plan_->shared_points; }

LinOp Nufft::interpolation() {
    return std::make_shared<NufftInterpolation>(backend_ptr(), grid_, oshape(), plan_);
}

const NufftGrid& Nufft::grid() const { return plan_->g; }

size_t Nufft::points() const { return size_t(plan_->g.points); }

void Nufft::apply_forward(const CArray& x, CArray& y) {
    Backend& be = backend();
    CArray& g = scratch(0, grid_);
    pad(be, *plan_, weight_, x, g);
    plan_->fft->from_image(g, FFTDirection::Forward);
    interp(be, *plan_, g, y);
}

void Nufft::apply_adjoint(const CArray& y, CArray& x) {
    Backend& be = backend();
    CArray& g = scratch(0, grid_);
    spread(be, *plan_, y, g);
    plan_->fft->to_image(g, FFTDirection::Inverse);
    crop(be, *plan_, weight_, g, x);
}

}  // namespace larmor
