#pragma once
// Kernels of the fused CG-SENSE normal operator (core/linops/sense_normal.h), one CPU and one CUDA
// definition (cuda/sense_normal.cu; a build without CUDA has a stub that throws). Layouts: maps
// [RO, E1, C] readout fastest, x and out [RO, E1]; `mask` holds E1 values, the line weights shifted by
// E1/2 and divided by E1 (what the plain DFT pair needs). out must not overlap x.
#include <cstddef>
#include <memory>

#include "core/backend.h"

namespace larmor {

namespace cpu {
// FFTW plans for columns of length e1, made once per operator (under the process's planner lock).
class SenseColumnPlans;
std::shared_ptr<SenseColumnPlans> sense_column_plans(size_t e1);
void sense_normal_apply(const SenseColumnPlans& plans, const CArray& maps, const RArray& mask, const CArray& x,
                        CArray& out, size_t ro, size_t e1, size_t coils, float lambda);
}  // namespace cpu

namespace cuda {
// Whether the CUDA kernel has an instance for columns of length e1.
bool sense_normal_supports(size_t e1);
void sense_normal_apply(Backend& be, const CArray& maps, const RArray& mask, const CArray& x, CArray& out, size_t ro,
                        size_t e1, size_t coils, float lambda);
// The same, then Backend::cg_coefficients(x, out, coefficients), taken in the kernel's epilogue from
// the values it holds (LinearOperator::forward_cg).
void sense_normal_apply_cg(Backend& be, const CArray& maps, const RArray& mask, const CArray& x, CArray& out,
                           CArray& coefficients, size_t ro, size_t e1, size_t coils, float lambda);
}  // namespace cuda

}  // namespace larmor
