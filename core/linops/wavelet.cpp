#include "core/linops/wavelet.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "core/linops/wavelet_kernels.h"

namespace larmor {
namespace {

void pass(Backend& be, const CArray& src, CArray& dst, const Shape& block, int axis, bool inverse, size_t shift) {
    if (be.device() == Device::Cpu)
        cpu::wavelet_pass(src, dst, block, axis, inverse, shift);
    else
        cuda::wavelet_pass(be, src, dst, block, axis, inverse, shift);
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
// block is the whole array, so its first pass can read x and write c: no copy first. A shift R = R_a R_b
// commutes with the passes along the other axes (a pass along a treats every line alike, a shift
// along b only permutes lines), so W_0 R = P_b R_b P_a R_a: each level-0 pass reads its own axis's
// lines turned, and an axis that level 0 leaves alone (odd length) is not transformed anywhere.
void wavelet_forward(Backend& backend, const WaveletGeometry& g, const CArray& x, CArray& c,
                     const WaveletShift& shift) {
    bool first = true;
    for (int l = 0; l < g.levels(); ++l)
        for (int a = 0; a < g.shape.rank(); ++a)
            if (g.level_axes[size_t(l)] & (1u << a)) {
                pass(backend, first ? x : c, c, g.blocks[size_t(l)], a, false, l == 0 ? shift[size_t(a)] : 0);
                first = false;
            }
}

// The inverse undoes the passes in reverse order, level 0's writing its lines turned back.
void wavelet_inverse_in_place(Backend& backend, const WaveletGeometry& g, CArray& x, const WaveletShift& shift) {
    for (int l = g.levels() - 1; l >= 0; --l)
        for (int a = g.shape.rank() - 1; a >= 0; --a)
            if (g.level_axes[size_t(l)] & (1u << a))
                pass(backend, x, x, g.blocks[size_t(l)], a, true, l == 0 ? shift[size_t(a)] : 0);
}

WaveletGeometry wavelet_geometry(const Shape& shape, AxisMask axes, int levels, size_t coarsest) {
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
            if ((axes & (1u << a)) && block[a] % 2 == 0 && block[a] >= WaveletGeometry::kMinLength &&
                (levels > 0 || g.levels() == 0 || block[a] / 2 >= coarsest))  // a small image keeps one level
                now |= 1u << a;
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
