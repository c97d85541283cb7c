#pragma once
// Cartesian undersampling of the centred FFT as one operator: A = M F over `axes`, M a 0/1 mask
// broadcast over the trailing axes (coils). Its normal operator F^H M F is where CG-SENSE spends its
// time, and it is cheaper than the pair suggests: along an axis where the mask does not vary (the
// readout of a Cartesian scan), the 1D transform commutes with M and cancels against its inverse,
// so normal() transforms only along the axes the mask varies on (phase encoding): for a 2D scan a
// 1D FFT along y and back instead of two 2D FFTs. Exact, not an approximation: F_x^H M F_x = M when M
// is constant along x.
#include "core/linops/linop.h"

namespace larmor {

// shape: the k-space shape, e.g. [RO, E1, E2, C]; mask: [RO, E1(, E2)] (a leading shape of `shape`),
// values 0 or 1 (throws naming the first other value).
LinOp sampled_fft(std::shared_ptr<Backend> backend, const Shape& shape, AxisMask axes, const RArray& mask);

// The axes of `axes` along which `mask` (a host array, leading shape of `shape`) varies.
AxisMask mask_varying_axes(const RArray& mask, AxisMask axes);

}  // namespace larmor
