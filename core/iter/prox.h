#pragma once
// Proximal maps and projections, the non-linear steps of FISTA (Beck & Teboulle 2009) and POCS
// (l1-SPIRiT, Lustig & Pauly 2010; Murphy et al. 2012): out = prox_{step g}(x). Like operators they
// live on one backend, write into outputs the caller owns (out may be x itself) and allocate only
// when built.
#include <memory>

#include "core/backend.h"
#include "core/linops/linop.h"

namespace larmor {

class Prox {
public:
    Prox(std::shared_ptr<Backend> backend, Shape shape) : backend_(std::move(backend)), shape_(shape) {}
    virtual ~Prox() = default;
    const Shape& shape() const { return shape_; }
    Backend& backend() const { return *backend_; }

    // out = prox_{step g}(x); x and out have shape() and may be the same array.
    virtual void apply(float step, const CArray& x, CArray& out) = 0;

protected:
    void check(const CArray& x, const CArray& out, const char* name) const;

private:
    std::shared_ptr<Backend> backend_;
    Shape shape_;
};

// g = lambda sum_i ||x_i||_2 over groups of `joint` elements along the trailing axes (joint = 1: the
// l1 norm; joint = coils: joint sparsity across coils): soft thresholding by step * lambda.
std::unique_ptr<Prox> soft_threshold_prox(std::shared_ptr<Backend> backend, const Shape& shape, float lambda,
                                          size_t joint = 1);

// The projection onto {x : x = y where mask = 1} (data consistency of POCS): out = x + mask (y - x).
// mask: real 0/1 weights broadcast over shape's trailing axes; y: the measured (zero-filled) data.
// The step is ignored (a projection is its own prox for every step).
std::unique_ptr<Prox> data_consistency_projection(std::shared_ptr<Backend> backend, const RArray& mask,
                                                  const CArray& y);

// A linear map as a POCS step: out = A x (A square; e.g. the SPIRiT consistency step x <- G x of
// l1-SPIRiT). The step is ignored.
std::unique_ptr<Prox> linear_step(LinOp a);

// The SPIRiT step of l1-SPIRiT POCS, out = G x (Murphy et al. 2012, Fig. 1; core/linops/spirit.h), with
// out allowed to be x: the per-pixel product runs in place, so it moves G once and the coil array twice,
// without linear_step's workspace and copy back. g: [X, Y..., C, C] on the backend's device (used, not
// copied); the step acts on [X, Y..., C]. The step size is ignored.
std::unique_ptr<Prox> spirit_step(std::shared_ptr<Backend> backend, const CArray& g);

// A prox taken in another orthonormal basis: out = U^H p(U x) for unitary U (the image-domain form
// of k-space data consistency: U = the centred FFT, p = data_consistency_projection).
std::unique_ptr<Prox> in_basis(LinOp u, std::unique_ptr<Prox> p);

}  // namespace larmor
