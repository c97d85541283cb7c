// The CPU NUFFT's steps around the convolution (core/linops/nufft_kernels.h): the fused
// deapodise-and-pad, its adjoint crop, and the plain grid FFT. The padded pixel j (offset from the
// image centre) sits at j mod n, the uncentred layout a plain FFTW plan expects, so the FFT runs in
// place with no centring passes (the sign that centres it is in the operator's weight).
#include <omp.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include <fftw3.h>

#include "core/cpu/fftw_plans.h"
#include "core/linops/nufft_kernels.h"

namespace larmor::cpu {
namespace {

using ll = long long;

// Where pixel i of an axis of N pixels lands on the grid of n points: its offset j = i - N/2, mod n.
inline ll grid_of_pixel(ll i, ll N, ll n) {
    const ll j = i - N / 2;
    return j < 0 ? j + n : j;
}

struct Axes {
    ll N[3] = {1, 1, 1};
    ll n[3] = {1, 1, 1};
    ll image_size = 1, grid_size = 1, batch = 1;
};

Axes check(const NufftGrid& g, const Shape& image, const RArray& weight, const CArray& x, const CArray& grid,
           const char* who) {
    check_nufft_pad_arguments(g, image, weight, x, grid, Device::Cpu, who);
    Axes a;
    for (int d = 0; d < g.dims; ++d) {
        a.N[d] = ll(image[d]);
        a.n[d] = g.n[d];
    }
    a.image_size = a.N[0] * a.N[1] * a.N[2];
    a.grid_size = g.grid_size();
    a.batch = g.batch;
    return a;
}

// Where a 3D image is shorter than the grid along the slowest axis (z), the transform is pruned as on
// CUDA (cuda/nufft_grid.cu): the transforms over the other axes run only on
// the slabs of the image's footprint along the slowest axis ([0, h1) and [n - h2, n), pad's layout),
// before the slowest axis's transforms for from_image and after them for to_image. Every piece is a
// plan of the session's FFTW cache, so two sessions still get the same bits.
class FftwGridFft final : public NufftGridFft {
public:
    FftwGridFft(const NufftGrid& g, const Shape& image) : g_(g), plans_(omp_get_max_threads()) {
        for (int d = 0; d < g.dims; ++d) shape_.push_back(size_t(g.n[d]));
        shape_.push_back(size_t(g.batch));
        const int s = g.dims - 1;
        // 3D only: in 2D the row and column plans came out slower than the one 2D plan at 32 coils
        // (256^2, 205,824 points: adjoint 321 against 146 ms, 2 threads), faster at 3 coils (33.3
        // against 34.4 ms); in 3D the pruned one is 1.25-1.30x faster (128^3 x 8: adjoint 5.21
        // against 6.79 s).
        if (g.dims == 3 && image.rank() == g.dims && ll(image[size_t(s)]) < g.n[s]) {
            h1_ = ll(image[size_t(s)]) - ll(image[size_t(s)]) / 2;
            h2_ = ll(image[size_t(s)]) / 2;
        }
    }

    void from_image(CArray& grid, FFTDirection dir) override {
        check(grid);
        if (!pruned()) return run(all_axes(), shape_, grid.data(), dir);
        footprint_slabs(grid, dir);
        run(slowest_axis(), shape_, grid.data(), dir);
    }
    void to_image(CArray& grid, FFTDirection dir) override {
        check(grid);
        if (!pruned()) return run(all_axes(), shape_, grid.data(), dir);
        run(slowest_axis(), shape_, grid.data(), dir);
        footprint_slabs(grid, dir);
    }

private:
    bool pruned() const { return h1_ > 0; }
    AxisMask all_axes() const { return (1u << unsigned(g_.dims)) - 1u; }
    AxisMask slowest_axis() const { return 1u << unsigned(g_.dims - 1); }
    void check(const CArray& grid) const {
        if (grid.size() != shape_.size() || grid.device() != Device::Cpu)
            throw std::invalid_argument("cpu::nufft_grid_fft: grid " + grid.shape().str() + " on " +
                                        device_name(grid.device()) + ", expected " + shape_.str() + " on the host");
    }
    // The transforms over the faster axes of the footprint's slabs, per transform of the batch.
    void footprint_slabs(CArray& grid, FFTDirection dir) {
        const int s = g_.dims - 1;
        const ll slab = g_.grid_size() / g_.n[s];  // one index of the slowest axis
        auto shape = [&](ll h) {
            Shape sh;
            for (int d = 0; d < s; ++d) sh.push_back(size_t(g_.n[d]));
            sh.push_back(size_t(h));
            return sh;
        };
        const AxisMask faster = all_axes() & ~slowest_axis();
        for (ll b = 0; b < g_.batch; ++b) {
            cfloat* one = grid.data() + b * g_.grid_size();
            run(faster, shape(h1_), one, dir);
            if (h2_ > 0) run(faster, shape(h2_), one + (g_.n[s] - h2_) * slab, dir);
        }
    }
    // The cache's plan is the bare DFT over the axes (its centring tables are not used here).
    void run(AxisMask axes, const Shape& shape, cfloat* data, FFTDirection dir) {
        const detail::FftwTransform& t = plans_.get(shape, axes, dir, data);
        auto* io = reinterpret_cast<fftwf_complex*>(data);
        fftwf_execute_dft(static_cast<fftwf_plan>(t.plan.get()), io, io);
    }

