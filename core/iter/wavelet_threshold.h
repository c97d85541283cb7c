#pragma once
// The proximal map of lambda ||W x||_{2,1} for the orthogonal wavelet W (core/linops/wavelet.h):
// out = W^H S(W x), S the soft threshold applied jointly over `joint` trailing elements (the coils of
// l1-SPIRiT, Murphy et al. 2012, Eq. 3: one shrinkage for all coil images, so they share their
// support; joint = 1: the l1 norm of l1-wavelet SENSE). Exact because W is orthogonal. The low band
// after the last level is left unshrunk: it holds the image's smooth content, not its sparse detail.
#include <cstdint>
#include <memory>

#include "core/iter/prox.h"
#include "core/linops/wavelet.h"

namespace larmor {

// joint must be the product of geometry.shape's trailing axes that the wavelet does not transform.
// cycle_spinning: each apply() thresholds in the basis shifted by a new pseudo-random offset along every
// transformed axis (WaveletShift), out = R^H W^H S(W R x); the offsets come from a generator seeded
// with `seed`, so two proxes of one seed (a volume's slabs, the CPU and CUDA runs) shift alike.
std::unique_ptr<Prox> wavelet_threshold_prox(std::shared_ptr<Backend> backend, const WaveletGeometry& geometry,
                                             float lambda, size_t joint, bool cycle_spinning = false,
                                             uint64_t seed = 1);

// The threshold alone (no transform): out = S(c) for wavelet coefficients c of geometry.shape; the
// low band is copied. The prox's middle step, exposed for the benchmarks and tests.
void wavelet_soft_threshold(Backend& backend, const WaveletGeometry& geometry, float lambda, size_t joint,
                            const CArray& c, CArray& out);

}  // namespace larmor
