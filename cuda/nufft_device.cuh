#pragma once
// Device helpers of the CUDA NUFFT kernels: the "exponential of semicircle" kernel of Barnett,
// Magland & af Klinteberg (SIAM J. Sci. Comput. 41:C479, 2019, eq. 1.8), periodic wrapping, and the
// dispatch of a run-time (dims, width) to kernels compiled for each pair, so that every per-axis loop
// is unrolled and the kernel values live in registers.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <type_traits>

namespace larmor::cuda {

// The j-th kernel value of a point at coordinate u (grid units) along one axis, for the grid point
// i0 + j with i0 = ceil(u - W/2) (returned): 0 unless |g - u| < W/2 and j < W.
// phi(z) = exp(beta (sqrt(1 - z^2) - 1)) with z = 2 (g - u) / W, and 0 at |z| >= 1 (a point exactly
// W/2 away is outside the support, as the contract says). expf/sqrtf (not the fast intrinsics): the
// values cost W per axis and point while the additions they feed cost W^dims, and full precision keeps
// the float kernel error (~1e-7 relative) far below the 1e-5 the NUFFT needs. Kernels whose lanes share
// a point's values compute one each and shuffle them.
template <int W>
__device__ __forceinline__ int es_kernel_value(float u, float beta, int j, float& k) {
    const float first = ceilf(u - 0.5f * W);
    const float x0 = first - u;  // in [-W/2, -W/2 + 1): exact, the two are within a factor of two
    constexpr float scale = 2.f / W;
    const float z = (x0 + static_cast<float>(j)) * scale;
    const float s = 1.f - z * z;
    k = (j < W && s > 0.f) ? expf(beta * (sqrtf(s) - 1.f)) : 0.f;
    return static_cast<int>(first);
}

// All W values of the point, for the grid points i0 .. i0 + W - 1 (i0 returned).
template <int W>
__device__ __forceinline__ int es_kernel_values(float u, float beta, float (&k)[W]) {
    int first = 0;
#pragma unroll
    for (int j = 0; j < W; ++j) first = es_kernel_value<W>(u, beta, j, k[j]);
    return first;
}

// g modulo n in [0, n) for any int g (grids narrower than the kernel wrap more than once).
__device__ __forceinline__ int wrap_index(int g, int n) {
    g %= n;
    return g < 0 ? g + n : g;
}

// Calls f(std::integral_constant<int, D>, std::integral_constant<int, W>) for the run-time dims in
// 1..3 and width in 2..16 (the contract's range), so the callee instantiates kernel<D, W>.
template <int D, class F>
void dispatch_width(int width, F&& f) {
    using std::integral_constant;
    switch (width) {
        case 2: f(integral_constant<int, D>{}, integral_constant<int, 2>{}); return;
        case 3: f(integral_constant<int, D>{}, integral_constant<int, 3>{}); return;
        case 4: f(integral_constant<int, D>{}, integral_constant<int, 4>{}); return;
        case 5: f(integral_constant<int, D>{}, integral_constant<int, 5>{}); return;
        case 6: f(integral_constant<int, D>{}, integral_constant<int, 6>{}); return;
        case 7: f(integral_constant<int, D>{}, integral_constant<int, 7>{}); return;
        case 8: f(integral_constant<int, D>{}, integral_constant<int, 8>{}); return;
        case 9: f(integral_constant<int, D>{}, integral_constant<int, 9>{}); return;
        case 10: f(integral_constant<int, D>{}, integral_constant<int, 10>{}); return;
        case 11: f(integral_constant<int, D>{}, integral_constant<int, 11>{}); return;
        case 12: f(integral_constant<int, D>{}, integral_constant<int, 12>{}); return;
        case 13: f(integral_constant<int, D>{}, integral_constant<int, 13>{}); return;
        case 14: f(integral_constant<int, D>{}, integral_constant<int, 14>{}); return;
        case 15: f(integral_constant<int, D>{}, integral_constant<int, 15>{}); return;
        case 16: f(integral_constant<int, D>{}, integral_constant<int, 16>{}); return;
        default: throw std::invalid_argument("NUFFT: kernel width " + std::to_string(width) + " is outside 2..16");
    }
}

template <class F>
void dispatch_dims_width(int dims, int width, F&& f) {
    switch (dims) {
        case 1: dispatch_width<1>(width, f); return;
        case 2: dispatch_width<2>(width, f); return;
        case 3: dispatch_width<3>(width, f); return;
        default: throw std::invalid_argument("NUFFT: dims " + std::to_string(dims) + " is outside 1..3");
    }
}

}  // namespace larmor::cuda
