#pragma once
// The numerical primitives every operator and gadget is built from, implemented once per device:
// core/cpu (FFTW + OpenMP threads, the reference) and cuda/ (cuFFT, kernels; the product). Only what
// is generic lives here: memory, transfers, the FFT, crop/pad, BLAS-1 and pointwise arithmetic.
// Operators and gadgets that need more (finite differences, NUFFT, Walsh maps, line placement) bring
// their own CPU and CUDA kernels (core/linops/*_kernels.h, core/coils/coil_kernels.h, gadgets/kernels/)
// and reach the session's stream through cuda/cuda_backend.h, so the Backend does not grow with them.
// A Backend instance belongs to one session: on CUDA it owns that session's stream, plan cache and
// handles, so concurrent sessions overlap on the GPU without sharing mutable state. It also carries the
// session's memory budgets (core/memory_budget.h): every array it allocates is charged to them first.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/array.h"
#include "core/memory_budget.h"
#include "core/plan_registry.h"
#include "core/recording.h"

namespace larmor {

enum class FFTDirection { Forward, Inverse };

// A real-valued view of complex data: |z|, Re z, Im z, arg z.
enum class ComplexPart { Magnitude, Real, Imag, Phase };

// Bit i set = transform along axis i.
using AxisMask = unsigned;

// Coefficient of scale / axpy / xpay: value * num[0] / den[0], where num and den, when given, are
// one-element arrays on the backend's device holding results of dot() or norm2(). A solver can then
// chain dot -> axpy on a GPU without reading a scalar back (no host-device round trip per step).
// For real arrays only the real part of the coefficient is used.
struct Coef {
    cfloat value{1.f, 0.f};
    CArray num;  // empty: 1
    CArray den;  // empty: 1

    Coef(cfloat v = cfloat(1.f, 0.f)) : value(v) {}  // NOLINT: a plain number is a coefficient
    Coef(float v) : value(v, 0.f) {}                  // NOLINT
    static Coef ratio(cfloat v, CArray num, CArray den) {
        Coef c(v);
        c.num = std::move(num);
        c.den = std::move(den);
        return c;
    }
};

// Broadcasting rule of the pointwise primitives: the second operand b either has the shape of a, or
// the shape of a's leading axes, and is then repeated over a's remaining (trailing) axes. So a coil
// map [X, Y, C] times an image [X, Y] expands the image to every coil, and a sampling mask [X, Y]
// applies to every coil of k-space [X, Y, C]. reduce_conj_mul is the adjoint: it sums over the
// trailing axes that out does not have.
class Backend {
public:
    virtual ~Backend() = default;

    // The budgets this backend's allocations are charged to: host memory (pageable and page-locked)
    // and device memory (the CUDA block cache included). Null members: not bounded.
    const MemoryBudgets& budgets() const { return budgets_; }
    // Zeroed pageable host arrays charged to the host budget, for the masks, weights and maps that
    // gadgets fill on the CPU.
    CArray host_complex(const Shape& shape) const { return CArray::host(shape, budgets_.host); }
    RArray host_real(const Shape& shape) const { return RArray::host(shape, budgets_.host); }

    virtual Device device() const = 0;
    // The CUDA device's ordinal; -1 for the CPU.
    virtual int device_index() const { return -1; }
    // Frees the device blocks this backend keeps for reuse (and no longer charges them); thread-safe.
    virtual void release_cached_memory() noexcept {}
    // Human-readable description (device name, threads) for logs and the status query.
    virtual std::string describe() const = 0;

    // ---- Memory. empty() leaves contents undefined; zeros() clears them.
    virtual CArray empty(const Shape& shape) = 0;
    virtual CArray zeros(const Shape& shape) = 0;
    virtual RArray empty_real(const Shape& shape) = 0;
    virtual RArray zeros_real(const Shape& shape) = 0;
    // Zeroed host array meant to be filled on the CPU and then uploaded; pinned where that helps.
    virtual CArray host_staging(const Shape& shape) = 0;

    // ---- Transfers. to_device copies to this backend's device (returns `a` itself when it already
    // lives there); to_host copies to host memory (returns `a` itself when on the host) and waits.
    virtual CArray to_device(const CArray& a) = 0;
    virtual RArray to_device(const RArray& a) = 0;
    virtual CArray to_host(const CArray& a) = 0;
    virtual RArray to_host(const RArray& a) = 0;
    // dst = src, equal sizes (shapes may differ), each on the host or on this backend's device; no
    // overlap unless the same view (then nothing happens). Ordered with the backend's other work.
    virtual void copy(const CArray& src, CArray& dst) = 0;
    virtual void copy(const RArray& src, RArray& dst) = 0;
    // Waits for all queued work of this backend.
    virtual void synchronize() = 0;

