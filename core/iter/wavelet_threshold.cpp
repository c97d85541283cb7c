#include "core/iter/wavelet_threshold.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "core/linops/wavelet_kernels.h"

namespace larmor {
namespace {

class WaveletThreshold final : public Prox {
public:
    WaveletThreshold(std::shared_ptr<Backend> be, const WaveletGeometry& g, float lambda, size_t joint, bool spin,
                     uint64_t seed)
        : Prox(be, g.shape), g_(g), lambda_(lambda), joint_(joint), spin_(spin), state_(seed), c_(be->empty(g.shape)) {}

    // Three sweeps of the data and no copy: W into the workspace, the shrinkage into out, W^H in place.
    void apply(float step, const CArray& x, CArray& out) override {
        check(x, out, "wavelet_threshold_prox");
        WaveletShift shift{};
        if (spin_)
            for (int a = 0; a < g_.shape.rank(); ++a)
                if (g_.axes & (1u << a)) shift[size_t(a)] = size_t(next() % g_.shape[a]);
        wavelet_forward(backend(), g_, x, c_, shift);
        wavelet_soft_threshold(backend(), g_, step * lambda_, joint_, c_, out);
        wavelet_inverse_in_place(backend(), g_, out, shift);
    }

private:
    WaveletGeometry g_;
    float lambda_;
    size_t joint_;
    bool spin_;
    uint64_t state_;
    CArray c_;
    // SplitMix64 (Steele et al., OOPSLA 2014): the same sequence on every platform, unlike std:: engines'
    // distributions.
    uint64_t next() {
        uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
};

// The trailing axes whose product is `joint`, checked to be untouched by the wavelet.
void check_joint(const WaveletGeometry& g, size_t joint) {
    size_t product = 1;
    int a = g.shape.rank();
    while (product < joint && a > 0) product *= g.shape[--a];
    if (joint == 0 || product != joint)
        throw std::invalid_argument("wavelet threshold: joint " + std::to_string(joint) +
                                    " is not the product of trailing axes of " + g.shape.str());
    for (int b = a; b < g.shape.rank(); ++b)
        if (g.axes & (1u << b))
            throw std::invalid_argument("wavelet threshold: joint axis " + std::to_string(b) + " of " + g.shape.str() +
                                        " is also transformed");
}

}  // namespace

void wavelet_soft_threshold(Backend& backend, const WaveletGeometry& geometry, float lambda, size_t joint,
                            const CArray& c, CArray& out) {
    if (c.shape() != geometry.shape || out.shape() != geometry.shape)
        throw std::invalid_argument("wavelet_soft_threshold: coefficients " + c.shape().str() + " and output " +
                                    out.shape().str() + " must both be " + geometry.shape.str());
    check_joint(geometry, joint);
    if (backend.device() == Device::Cpu)
        cpu::wavelet_threshold(lambda, c, out, joint, geometry.coarse);
    else
        cuda::wavelet_threshold(backend, lambda, c, out, joint, geometry.coarse);
}

std::unique_ptr<Prox> wavelet_threshold_prox(std::shared_ptr<Backend> backend, const WaveletGeometry& geometry,
                                             float lambda, size_t joint, bool cycle_spinning, uint64_t seed) {
    if (!backend) throw std::invalid_argument("wavelet_threshold_prox: null backend");
    if (!(lambda >= 0.f))
        throw std::invalid_argument("wavelet_threshold_prox: lambda " + std::to_string(lambda) + " < 0");
    check_joint(geometry, joint);
    return std::make_unique<WaveletThreshold>(std::move(backend), geometry, lambda, joint, cycle_spinning, seed);
}

}  // namespace larmor
