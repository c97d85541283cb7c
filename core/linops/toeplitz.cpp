#include "core/linops/toeplitz.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/linops/nudft_kernels.h"
#include "core/linops/nufft.h"

namespace larmor {
namespace {

Shape doubled(const Shape& image) {
    Shape s;
    for (int a = 0; a < image.rank(); ++a) s.push_back(2 * image[a]);
    return s;
}

AxisMask leading_axes(int n) { return (AxisMask(1) << n) - 1; }

class ToeplitzNormal final : public LinearOperator {
public:
    ToeplitzNormal(const std::shared_ptr<Backend>& be, const Shape& image, size_t batch, CArray spectrum)
        : LinearOperator(be, with_batch(image, batch), with_batch(image, batch), "Toeplitz"),
          padded_(with_batch(doubled(image), batch)), axes_(leading_axes(image.rank())), k_(std::move(spectrum)) {}

protected:
    void apply_forward(const CArray& x, CArray& y) override { convolve(x, y); }
    void apply_adjoint(const CArray& y, CArray& x) override { convolve(y, x); }

private:
    static Shape with_batch(const Shape& s, size_t b) {
        Shape o = s;
        o.push_back(b);
        return o;
    }

    void convolve(const CArray& in, CArray& out) {
        Backend& be = backend();
        CArray& p = scratch(0, padded_);
        CArray& q = scratch(1, padded_);
        be.crop_pad_centred(in, p);
        be.fft(p, q, axes_, FFTDirection::Forward);
        be.mul(q, k_, q);
        be.fft(q, p, axes_, FFTDirection::Inverse);
        be.crop_pad_centred(p, out);
    }

    Shape padded_;
    AxisMask axes_;
    CArray k_;
};

}  // namespace

CArray toeplitz_spectrum(const std::shared_ptr<Backend>& be, const Shape& image, const RArray& coords,
                         const RArray& weights, const ToeplitzOptions& opts) {
    if (!be) throw std::invalid_argument("toeplitz_spectrum: null backend");
    const int dims = image.rank();
    if (dims < 1 || dims > 3)
        throw std::invalid_argument("toeplitz_spectrum: image " + image.str() + " must have 1, 2 or 3 axes");
    if (coords.shape().rank() != 2 || coords.shape()[0] != size_t(dims) || coords.shape()[1] == 0)
        throw std::invalid_argument("toeplitz_spectrum: coordinates " + coords.shape().str() + " must be [" +
                                    std::to_string(dims) + ", M] for image " + image.str());
    const size_t m = coords.shape()[1];
    if (!weights.empty() && weights.size() != m)
        throw std::invalid_argument("toeplitz_spectrum: " + std::to_string(weights.size()) + " weights for " +
                                    std::to_string(m) + " points");
    const RArray k = be->to_host(coords);
    const std::vector<float> phi = voxel_basis_weights(k, image, opts.basis);
    const RArray w = weights.empty() ? RArray() : be->to_host(weights);
    const Shape grid = doubled(image);
    const double n = static_cast<double>(image.size()), l = static_cast<double>(grid.size());

    // The samples of Q's adjoint DFT: w_m |phi_m|^2 / N, as complex numbers with no imaginary part.
    CArray s = be->host_complex({m, 1});
    for (size_t i = 0; i < m; ++i) {
        const float wi = w.empty() ? 1.f : w.data()[i];
        if (!std::isfinite(wi))
            throw std::invalid_argument("toeplitz_spectrum: weight " + std::to_string(i) + " is " + std::to_string(wi));
        s.data()[i] = cfloat(static_cast<float>(static_cast<double>(wi) * phi[i] * phi[i] / n), 0.f);
    }
    const CArray sd = be->to_device(s);
    Shape qshape = grid;
    qshape.push_back(1);
    CArray q = be->empty(qshape);
    if (opts.method == ToeplitzOptions::Method::Exact) {
        NudftGeometry g;
        g.dims = dims;
        for (int a = 0; a < dims; ++a) {
            g.extent[a] = grid[a];
            g.image[a] = image[a];
        }
        g.points = m;
        g.accurate = opts.accurate_sincos;
        const RArray kd = be->to_device(k);
        if (be->device() == Device::Cpu)
            cpu::nudft_adjoint(kd, sd, q, g);
        else
            cuda::nudft_adjoint(*be, kd, sd, q, g);
    } else {
        // On the 2N grid the NUFFT's exponent is k' (p - N) / (2N): k' = 2k gives k j / N. Its adjoint
        // carries L^-1/2, which Q does not.
        RArray k2 = RArray::host(k.shape());
        for (size_t i = 0; i < k.size(); ++i) k2.data()[i] = 2.f * k.data()[i];
        NufftOptions no;
        no.tolerance = opts.nufft_tolerance;
        auto nu = Nufft::create(be, grid, 1, k2, no);
        nu->adjoint(sd, q);
        be->scale(static_cast<float>(std::sqrt(l)), q, q);
    }
    CArray spectrum = be->empty(qshape);
    be->fft(q, spectrum, leading_axes(dims), FFTDirection::Forward);
    be->scale(static_cast<float>(std::sqrt(l)), spectrum, spectrum);
    return spectrum.reshaped(grid);
}

LinOp toeplitz_normal(const std::shared_ptr<Backend>& be, const Shape& image, size_t batch, CArray spectrum) {
    if (!be) throw std::invalid_argument("toeplitz_normal: null backend");
    if (batch == 0) throw std::invalid_argument("toeplitz_normal: batch 0");
    if (spectrum.shape() != doubled(image))
        throw std::invalid_argument("toeplitz_normal: spectrum " + spectrum.shape().str() + " is not the 2N grid " +
                                    doubled(image).str() + " of image " + image.str());
    return std::make_shared<ToeplitzNormal>(be, image, batch, be->to_device(spectrum));
}

}  // namespace larmor
