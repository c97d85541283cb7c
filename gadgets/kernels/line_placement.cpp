#include "gadgets/kernels/line_placement.h"

#include <omp.h>

#include "gadgets/kernels/checks.h"
#include "gadgets/kernels/cpu/cpu_kernels.h"
#include "gadgets/kernels/cuda/cuda_kernels.h"

namespace larmor::kernels {
namespace {

void check_on(Backend& be, const CArray& a, const char* op, const char* name) {
    larmor::detail::check_device(a, be.device(), op, name);
    larmor::detail::check_allocated(a, op, name);
}

}  // namespace

void place_lines(Backend& be, const CArray& src, const std::vector<LinePlacement>& where, CArray& dst) {
    check_on(be, src, "place_lines", "src");
    check_on(be, dst, "place_lines", "dst");
    const checks::PlaceDims d = checks::check_place_lines(src, where, dst);
    if (where.empty() || d.l == 0 || d.c == 0) return;
    if (be.device() == Device::Cpu)
        cpu::place_lines(src, where, dst, d.l, d.k, d.e, d.c, omp_get_max_threads());
    else
        cuda::place_lines(be, src, where, dst, d);
}

void mix_place_lines(Backend& be, const CArray& src, const CArray& m, const std::vector<LinePlacement>& where,
                     CArray& dst) {
    check_on(be, src, "mix_place_lines", "src");
    check_on(be, m, "mix_place_lines", "m");
    check_on(be, dst, "mix_place_lines", "dst");
    const checks::MixPlaceDims d = checks::check_mix_place_lines(src, m.size(), where, dst);
    if (where.empty() || d.l == 0 || d.c == 0) return;
    if (be.device() == Device::Cpu) {
        const std::vector<cfloat> mh(m.data(), m.data() + m.size());
        cpu::mix_place_lines(src, mh, where, dst, d.l, d.k, d.e, d.d, d.c, omp_get_max_threads());
    } else {
        cuda::mix_place_lines(be, src, m, where, dst, d);
    }
}

void mix_last_axis(Backend& be, const CArray& x, const std::vector<cfloat>& m, CArray& y) {
    check_on(be, x, "mix_last_axis", "x");
    check_on(be, y, "mix_last_axis", "y");
    const checks::MixDims d = checks::check_mix(x, m.size(), y);
    if (d.n == 0 || d.c == 0) return;
    if (be.device() == Device::Cpu)
        cpu::mix_last_axis(x, m, y);
    else
        cuda::mix_last_axis(be, x, m, y, d);
}

}  // namespace larmor::kernels
