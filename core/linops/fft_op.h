#pragma once
// The centred orthonormal FFT over a set of axes (batched over the others) as an operator: forward =
// Backend::fft Forward, adjoint = Inverse. The transform is unitary, so normal() is a copy: a
// composition such as SENSE = M F S then never pays for the F^H F pair its normal would otherwise
// contain outside the mask.
#include "core/linops/linop.h"

namespace larmor {

LinOp fft_op(std::shared_ptr<Backend> backend, const Shape& shape, AxisMask axes);

}  // namespace larmor
