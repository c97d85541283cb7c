#include "core/linops/nudft.h"
#include "core/constants.h"

#include <cmath>
#include <stdexcept>
#include <utility>

#include "core/linops/nudft_kernels.h"

namespace larmor {
namespace {

double sinc_pi(double u) { return u == 0.0 ? 1.0 : std::sin(kPi * u) / (kPi * u); }

Shape with_batch(const Shape& image, size_t batch) {
    Shape s = image;
    s.push_back(batch);
    return s;
}

// Refuses non-finite coordinates, naming the first; returns the host copy.
RArray checked_coords(Backend& be, const Shape& image, const RArray& coords) {
    const int dims = image.rank();
    if (dims < 1 || dims > 3)
        throw std::invalid_argument("nudft: image " + image.str() + " must have 1, 2 or 3 axes");
    if (coords.shape().rank() != 2 || coords.shape()[0] != static_cast<size_t>(dims) || coords.shape()[1] == 0)
        throw std::invalid_argument("nudft: coordinates " + coords.shape().str() + " must be [" + std::to_string(dims) +
                                    ", M] with M > 0 for image " + image.str());
    RArray host = be.to_host(coords);
    const size_t m = coords.shape()[1];
    for (int a = 0; a < dims; ++a)
        for (size_t i = 0; i < m; ++i) {
            const float k = host.data()[i * size_t(dims) + size_t(a)];
            if (!std::isfinite(k))
                throw std::invalid_argument("nudft: point " + std::to_string(i) + " has coordinate " + std::to_string(k) +
                                            " on axis " + std::to_string(a) + " (not finite)");
        }
    return host;
}

class Nudft final : public LinearOperator {
public:
    Nudft(std::shared_ptr<Backend> be, const Shape& image, size_t batch, RArray coords, RArray weight, NudftGeometry g)
        : LinearOperator(be, with_batch(image, batch), Shape{g.points, batch}, "NUDFT"),
          coords_(std::move(coords)), weight_(std::move(weight)), g_(g) {}

protected:
    void apply_forward(const CArray& x, CArray& y) override {
        Backend& be = backend();
        if (be.device() == Device::Cpu)
            cpu::nudft_forward(coords_, x, y, g_);
        else
            cuda::nudft_forward(be, coords_, x, y, g_);
        be.mul(y, weight_, y);
    }
    void apply_adjoint(const CArray& y, CArray& x) override {
        Backend& be = backend();
        CArray& t = scratch(0, oshape());
        be.mul(y, weight_, t);
        if (be.device() == Device::Cpu)
            cpu::nudft_adjoint(coords_, t, x, g_);
        else
            cuda::nudft_adjoint(be, coords_, t, x, g_);
    }

private:
    RArray coords_;  // [dims, M] on the backend's device
    RArray weight_;  // [M]: N^{-1/2} phi(k_m), real (the basis functions are symmetric)
    NudftGeometry g_;
};

}  // namespace

const char* voxel_basis_name(VoxelBasis b) { return b == VoxelBasis::Box ? "box" : "dirac"; }

std::vector<float> voxel_basis_weights(const RArray& coords_host, const Shape& image, VoxelBasis basis) {
    const size_t dims = coords_host.shape()[0], m = coords_host.shape()[1];
    std::vector<float> w(m, 1.f);
    if (basis == VoxelBasis::Dirac) return w;
    for (size_t i = 0; i < m; ++i) {
        double p = 1.0;
        for (size_t a = 0; a < dims; ++a)
            p *= sinc_pi(static_cast<double>(coords_host.data()[i * dims + a]) / static_cast<double>(image[int(a)]));
        w[i] = static_cast<float>(p);
    }
    return w;
}

LinOp nudft(std::shared_ptr<Backend> be, const Shape& image, size_t batch, const RArray& coords,
            const NudftOptions& opts) {
    if (!be) throw std::invalid_argument("nudft: null backend");
    if (batch == 0) throw std::invalid_argument("nudft: batch 0");
    const RArray host = checked_coords(*be, image, coords);
    NudftGeometry g;
    g.dims = image.rank();
    for (int a = 0; a < g.dims; ++a) {
        if (image[a] == 0) throw std::invalid_argument("nudft: image " + image.str() + " has an empty axis");
        g.extent[a] = g.image[a] = image[a];
    }
    g.batch = batch;
    g.points = coords.shape()[1];
    g.accurate = opts.accurate_sincos;
    std::vector<float> phi = voxel_basis_weights(host, image, opts.basis);
    RArray w = be->host_real({g.points});
    const float norm = static_cast<float>(1.0 / std::sqrt(static_cast<double>(image.size())));
    for (size_t i = 0; i < g.points; ++i) w.data()[i] = norm * phi[i];
    auto op = std::make_shared<Nudft>(be, image, batch, be->to_device(host), be->to_device(w), g);
    return op;
}

}  // namespace larmor