    // A copy of a small array (solver scalars) on its way to the host. read_async() queues it after
    // the work queued so far and returns at once; wait() returns the values once they are there,
    // waiting for that work only (not for anything queued later), so a solver can check the
    // residual of the previous iteration while the device already runs the next.
    class PendingRead {
    public:
        virtual ~PendingRead() = default;
        virtual bool ready() = 0;
        virtual const std::vector<cfloat>& wait() = 0;
    };
    virtual std::unique_ptr<PendingRead> read_async(const CArray& a) = 0;

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

    // Copies `rows` rows of `row_len` elements: src row i starts at src_offset + i * src_pitch, dst row i
    // at dst_offset + i * dst_pitch. Each array is on the host or, for a CUDA backend, on any CUDA
    // device (another device's array is reached through unified addressing: a peer copy). Ordered
    // after this backend's queued work; work another backend queued on src or dst must have finished
    // (its synchronize()). A volume split along its fastest axis (core/recon/l1_spirit_slabs.h) moves
    // its slabs this way, device to device, without a pass through the host.
    virtual void copy_rows(const CArray& src, size_t src_offset, size_t src_pitch, CArray& dst, size_t dst_offset,
                           size_t dst_pitch, size_t row_len, size_t rows) = 0;

    // ---- FFT and resampling.
    // y = centred (fftshift . FFT . ifftshift), orthonormal (1/sqrt(N) per axis) FFT of x over the
    // axes in `axes`, batched over all others. Forward uses exp(-i...), Inverse exp(+i...). y has x's
    // shape and is the caller's (never rebound). y may be x itself (in place; on CUDA that costs one
    // extra copy, as the centring is folded into cuFFT's loads, which must not see their own output);
    // any other overlap is refused.
    virtual void fft(const CArray& x, CArray& y, AxisMask axes, FFTDirection dir) = 0;

    // Copies the centred window of src into dst (same rank): crops where dst is smaller, zero-pads
    // where larger. Index n/2 of each axis (the k-space / image centre) maps onto index m/2. No
    // overlap (a same-shape same view is a no-op).
    virtual void crop_pad_centred(const CArray& src, CArray& dst) = 0;

    // ---- BLAS-1 and pointwise primitives (complex and real). Unless said otherwise the output may
    // be the same view as an input (in place), never a partial overlap; shapes must match (or follow
    // the broadcasting rule above where it says so).
    virtual void fill(CArray& x, cfloat v) = 0;
    virtual void fill(RArray& x, float v) = 0;
    // y = a x
    virtual void scale(const Coef& a, const CArray& x, CArray& y) = 0;
    virtual void scale(const Coef& a, const RArray& x, RArray& y) = 0;
    // y += a x
    virtual void axpy(const Coef& a, const CArray& x, CArray& y) = 0;
    virtual void axpy(const Coef& a, const RArray& x, RArray& y) = 0;
    // y = x + a y
    virtual void xpay(const Coef& a, const CArray& x, CArray& y) = 0;
    virtual void xpay(const Coef& a, const RArray& x, RArray& y) = 0;
    // out[0] = <x, y> = sum conj(x) y (accumulated in double); out is a one-element array on this
    // backend's device, e.g. a view into a solver's scalar block. Real arrays give a real result.
    virtual void dot(const CArray& x, const CArray& y, CArray& out) = 0;
    virtual void dot(const RArray& x, const RArray& y, CArray& out) = 0;
    // out[0] = ||x||^2 (real part; imaginary part 0).
    virtual void norm2(const CArray& x, CArray& out) = 0;
    virtual void norm2(const RArray& x, CArray& out) = 0;
    // An iteration's change in one pass: out[0] = ||x - previous||^2, out[1] = ||x||^2 (real parts,
    // accumulated in double), then previous = x. out is a two-element array on this backend's device;
    // x and previous of one shape, apart from each other and from out.
    virtual void change_norms(const CArray& x, CArray& previous, CArray& out) = 0;
    // The two halves of a conjugate-gradient iteration in the form of Chronopoulos & Gear (1989, J.
    // Comput. Appl. Math. 25:153, Algorithm 2), where both inner products are taken in one pass over
    // the residual r and w = N r, so an iteration is the operator, one reduction and one update.
    // scalars is a four-element array on this backend's device, {gamma, alpha, beta, delta} in its real
    // parts, all zero before the first iteration.
    // cg_coefficients: gamma = ||r||^2 and delta = Re <r, w> (accumulated in double), then
    // beta = gamma / gamma_previous and alpha = gamma / (delta - beta gamma / alpha_previous) from the
    // gamma and alpha already in scalars, evaluated in double (a zero denominator gives 0, so the zero
    // start gives beta = 0 and alpha = gamma / delta, a steepest-descent step). r and w of one shape,
    // scalars apart from both.
    virtual void cg_coefficients(const CArray& r, const CArray& w, CArray& scalars) = 0;
    // With alpha and beta from scalars: p = r + beta p, s = w + beta s, x += alpha p, r -= alpha s, in
    // one pass (s follows N p without applying N). All of one shape; p, s, x and r apart from each
    // other and from w and scalars.
    virtual void cg_update(const CArray& w, const CArray& scalars, CArray& p, CArray& s, CArray& x, CArray& r) = 0;
    // out = a * b, or a * conj(b) with conj_b; b broadcast over a's trailing axes; out has a's shape
    // and may be the same view as a (not as a broadcast b).
    virtual void mul(const CArray& a, const CArray& b, CArray& out, bool conj_b = false) = 0;
    virtual void mul(const CArray& a, const RArray& b, CArray& out) = 0;
    virtual void mul(const RArray& a, const RArray& b, RArray& out) = 0;
    // out = a / b where b != 0, else 0; b broadcast as in mul (density weights, normalisations).
    virtual void div(const CArray& a, const RArray& b, CArray& out) = 0;
    virtual void div(const RArray& a, const RArray& b, RArray& out) = 0;
    // out[i] = sum_k conj(a[i + k n]) b[i + k n], n = out.size(): a and b of one shape, out of the
    // shape of their leading axes; the adjoint of the broadcast in mul (coil combination). out must
    // not overlap a or b.
    virtual void reduce_conj_mul(const CArray& a, const CArray& b, CArray& out) = 0;
    // Soft thresholding (the proximal map of lambda ||.||_1), jointly over groups: x is seen as
    // [n, K] with n = x.size() / joint and K = joint (the trailing axes, e.g. coils), and each row
    // x_i = (x[i], x[i + n], ...) shrinks by its l2 norm: out_i = x_i max(1 - lambda / ||x_i||, 0).
    // joint = 1 is the elementwise complex soft threshold.
    virtual void soft_threshold(float lambda, const CArray& x, CArray& out, size_t joint = 1) = 0;
    // x = (1 - m) x + m y where m != 0, m broadcast over x's trailing axes as in mul; x and y of one
    // shape. Entries where m = 0 are neither read nor written, so a k-space data-consistency projection
    // (m the sampling mask, y the measured samples) moves only the sampled fraction of the array and m
    // itself. m = 1 gives y exactly. x must not overlap y or m.
    virtual void blend(const RArray& m, const CArray& y, CArray& x) = 0;

