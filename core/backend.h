#pragma once
// The numerical primitives every operator and gadget is built from, implemented once per device:
// core/cpu (FFTW + OpenMP threads, the reference) and cuda/ (cuFFT, cuBLAS, kernels; the product).
// A Backend instance belongs to one session: on CUDA it owns that session's stream, plan cache and
// handles, so concurrent sessions overlap on the GPU without sharing mutable state.
#include <memory>
#include <string>
#include <vector>

#include "core/carray.h"

namespace larmor {

enum class FFTDirection { Forward, Inverse };

// A real-valued view of complex data: |z|, Re z, Im z, arg z.
enum class ComplexPart { Magnitude, Real, Imag, Phase };

// Bit i set = transform along axis i.
using AxisMask = unsigned;

class Backend {
public:
    virtual ~Backend() = default;

    virtual Device device() const = 0;
    // Human-readable description (device name, threads) for logs and the status query.
    virtual std::string describe() const = 0;

    // Arrays on this backend's device. empty() leaves contents undefined; zeros() clears them.
    virtual CArray empty(const Shape& shape) = 0;
    virtual CArray zeros(const Shape& shape) = 0;
    // Zeroed host array meant to be filled on the CPU and then uploaded; pinned where that helps.
    virtual CArray host_staging(const Shape& shape) = 0;
    // Copies to this backend's device (returns `a` itself when it already lives there).
    virtual CArray to_device(const CArray& a) = 0;
    // Copies to host memory (returns `a` itself when it already lives there). Synchronises.
    virtual CArray to_host(const CArray& a) = 0;
    // Waits for all queued work of this backend.
    virtual void synchronize() = 0;

    // Writes one real part of every element of x to host memory at out (x.size() floats) and
    // returns when it is there. Magnitude is computed in double before rounding to float (no
    // overflow for any float input); Phase is atan2(Im, Re). On a device the part is computed there,
    // so only the floats cross the bus (half of the complex image).
    virtual void download_part(const CArray& x, ComplexPart part, float* out) = 0;

    // Writes `rows` rows of `row_len` elements from host memory (row i at src + i * src_pitch) into
    // dst at element dst_offset + i * dst_pitch. Returns as soon as `src` may be reused; on a device
    // the copy is ordered before all later work of this backend. The accumulator streams each
    // readout to the GPU as it arrives, so that when the last one comes only the reconstruction is
    // left (the frame latency does not include uploading the whole frame).
    virtual void upload_rows(const cfloat* src, size_t src_pitch, size_t row_len, size_t rows, CArray& dst,
                             size_t dst_offset, size_t dst_pitch) = 0;

    // Writes the lines of a batch into a larger buffer: src viewed as [L, K, C] and dst as [L, E, C]
    // (L = first axis, C = last axis, the axes between flattened), and for each placement k,
    //   dst[:, where[k].line, c] = where[k].keep * dst[:, where[k].line, c] + where[k].scale * src[:, k, c]
    // (keep == 0 overwrites without reading dst). Lines must be distinct. The accumulator uses it to
    // put processed readouts in place, keep = (n-1)/n and scale = 1/n keeping a running mean of lines
    // acquired n times (averages).
    struct LinePlacement {
        size_t line = 0;
        float keep = 0.f;
        float scale = 1.f;
    };
    virtual void place_lines(const CArray& src, const std::vector<LinePlacement>& where, CArray& dst) = 0;

    // place_lines with the coil mixing of mix_last_axis folded in: src viewed as [L, K, D], dst as
    // [L, E, C], m row-major C x D, and for each placement k
    //   dst[:, where[k].line, c] = where[k].keep * dst[:, where[k].line, c]
    //                              + where[k].scale * sum_d m[c * D + d] * src[:, k, d].
    // The accumulator prewhitens each batch of readouts on its way into the buffer: one pass instead
    // of a matrix product into a temporary and a placement.
    virtual void mix_place_lines(const CArray& src, const std::vector<cfloat>& m,
                                 const std::vector<LinePlacement>& where, CArray& dst) = 0;

    // Centred (fftshift . FFT . ifftshift), orthonormal (1/sqrt(N) per axis) FFT over the axes in
    // `axes`, batched over all others. Forward uses exp(-i...), Inverse exp(+i...). The result is
    // left in `x`, which may be rebound to new storage (a GPU backend transforms out of place so the
    // centring shift can be folded into cuFFT's load): other handles to x's old storage keep the input.
    virtual void fft(CArray& x, AxisMask axes, FFTDirection dir) = 0;

    // y[..., c] = sum_d m[c * D + d] * x[..., d], contracting the last axis of x (length D) into the
    // last axis of y (length C): coil prewhitening and coil compression.
    virtual void mix_last_axis(const CArray& x, const std::vector<cfloat>& m, CArray& y) = 0;

    // Copies the centred window of src into dst (same rank): crops where dst is smaller, zero-pads
    // where larger. Index n/2 of each axis (the k-space / image centre) maps onto index m/2.
    virtual void crop_pad_centred(const CArray& src, CArray& dst) = 0;

    // y = sqrt(sum_c |x[..., c]|^2) over the last axis; y has x's shape without its last axis.
    virtual void rss_last_axis(const CArray& x, CArray& y) = 0;

    // Coil sensitivities by the adaptive method of Walsh, Gmitro & Marcellin (MRM 43:682, 2000):
    // the dominant eigenvector of the coil correlation matrix summed over a kernel x kernel
    // neighbourhood in (x, y), unit norm, with the phase of a reference coil (the strongest over the
    // whole array) removed. x is [X, Y, Z..., C], every slice independent; maps has the same shape.
    // The eigenvectors are computed exactly on a grid of spacing `stride` >= 1 in x and y (points
    // min(i * stride, X - 1), so the image corners are grid points) and bilinearly interpolated and
    // renormalised in between; stride 1 computes every pixel.
    virtual void walsh_sensitivities(const CArray& x, int kernel, int stride, CArray& maps) = 0;

    // y = sum_c conj(s_c) x_c / sum_c |s_c|^2 over the last axis (optimal combination with maps).
    virtual void combine_last_axis(const CArray& x, const CArray& maps, CArray& y) = 0;

    // combine_last_axis(x, walsh_sensitivities(x, kernel, stride), y), without keeping the maps: a
    // GPU interpolates them from the grid while it combines, so the full-size maps are never written
    // and read back (2 x 17 MB for 256^2 x 32 coils).
    virtual void walsh_combine(const CArray& x, int kernel, int stride, CArray& y) = 0;
};

// CPU backend with `threads` worker threads (0 = all cores).
std::shared_ptr<Backend> make_cpu_backend(int threads = 0);

// True when this build has CUDA and at least one device is usable.
bool cuda_available();
// Number of CUDA devices and a one-line description of each (empty without CUDA).
std::vector<std::string> cuda_devices();
// CUDA backend on device `device` with its own stream. Throws with a clear message when this build
// has no CUDA or the device is absent.
std::shared_ptr<Backend> make_cuda_backend(int device = 0);

}  // namespace larmor
