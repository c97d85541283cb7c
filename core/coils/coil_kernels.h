#pragma once
// The coil kernels' own implementations (core/coils/coil_combination.h): CPU loops, one file each
// (core/coils/coil_reductions_cpu.cpp, core/coils/walsh_cpu.cpp), where `threads` is the OpenMP team
// size; and CUDA entry points that take the session's backend, queue the kernels on its stream and
// draw their scratch from its memory (cuda/coil_entry.cpp; a build without nvcc has a stub that
// refuses, core/coils/coils_cuda_stub.cpp). Arguments are already validated by the caller
// (core/coils/coil_checks.h).
#include <vector>

#include "core/backend.h"

namespace larmor::coils {

namespace cpu {
void rss_last_axis(const CArray& x, CArray& y, int threads);
void combine_last_axis(const CArray& x, const CArray& maps, CArray& y, int threads);
void walsh_sensitivities(const CArray& x, int kernel, int stride, CArray& maps, int threads);

// Each coil's energy sum_p |x[p, c]|^2, in double.
std::vector<double> coil_energies(const cfloat* x, size_t pixels, size_t coils, int threads);
// Index of the coil with the largest energy (the first on ties): the phase reference of the Walsh
// maps, shared by both implementations.
int strongest_coil(const std::vector<double>& energy);
}  // namespace cpu

namespace cuda {
void rss_last_axis(Backend& be, const CArray& x, CArray& y);
void combine_last_axis(Backend& be, const CArray& x, const CArray& maps, CArray& y);
void walsh_sensitivities(Backend& be, const CArray& x, int kernel, int stride, CArray& maps);
void walsh_combine(Backend& be, const CArray& x, int kernel, int stride, CArray& y);
}  // namespace cuda

}  // namespace larmor::coils
