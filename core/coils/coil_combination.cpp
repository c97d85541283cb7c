#include "core/coils/coil_combination.h"

#include <omp.h>

#include "core/coils/coil_checks.h"
#include "core/coils/coil_kernels.h"

namespace larmor::coils {
namespace {

void check_on(Backend& be, const CArray& a, const char* op, const char* name) {
    larmor::detail::check_device(a, be.device(), op, name);
    larmor::detail::check_allocated(a, op, name);
}

bool on_cpu(const Backend& be) { return be.device() == Device::Cpu; }

}  // namespace

void rss_last_axis(Backend& be, const CArray& x, CArray& y) {
    check_on(be, x, "rss_last_axis", "x");
    check_on(be, y, "rss_last_axis", "y");
    checks::check_reduced(x, y, "rss_last_axis");
    if (overlaps(x, y)) throw std::invalid_argument("rss_last_axis: y overlaps x " + x.shape().str());
    if (on_cpu(be))
        cpu::rss_last_axis(x, y, omp_get_max_threads());
    else
        cuda::rss_last_axis(be, x, y);
}

void combine_last_axis(Backend& be, const CArray& x, const CArray& maps, CArray& y) {
    check_on(be, x, "combine_last_axis", "x");
    check_on(be, maps, "combine_last_axis", "maps");
    check_on(be, y, "combine_last_axis", "y");
    checks::check_combine(x, maps, y);
    if (overlaps(x, y) || overlaps(maps, y))
        throw std::invalid_argument("combine_last_axis: y overlaps x or the maps " + x.shape().str());
    if (on_cpu(be))
        cpu::combine_last_axis(x, maps, y, omp_get_max_threads());
    else
        cuda::combine_last_axis(be, x, maps, y);
}

void walsh_sensitivities(Backend& be, const CArray& x, int kernel, int stride, CArray& maps) {
    check_on(be, x, "walsh_sensitivities", "x");
    check_on(be, maps, "walsh_sensitivities", "maps");
    checks::check_walsh(x, kernel, stride, maps);
    if (on_cpu(be))
        cpu::walsh_sensitivities(x, kernel, stride, maps, omp_get_max_threads());
    else
        cuda::walsh_sensitivities(be, x, kernel, stride, maps);
}

// The CPU reference: the maps, then the combination.
void walsh_combine(Backend& be, const CArray& x, int kernel, int stride, CArray& y) {
    check_on(be, x, "walsh_combine", "x");
    check_on(be, y, "walsh_combine", "y");
    checks::check_walsh_combine(x, kernel, stride, y);
    if (!on_cpu(be)) {
        cuda::walsh_combine(be, x, kernel, stride, y);
        return;
    }
    CArray maps = CArray::host(x.shape());
    cpu::walsh_sensitivities(x, kernel, stride, maps, omp_get_max_threads());
    cpu::combine_last_axis(x, maps, y, omp_get_max_threads());
}

}  // namespace larmor::coils
