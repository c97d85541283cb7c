#include "core/linops/wavelet.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "core/linops/wavelet_kernels.h"

namespace larmor {
namespace {

void pass(Backend& be, const CArray& src, CArray& dst, const Shape& block, int axis, bool inverse) {
    if (be.device() == Device::Cpu)
        cpu::wavelet_pass(src, dst, block, axis, inverse);
    else
        cuda::wavelet_pass(be, src, dst, block, axis, inverse);
}

class Wavelet final : public LinearOperator {
public:
    Wavelet(std::shared_ptr<Backend> be, WaveletGeometry g)
        : LinearOperator(std::move(be), g.shape, g.shape, "wavelet"), g_(std::move(g)) {}

protected:
    void apply_forward(const CArray& x, CArray& y) override { wavelet_forward(backend(), g_, x, y); }
    void apply_adjoint(const CArray& y, CArray& x) override {
        backend().copy(y, x);
        wavelet_inverse_in_place(backend(), g_, x);
    }
    // Orthogonal: W^H W = I.
    void apply_normal(const CArray& x, CArray& z) override { backend().copy(x, z); }

private:
    WaveletGeometry g_;
};

}  // namespace

// Level by level from the finest; each level one pass per axis (the separable product). Level 0's
// block is the whole array, so its first pass can read x and write c: no copy first.
void wavelet_forward(Backend& backend, const WaveletGeometry& g, const CArray& x, CArray& c) {
    bool first = true;
    for (int l = 0; l < g.levels(); ++l)
        for (int a = 0; a < g.shape.rank(); ++a)
            if (g.level_axes[size_t(l)] & (1u << a)) {
                pass(backend, first ? x : c, c, g.blocks[size_t(l)], a, false);
                first = false;
            }
}

// The inverse undoes the passes in reverse order.
void wavelet_inverse_in_place(Backend& backend, const WaveletGeometry& g, CArray& x) {
    for (int l = g.levels() - 1; l >= 0; --l)
        for (int a = g.shape.rank() - 1; a >= 0; --a)
            if (g.level_axes[size_t(l)] & (1u << a)) pass(backend, x, x, g.blocks[size_t(l)], a, true);
}

WaveletGeometry wavelet_geometry(const Shape& shape, AxisMask axes, int levels) {
    WaveletGeometry g;
    g.shape = shape;
    g.axes = axes;
    if (levels == 0) throw std::invalid_argument("wavelet: levels 0 (want >= 1, or < 0 for as many as fit)");
    if (axes == 0) throw std::invalid_argument("wavelet: no axes to transform in " + shape.str());
    if (axes >> shape.rank())
        throw std::invalid_argument("wavelet: axis mask " + std::to_string(axes) + " names an axis beyond " + shape.str());
    for (int a = 0; a < shape.rank(); ++a)
        if ((axes & (1u << a)) && shape[a] > WaveletGeometry::kMaxLength)
            throw std::invalid_argument("wavelet: axis " + std::to_string(a) + " of " + shape.str() + " is longer than " +
                                        std::to_string(WaveletGeometry::kMaxLength));
    Shape block = shape;
    while (levels < 0 || g.levels() < levels) {
        AxisMask now = 0;
        for (int a = 0; a < shape.rank(); ++a)
            if ((axes & (1u << a)) && block[a] % 2 == 0 && block[a] >= WaveletGeometry::kMinLength) now |= 1u << a;
        if (now == 0) break;
        g.blocks.push_back(block);
        g.level_axes.push_back(now);
        for (int a = 0; a < shape.rank(); ++a)
            if (now & (1u << a)) block[a] /= 2;
    }
    if (g.levels() == 0)
        throw std::invalid_argument("wavelet: no level fits " + shape.str() + " (a transformed axis needs an even length >= " +
                                    std::to_string(WaveletGeometry::kMinLength) + ")");
    g.coarse = block;
    return g;
}

LinOp wavelet(std::shared_ptr<Backend> backend, const WaveletGeometry& geometry) {
    if (!backend) throw std::invalid_argument("wavelet: null backend");
    if (geometry.levels() == 0) throw std::invalid_argument("wavelet: geometry of " + geometry.shape.str() + " has no level");
    return std::make_shared<Wavelet>(std::move(backend), geometry);
}

}  // namespace larmor
