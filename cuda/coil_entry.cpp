// CUDA entry points of the coil kernels (core/coils/coil_kernels.h): the session's stream and device
// come from its backend (cuda/cuda_backend.h), scratch from its arrays (the session's block cache).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/coils/coil_kernels.h"
#include "cuda/coil_launchers.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_context.h"

namespace larmor::coils::cuda {
namespace {

using larmor::cuda::DeviceGuard;

float2* dev(CArray& a) { return reinterpret_cast<float2*>(a.data()); }
const float2* dev(const CArray& a) { return reinterpret_cast<const float2*>(a.data()); }

// Device memory of the backend's device, or a clear refusal naming the array.
// A scratch block of at least `bytes` on the backend (released, stream-ordered, with its handle).
CArray scratch(Backend& be, size_t bytes) { return be.empty({std::max<size_t>(1, (bytes + 7) / 8)}); }

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

void rss_last_axis(Backend& be, const CArray& x, CArray& y) {
    larmor::cuda::check_on_backend(be, x, "rss_last_axis", "x");
    larmor::cuda::check_on_backend(be, y, "rss_last_axis", "y");
    DeviceGuard g(larmor::cuda::backend_device(be));
    const long long pixels = static_cast<long long>(y.size());
    launch_rss(dev(x), pixels, pixels ? static_cast<long long>(x.size()) / pixels : 0, dev(y),
               larmor::cuda::backend_stream(be));
}

void combine_last_axis(Backend& be, const CArray& x, const CArray& maps, CArray& y) {
    larmor::cuda::check_on_backend(be, x, "combine_last_axis", "x");
    larmor::cuda::check_on_backend(be, maps, "combine_last_axis", "maps");
    larmor::cuda::check_on_backend(be, y, "combine_last_axis", "y");
    DeviceGuard g(larmor::cuda::backend_device(be));
    const long long pixels = static_cast<long long>(y.size());
    launch_combine(dev(x), dev(maps), pixels, pixels ? static_cast<long long>(x.size()) / pixels : 0, dev(y),
                   larmor::cuda::backend_stream(be));
}

void walsh_sensitivities(Backend& be, const CArray& x, int kernel, int stride, CArray& maps) {
    larmor::cuda::check_on_backend(be, x, "walsh_sensitivities", "x");
    larmor::cuda::check_on_backend(be, maps, "walsh_sensitivities", "maps");
    if (x.size() == 0) return;
    const WalshDims d = walsh_dims(x, kernel, stride, "walsh_sensitivities");
    CArray s = scratch(be, walsh_scratch_bytes(d));
    DeviceGuard g(larmor::cuda::backend_device(be));
    launch_walsh(dev(x), d, s.data(), dev(maps), larmor::cuda::backend_stream(be));
}

void walsh_combine(Backend& be, const CArray& x, int kernel, int stride, CArray& y) {
    larmor::cuda::check_on_backend(be, x, "walsh_combine", "x");
    larmor::cuda::check_on_backend(be, y, "walsh_combine", "y");
    if (x.size() == 0) return;
    const WalshDims d = walsh_dims(x, kernel, stride, "walsh_combine");
    CArray s = scratch(be, walsh_combine_scratch_bytes(d));
    DeviceGuard g(larmor::cuda::backend_device(be));
    launch_walsh_combine(dev(x), d, s.data(), dev(y), larmor::cuda::backend_stream(be));
}

}  // namespace larmor::coils::cuda