    // A sequence of queued work to be run many times (core/recording.h): record() does not run
    // `body`; each replay() has the effect of calling it once. The body must queue the same work on
    // the same arrays every time (what it reads from host state is fixed when recorded), allocate
    // nothing and wait for nothing: on CUDA it becomes a graph of the kernels and copies it queues;
    // a body that cannot be captured (it allocates, waits or reads back) is called on every replay.
    // The arrays the body uses must outlive the recording.
    virtual std::unique_ptr<Recording> record(std::function<void()> body);

protected:
    explicit Backend(MemoryBudgets budgets) : budgets_(std::move(budgets)) {}

private:
    const MemoryBudgets budgets_;
};

// CPU backend with `threads` worker threads (0 = all cores); its arrays are charged to budgets.host.
std::shared_ptr<Backend> make_cpu_backend(int threads = 0, MemoryBudgets budgets = {});

// True when this build has CUDA and at least one device is usable.
bool cuda_available();
// Number of CUDA devices and a one-line description of each (empty without CUDA).
std::vector<std::string> cuda_devices();
// Global memory of CUDA device `device` in bytes (0 without CUDA or without that device).
uint64_t cuda_device_memory(int device);
// Free global memory of CUDA device `device` now, as the driver reports it (0 without CUDA or that device).
uint64_t cuda_device_free_memory(int device);
// Compute capability of CUDA device `device` as "major.minor" ("" without CUDA or that device).
std::string cuda_device_capability(int device);
// The CUDA driver's and runtime's versions as cudaDriverGetVersion / cudaRuntimeGetVersion give them
// (13000 for 13.0); 0 when unknown (no CUDA in this build, or no driver).
int cuda_driver_version();
int cuda_runtime_version();
// CUDA backend on device `device` with its own stream; device arrays (and the blocks its cache keeps)
// are charged to budgets.device, page-locked host memory to budgets.host. Throws with a clear
// message when this build has no CUDA or the device is absent.
std::shared_ptr<Backend> make_cuda_backend(int device = 0, MemoryBudgets budgets = {});
// The CUDA backend keeps page-locked host blocks between sessions (cuda/pinned_pool.h); while idle they
// are charged to `host` (the server's host budget), and release_idle_cuda_host_memory frees them, the
// oldest first, until `bytes` are freed (returns what it freed). No-ops without CUDA.
void set_cuda_host_cache_budget(std::shared_ptr<MemoryBudget> host);
uint64_t release_idle_cuda_host_memory(uint64_t bytes);
// Bytes of those blocks idle now.
uint64_t idle_cuda_host_memory();
// The process's cuFFT plans (cuda/fft_plans.h), all devices; zeros without CUDA.
PlanRegistryStats cuda_fft_plan_stats();

}  // namespace larmor