    NufftGrid g_;
    Shape shape_;
    ll h1_ = 0, h2_ = 0;
    detail::FftwPlanCache plans_;
};

}  // namespace

void nufft_pad(const NufftGrid& g, const Shape& image, const RArray& weight, const CArray& x, CArray& grid) {
    const Axes a = check(g, image, weight, x, grid, "cpu::nufft_pad");
    const float* w = weight.data();
    const cfloat* in = x.data();
    cfloat* out = grid.data();
    // One grid row (axis 0) at a time: a row outside the image along axes 1-2 is all zeros.
    const ll rows = a.n[1] * a.n[2] * a.batch;
#pragma omp parallel for schedule(static)
    for (ll r = 0; r < rows; ++r) {
        const ll g1 = r % a.n[1], g2 = (r / a.n[1]) % a.n[2], b = r / (a.n[1] * a.n[2]);
        cfloat* row = out + r * a.n[0];
        // The pixel of grid point g along an axis: g < N - N/2 holds offset g, g >= n - N/2 offset g - n.
        auto pixel = [](ll gi, ll N, ll n) -> ll {
            if (gi < N - N / 2) return gi + N / 2;
            if (gi >= n - N / 2) return gi - n + N / 2;
            return -1;
        };
        const ll i1 = pixel(g1, a.N[1], a.n[1]), i2 = pixel(g2, a.N[2], a.n[2]);
        std::fill(row, row + a.n[0], cfloat(0.f, 0.f));
        if (i1 < 0 || i2 < 0) continue;
        const ll base = a.N[0] * (i1 + a.N[1] * i2);
        const cfloat* src = in + b * a.image_size + base;
        const float* ws = w + base;
        for (ll i0 = 0; i0 < a.N[0]; ++i0) row[grid_of_pixel(i0, a.N[0], a.n[0])] = src[i0] * ws[i0];
    }
}

void nufft_crop(const NufftGrid& g, const Shape& image, const RArray& weight, const CArray& grid, CArray& x) {
    const Axes a = check(g, image, weight, x, grid, "cpu::nufft_crop");
    const float* w = weight.data();
    const cfloat* in = grid.data();
    cfloat* out = x.data();
    const ll rows = a.N[1] * a.N[2] * a.batch;
#pragma omp parallel for schedule(static)
    for (ll r = 0; r < rows; ++r) {
        const ll i1 = r % a.N[1], i2 = (r / a.N[1]) % a.N[2], b = r / (a.N[1] * a.N[2]);
        const ll g1 = grid_of_pixel(i1, a.N[1], a.n[1]), g2 = grid_of_pixel(i2, a.N[2], a.n[2]);
        const cfloat* row = in + b * a.grid_size + a.n[0] * (g1 + a.n[1] * g2);
        const ll base = a.N[0] * (i1 + a.N[1] * i2);
        cfloat* dst = out + b * a.image_size + base;
        const float* ws = w + base;
        for (ll i0 = 0; i0 < a.N[0]; ++i0) dst[i0] = row[grid_of_pixel(i0, a.N[0], a.n[0])] * ws[i0];
    }
}

std::unique_ptr<NufftGridFft> nufft_grid_fft(const NufftGrid& g, const Shape& image) {
    return std::make_unique<FftwGridFft>(g, image);
}

}  // namespace larmor::cpu
