// CUDA entry points of the gadget kernels (line placement, coil mixing): the session's stream and
// device come from its backend (cuda/cuda_backend.h).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "cuda/cuda_backend.h"
#include "cuda/device_context.h"
#include "gadgets/kernels/cuda/cuda_kernels.h"
#include "gadgets/kernels/cuda/line_kernels.h"

namespace larmor::kernels::cuda {
namespace {

using larmor::cuda::DeviceGuard;

float2* dev(CArray& a) { return reinterpret_cast<float2*>(a.data()); }
const float2* dev(const CArray& a) { return reinterpret_cast<const float2*>(a.data()); }

// Device memory of the backend's device, or a clear refusal naming the array.
Placements placements(const std::vector<LinePlacement>& where, size_t first) {
    Placements p;
    p.count = static_cast<int>(std::min<size_t>(kMaxPlacements, where.size() - first));
    p.first = static_cast<long long>(first);
    for (int q = 0; q < p.count; ++q) {
        const LinePlacement& w = where[first + static_cast<size_t>(q)];
        p.line[q] = static_cast<long long>(w.line);
        p.keep[q] = w.keep;
        p.scale[q] = w.scale;
    }
    return p;
}

}  // namespace

void place_lines(Backend& be, const CArray& src, const std::vector<LinePlacement>& where, CArray& dst,
                 const checks::PlaceDims& d) {
    larmor::cuda::check_on_backend(be, src, "place_lines", "src");
    larmor::cuda::check_on_backend(be, dst, "place_lines", "dst");
    DeviceGuard g(larmor::cuda::backend_device(be));
    const cudaStream_t stream = larmor::cuda::backend_stream(be);
    for (size_t first = 0; first < where.size(); first += kMaxPlacements)
        launch_place_lines(dev(src), static_cast<long long>(d.l), static_cast<long long>(d.k), dev(dst),
                           static_cast<long long>(d.e), static_cast<long long>(d.c), placements(where, first), stream);
}

void mix_place_lines(Backend& be, const CArray& src, const CArray& m, const std::vector<LinePlacement>& where,
                     CArray& dst, const checks::MixPlaceDims& d) {
    larmor::cuda::check_on_backend(be, src, "mix_place_lines", "src");
    larmor::cuda::check_on_backend(be, m, "mix_place_lines", "m");
    larmor::cuda::check_on_backend(be, dst, "mix_place_lines", "dst");
    DeviceGuard g(larmor::cuda::backend_device(be));
    const cudaStream_t stream = larmor::cuda::backend_stream(be);
    for (size_t first = 0; first < where.size(); first += kMaxPlacements)
        launch_mix_place_lines(dev(src), static_cast<long long>(d.l), static_cast<long long>(d.k),
                               static_cast<long long>(d.d), dev(m), dev(dst), static_cast<long long>(d.e),
                               static_cast<long long>(d.c), placements(where, first), stream);
}

// x [N, D] into y [N, C] is mix_place_lines of one "line" of N samples: src [N, 1, D], dst [N, 1, C].
void mix_last_axis(Backend& be, const CArray& x, const std::vector<cfloat>& m, CArray& y, const checks::MixDims& d) {
    larmor::cuda::check_on_backend(be, x, "mix_last_axis", "x");
    larmor::cuda::check_on_backend(be, y, "mix_last_axis", "y");
    if (d.d == 0) {
        be.fill(y, cfloat(0.f, 0.f));
        return;
    }
    CArray mh = CArray::host({m.size()});
    std::copy(m.begin(), m.end(), mh.data());
    const CArray md = be.to_device(mh);
    CArray dst = y.reshaped({d.n, 1, d.c});
    const checks::MixPlaceDims pd{d.n, 1, 1, d.d, d.c};
    mix_place_lines(be, x.reshaped({d.n, 1, d.d}), md, {LinePlacement{0, 0.f, 1.f}}, dst, pd);
}

}  // namespace larmor::kernels::cuda
