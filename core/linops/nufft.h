#pragma once
// The non-uniform FFT as a linear operator: forward = type 2 (image -> samples at arbitrary k-space
// points), adjoint = type 1 (gridding). Following Barnett, Magland & af Klinteberg, SIAM J. Sci.
// Comput. 41:C479 (2019): deapodise, zero-pad onto a grid oversampled by sigma, FFT, then interpolate
// with the "exponential of semicircle" kernel (core/linops/nufft_kernels.h); the adjoint runs the
// same steps backwards (spread, inverse FFT, crop, deapodise), so it is exactly the forward's adjoint.
#include <memory>

#include "core/linops/linop.h"
#include "core/linops/nufft_kernels.h"

namespace larmor {

struct NufftOptions {
    double tolerance = 1e-3;   // requested relative L2 accuracy, 1e-1 .. 1e-6
    double upsampling = 2.0;   // oversampling sigma of the grid, 1.25 .. 2 (each grid axis rounded up to an FFT-friendly even size)
};

// Where a new plan takes its binned points from when several sessions reconstruct the same
// trajectory on one device: binning depends only on the grid, the kernel width and the points, so a
// server keeps the sets it has binned (gadgets/noncart/nufft_bins.h) and a plan for the same trajectory
// takes one instead of sorting again. Nufft::create asks it; set_points (a moving real-time window,
// whose every frame is new) bins privately.
class NufftBinSource {
public:
    virtual ~NufftBinSource() = default;
    // The point set for grid g (its batch included) and coordinates u: grid units wrapped into [0, n_a),
    // [dims, M], on be's device after be's pending work; u_host holds the same values on the host.
    virtual std::shared_ptr<const NufftPointSet> bins(Backend& be, const NufftGrid& g, const RArray& u,
                                                      const RArray& u_host) = 0;
};

namespace nufft_detail {
struct Plan;  // grid, points and kernels shared by the operator and its interpolation()
}

// Non-uniform FFT (type 2 forward, type 1 adjoint), batched over `batch` transforms that share the points.
// ishape = [image..., batch] (image = [N0], [N0, N1] or [N0, N1, N2]), oshape = [M, batch].
// forward: y[m, b] = N^{-1/2} sum_n x[n, b] exp(-2 pi i sum_a k[a, m] (n_a - N_a/2) / N_a), N = prod N_a.
class Nufft final : public LinearOperator {
    struct Key {};  // create() is the only way in

public:
    // coords: RArray [dims, M] in cycles per FOV, each coordinate in [-N_a/2, N_a/2] (else invalid_argument
    // naming the point, axis and value; NaN refused too), on the host or on the backend's device.
    // bins: where the binned points come from (null: binned by this plan).
    static std::shared_ptr<Nufft> create(std::shared_ptr<Backend> be, const Shape& image, size_t batch,
                                         const RArray& coords, const NufftOptions& opts = {},
                                         NufftBinSource* bins = nullptr);
    // New points, same M (a real-time sliding window moves its spokes every frame): only the binning
    // is redone; nothing else is reallocated.
    void set_points(const RArray& coords);
    // The convolution alone, C: grid [n..., batch] -> points [M, batch] (forward = interp, adjoint =
    // spread), sharing this plan's points: Pipe-Menon density compensation and Toeplitz embeddings use it.
    // It also shares the plan's kernel workspace (the CPU's per-thread tile buffers), so it is used by
    // the thread that uses this operator (linop.h: one thread at a time), and it follows set_points().
    LinOp interpolation();
    const NufftGrid& grid() const;
    size_t points() const;
    // Whether the binned points came from a NufftBinSource (and may be another plan's too).
    bool shared_bins() const;

    Nufft(Key, std::shared_ptr<Backend> be, const Shape& ishape, const Shape& oshape,
          std::shared_ptr<nufft_detail::Plan> plan, RArray weight);
    ~Nufft() override;

protected:
    void apply_forward(const CArray& x, CArray& y) override;
    void apply_adjoint(const CArray& y, CArray& x) override;

private:
    std::shared_ptr<nufft_detail::Plan> plan_;
    RArray weight_;  // [image]: (-1)^j N^{-1/2} / prod_a psi_hat_a: centring, normalisation, deapodisation
    Shape image_, grid_;  // [image...] and [n..., batch]
};

}  // namespace larmor
