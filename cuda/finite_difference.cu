// CUDA kernels of the finite-difference operator (core/linops/finite_difference.h): one thread per
// image element, reading its neighbours along each axis; x-neighbours are coalesced, the others are
// whole rows apart and still read contiguous rows.
#include <string>

#include "core/linops/finite_difference_kernels.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/device_context.h"
#include "cuda/launch_size.h"

namespace larmor::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxAxes = 8;

struct Axes {
    int count = 0;
    long long n[kMaxAxes] = {};
    long long stride[kMaxAxes] = {};
};

Axes axes_of(const DiffGeometry& g) {
    Axes a;
    a.count = static_cast<int>(g.axes.size());
    for (int k = 0; k < a.count; ++k) {
        a.n[k] = static_cast<long long>(g.shape[g.axes[static_cast<size_t>(k)]]);
        a.stride[k] = static_cast<long long>(g.shape.stride(g.axes[static_cast<size_t>(k)]));
    }
    return a;
}

__device__ __forceinline__ long long neighbour(long long i, long long n, long long s, int step) {
    const long long c = (i / s) % n;
    if (step > 0) return c + 1 == n ? i - c * s : i + s;
    return c == 0 ? i + (n - 1) * s : i - s;
}

__global__ void forward_kernel(const float2* __restrict__ x, float2* __restrict__ y, long long n, Axes a) {
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        const float2 v = x[i];
        for (int k = 0; k < a.count; ++k) {
            const float2 w = x[neighbour(i, a.n[k], a.stride[k], +1)];
            y[k * n + i] = make_float2(w.x - v.x, w.y - v.y);
        }
    }
}

__global__ void adjoint_kernel(const float2* __restrict__ y, float2* __restrict__ x, long long n, Axes a) {
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        float2 acc = make_float2(0.f, 0.f);
        for (int k = 0; k < a.count; ++k) {
            const float2 p = y[k * n + neighbour(i, a.n[k], a.stride[k], -1)], q = y[k * n + i];
            acc.x += p.x - q.x;
            acc.y += p.y - q.y;
        }
        x[i] = acc;
    }
}

template <class Kernel>
void launch(Backend& be, Kernel kernel, const CArray& in, CArray& out, const DiffGeometry& g, const char* name) {
    if (g.axes.size() > static_cast<size_t>(kMaxAxes))
        throw std::invalid_argument(std::string(name) + ": at most " + std::to_string(kMaxAxes) + " axes");
    const long long n = static_cast<long long>(g.shape.size());
    if (n == 0) return;
    DeviceGuard guard(backend_device(be));
    kernel<<<grid_stride_blocks(n, kThreads), kThreads, 0, backend_stream(be)>>>(
        reinterpret_cast<const float2*>(in.data()), reinterpret_cast<float2*>(out.data()), n, axes_of(g));
    LARMOR_CUDA_LAUNCH_CHECK(name, g.shape.str());
}

}  // namespace

void finite_difference_forward(Backend& be, const CArray& x, CArray& y, const DiffGeometry& g) {
    launch(be, forward_kernel, x, y, g, "finite_difference forward_kernel");
}

void finite_difference_adjoint(Backend& be, const CArray& y, CArray& x, const DiffGeometry& g) {
    launch(be, adjoint_kernel, y, x, g, "finite_difference adjoint_kernel");
}

}  // namespace larmor::cuda
