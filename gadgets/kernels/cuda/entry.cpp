// CUDA entry points of the gadget kernels: the session's stream and device come from its backend
// (cuda/cuda_backend.h), scratch from its arrays (the session's block cache).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "cuda/cuda_backend.h"
#include "cuda/device_context.h"
#include "gadgets/kernels/cuda/coil_kernels.h"
#include "gadgets/kernels/cuda/cuda_kernels.h"
#include "gadgets/kernels/cuda/line_kernels.h"

namespace larmor::kernels::cuda {
namespace {

using larmor::cuda::DeviceGuard;

float2* dev(CArray& a) { return reinterpret_cast<float2*>(a.data()); }
const float2* dev(const CArray& a) { return reinterpret_cast<const float2*>(a.data()); }

// Device memory of the backend's device, or a clear refusal naming the array.
void check_ours(Backend& be, const CArray& a, const char* op, const char* name) {
    if (a.size() == 0) return;
    const int want = larmor::cuda::backend_device(be);
    const int got = a.device() == Device::Cuda && a.storage() ? larmor::cuda::storage_device(*a.storage()) : -1;
    if (got != want)
        throw std::invalid_argument(std::string(op) + ": " + name + " " + a.shape().str() +
                                    (got < 0 ? std::string(" is not device memory of the session's CUDA backend")
                                             : " lives on CUDA device " + std::to_string(got)) +
                                    ", the backend is on device " + std::to_string(want));
}

// A scratch block of at least `bytes` on the backend (released, stream-ordered, with its handle).
CArray scratch(Backend& be, size_t bytes) { return be.empty({std::max<size_t>(1, (bytes + 7) / 8)}); }

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

// Sizes for the Walsh kernels of x [X, Y, Z..., C] (non-empty); at most kWalshMaxCoils coils.
WalshDims walsh_dims(const CArray& x, int kernel, int stride, const char* op) {
    const Shape& s = x.shape();
    const size_t nc = s[s.rank() - 1];
    if (nc > static_cast<size_t>(kWalshMaxCoils))
        throw std::invalid_argument(std::string(op) + ": " + std::to_string(nc) + " coils in " + s.str() +
                                    " exceed the CUDA kernel's limit of " + std::to_string(kWalshMaxCoils) +
                                    " (compress coils first)");
    const size_t slices = x.size() / (s[0] * s[1] * nc);
    return WalshDims{static_cast<long long>(s[0]), static_cast<long long>(s[1]), static_cast<long long>(slices),
                     static_cast<int>(nc), kernel, stride};
}

}  // namespace

void place_lines(Backend& be, const CArray& src, const std::vector<LinePlacement>& where, CArray& dst,
                 const checks::PlaceDims& d) {
    check_ours(be, src, "place_lines", "src");
    check_ours(be, dst, "place_lines", "dst");
    DeviceGuard g(larmor::cuda::backend_device(be));
    const cudaStream_t stream = larmor::cuda::backend_stream(be);
    for (size_t first = 0; first < where.size(); first += kMaxPlacements)
        launch_place_lines(dev(src), static_cast<long long>(d.l), static_cast<long long>(d.k), dev(dst),
                           static_cast<long long>(d.e), static_cast<long long>(d.c), placements(where, first), stream);
}

void mix_place_lines(Backend& be, const CArray& src, const CArray& m, const std::vector<LinePlacement>& where,
                     CArray& dst, const checks::MixPlaceDims& d) {
    check_ours(be, src, "mix_place_lines", "src");
    check_ours(be, m, "mix_place_lines", "m");
    check_ours(be, dst, "mix_place_lines", "dst");
    DeviceGuard g(larmor::cuda::backend_device(be));
    const cudaStream_t stream = larmor::cuda::backend_stream(be);
    for (size_t first = 0; first < where.size(); first += kMaxPlacements)
        launch_mix_place_lines(dev(src), static_cast<long long>(d.l), static_cast<long long>(d.k),
                               static_cast<long long>(d.d), dev(m), dev(dst), static_cast<long long>(d.e),
                               static_cast<long long>(d.c), placements(where, first), stream);
}

// x [N, D] into y [N, C] is mix_place_lines of one "line" of N samples: src [N, 1, D], dst [N, 1, C].
void mix_last_axis(Backend& be, const CArray& x, const std::vector<cfloat>& m, CArray& y, const checks::MixDims& d) {
    check_ours(be, x, "mix_last_axis", "x");
    check_ours(be, y, "mix_last_axis", "y");
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

void rss_last_axis(Backend& be, const CArray& x, CArray& y) {
    check_ours(be, x, "rss_last_axis", "x");
    check_ours(be, y, "rss_last_axis", "y");
    DeviceGuard g(larmor::cuda::backend_device(be));
    const long long pixels = static_cast<long long>(y.size());
    launch_rss(dev(x), pixels, pixels ? static_cast<long long>(x.size()) / pixels : 0, dev(y),
               larmor::cuda::backend_stream(be));
}

void combine_last_axis(Backend& be, const CArray& x, const CArray& maps, CArray& y) {
    check_ours(be, x, "combine_last_axis", "x");
    check_ours(be, maps, "combine_last_axis", "maps");
    check_ours(be, y, "combine_last_axis", "y");
    DeviceGuard g(larmor::cuda::backend_device(be));
    const long long pixels = static_cast<long long>(y.size());
    launch_combine(dev(x), dev(maps), pixels, pixels ? static_cast<long long>(x.size()) / pixels : 0, dev(y),
                   larmor::cuda::backend_stream(be));
}

void walsh_sensitivities(Backend& be, const CArray& x, int kernel, int stride, CArray& maps) {
    check_ours(be, x, "walsh_sensitivities", "x");
    check_ours(be, maps, "walsh_sensitivities", "maps");
    if (x.size() == 0) return;
    const WalshDims d = walsh_dims(x, kernel, stride, "walsh_sensitivities");
    CArray s = scratch(be, walsh_scratch_bytes(d));
    DeviceGuard g(larmor::cuda::backend_device(be));
    launch_walsh(dev(x), d, s.data(), dev(maps), larmor::cuda::backend_stream(be));
}

void walsh_combine(Backend& be, const CArray& x, int kernel, int stride, CArray& y) {
    check_ours(be, x, "walsh_combine", "x");
    check_ours(be, y, "walsh_combine", "y");
    if (x.size() == 0) return;
    const WalshDims d = walsh_dims(x, kernel, stride, "walsh_combine");
    CArray s = scratch(be, walsh_combine_scratch_bytes(d));
    DeviceGuard g(larmor::cuda::backend_device(be));
    launch_walsh_combine(dev(x), d, s.data(), dev(y), larmor::cuda::backend_stream(be));
}

}  // namespace larmor::kernels::cuda
