#include "core/recon/toeplitz_cg.h"

#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/linops/algebra.h"
#include "core/linops/diag.h"
#include "core/linops/finite_difference.h"
#include "core/linops/sense.h"

namespace larmor {
namespace {

Shape with_axis(const Shape& s, size_t n) {
    Shape o = s;
    o.push_back(n);
    return o;
}

}  // namespace

const char* regularizer_name(ToeplitzCgSetup::Regularizer r) {
    switch (r) {
        case ToeplitzCgSetup::Regularizer::FiniteDifference: return "finite differences";
        case ToeplitzCgSetup::Regularizer::AnatomicalFiniteDifference: return "anatomically weighted finite differences";
        case ToeplitzCgSetup::Regularizer::Identity: break;
    }
    return "identity";
}

ToeplitzOptions toeplitz_options(const ToeplitzCgSetup& setup) {
    ToeplitzOptions to;
    to.basis = setup.basis;
    to.method = setup.q;
    to.accurate_sincos = setup.accurate_sincos;
    // Q by NUFFT at the tightest tolerance: its error is the normal operator's (README, "FHd + Toeplitz CG").
    to.nufft_tolerance = 1e-6;
    return to;
}

ToeplitzCg toeplitz_cg(const std::shared_ptr<Backend>& be, const Shape& image, const RArray& coords, const CArray& data,
                       const CArray& maps, const RArray& weights, const ToeplitzCgSetup& setup, CArray spectrum) {
    if (!be) throw std::invalid_argument("toeplitz_cg: null backend");
    Backend& b = *be;
    const int dims = image.rank();
    if (dims < 2 || dims > 3) throw std::invalid_argument("toeplitz_cg: image " + image.str() + " must be 2D or 3D");
    if (coords.shape().rank() != 2 || coords.shape()[0] != size_t(dims))
        throw std::invalid_argument("toeplitz_cg: coordinates " + coords.shape().str() + " are not [" +
                                    std::to_string(dims) + ", M] for image " + image.str());
    const size_t m = coords.shape()[1];
    if (data.shape().rank() != 2 || data.shape()[0] != m)
        throw std::invalid_argument("toeplitz_cg: data " + data.shape().str() + " are not [" + std::to_string(m) +
                                    ", coils] for " + std::to_string(m) + " trajectory points");
    const size_t coils = data.shape()[1];
    if (maps.empty() && coils != 1)
        throw std::invalid_argument("toeplitz_cg: " + std::to_string(coils) + " coils and no coil maps");
    if (!maps.empty() && maps.shape() != with_axis(image, coils))
        throw std::invalid_argument("toeplitz_cg: coil maps " + maps.shape().str() + " do not match image " +
                                    image.str() + " x " + std::to_string(coils) + " coils");
    if (!weights.empty() && weights.size() != m)
        throw std::invalid_argument("toeplitz_cg: " + std::to_string(weights.size()) + " weights for " +
                                    std::to_string(m) + " points");
    if (!(setup.lambda >= 0.f) || !std::isfinite(setup.lambda))
        throw std::invalid_argument("toeplitz_cg: lambda " + std::to_string(setup.lambda));
    const bool anatomical = setup.regularizer == ToeplitzCgSetup::Regularizer::AnatomicalFiniteDifference;
    if (anatomical && setup.edge_weights.shape() != with_axis(image, size_t(dims)))
        throw std::invalid_argument("toeplitz_cg: edge weights " + setup.edge_weights.shape().str() + " are not " +
                                    with_axis(image, size_t(dims)).str() + " for image " + image.str());

    // W^1/2 and phi on the host (weights are checked here: one refusal names the sample).
    const RArray kh = b.to_host(coords);
    const std::vector<float> phi = voxel_basis_weights(kh, image, setup.basis);
    const RArray wh = weights.empty() ? RArray() : b.to_host(weights);
    RArray sqrt_w = RArray::host({m});
    double q0 = 0.0;
    for (size_t i = 0; i < m; ++i) {
        const float w = wh.empty() ? 1.f : wh.data()[i];
        if (!(w >= 0.f) || !std::isfinite(w))
            throw std::invalid_argument("toeplitz_cg: weight of sample " + std::to_string(i) + " is " + std::to_string(w));
        sqrt_w.data()[i] = std::sqrt(w);
        q0 += double(w) * double(phi[i]) * double(phi[i]);
    }
    q0 /= double(image.size());

    // F (image x coils -> samples x coils), with the voxel basis either way.
    LinOp f;
    if (setup.adjoint == ToeplitzCgSetup::Adjoint::Exact) {
        f = nudft(be, image, coils, coords, {setup.basis, setup.accurate_sincos});
    } else {
        RArray ph = RArray::host({m});
        for (size_t i = 0; i < m; ++i) ph.data()[i] = phi[i];
        f = compose(diag(be, Shape{m, coils}, b.to_device(ph)), Nufft::create(be, image, coils, coords, setup.nufft));
    }
    LinOp wf = compose(diag(be, Shape{m, coils}, b.to_device(sqrt_w)), f);
    if (setup.normal == ToeplitzCgSetup::Normal::Toeplitz) {
        if (spectrum.empty()) spectrum = toeplitz_spectrum(be, image, kh, weights.empty() ? RArray() : wh, toeplitz_options(setup));
        wf = with_normal(wf, toeplitz_normal(be, image, coils, spectrum));
    } else if (setup.adjoint == ToeplitzCgSetup::Adjoint::Exact) {
        // The pair must be the NUFFT's (the exact forward costs as much as FHd per iteration): E^H E by
        // the NUFFT, the right-hand side still exact.
        RArray ph = RArray::host({m});
        for (size_t i = 0; i < m; ++i) ph.data()[i] = phi[i] * sqrt_w.data()[i];
        LinOp pair = compose(diag(be, Shape{m, coils}, b.to_device(ph)), Nufft::create(be, image, coils, coords, setup.nufft));
        wf = with_normal(wf, normal(pair));
    }

    ToeplitzCg out;
    // Single-coil data without maps: F acts on [image..., 1]; the unknown is [image...].
    LinOp e;
    double coil_energy = 1.0;
    if (maps.empty()) {
        e = compose(wf, reshape(be, image, with_axis(image, 1)));
    } else {
        e = compose(wf, sense(be, maps));
        CArray n2 = b.empty({1});
        b.norm2(maps, n2);
        coil_energy = b.to_host(n2).data()[0].real() / double(image.size());
    }
    out.data_term_scale = q0 * coil_energy;
    out.lambda_absolute = double(setup.lambda) * out.data_term_scale;

    // b = E^H W^1/2 d = S^H F^H W d.
    CArray yw = b.empty({m, coils});
    b.mul(data, b.to_device(sqrt_w), yw);
    CArray rhs = b.empty(image);
    e->adjoint(yw, rhs);

    LinOp n = normal(e);
    if (out.lambda_absolute > 0.0) {
        const float la = static_cast<float>(out.lambda_absolute);
        if (setup.regularizer == ToeplitzCgSetup::Regularizer::Identity) {
            n = sum(n, scale(la, identity(be, image)));
        } else {
            std::vector<int> axes;
            for (int a = 0; a < dims; ++a) axes.push_back(a);
            LinOp r = finite_difference(be, image, axes);
            if (anatomical) r = compose(diag(be, with_axis(image, size_t(dims)), setup.edge_weights), r);
            n = sum(n, scale(la, normal(r)));
        }
    }
    out.image = b.zeros(image);
    out.solver = std::make_unique<ConjugateGradient>(n, rhs, out.image, setup.cg);
    out.spectrum = spectrum;
    return out;
}

}  // namespace larmor
