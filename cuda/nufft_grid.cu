// The CUDA NUFFT's steps around the convolution (core/linops/nufft_kernels.h): deapodise-and-pad in
// one pass that writes the whole oversampled grid, its adjoint crop in one gathering pass, and a
// plain in-place cuFFT plan over the grid. This is the layout cuFINUFFT uses (Shih et al., IPDPSW
// 2021): with the backend's centred FFT the forward took four passes over the grid (scale, pad, an
// out-of-place centred FFT with a load callback, the copy back of the in-place result); now it takes
// one plus the bare FFT's own.
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/cuda_libraries.h"
#include "core/linops/nufft_kernels.h"
#include "cuda/device_context.h"

namespace larmor::cuda {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxGridY = 65535;

struct PadArgs {
    int N0, N1, N2;  // image per axis (1 for unused axes)
    int n0, n1, n2;  // grid per axis
    int batch;
    long long image_size, grid_size;
    const float* weight;
};

// The pixel offset a grid point g holds along an axis, as the pixel index (offset + N/2), or -1 for
// the zero padding: offsets 0 .. N - N/2 - 1 sit at g = offset, negative ones at g = n + offset.
__device__ __forceinline__ int pixel_of_grid(int g, int N, int n) {
    if (g < N - N / 2) return g + N / 2;
    if (g >= n - N / 2) return g - n + N / 2;
    return -1;
}

__device__ __forceinline__ int grid_of_pixel(int i, int N, int n) {
    const int j = i - N / 2;
    return j < 0 ? j + n : j;
}

// Thread (g0, row) writes grid point (g0, g1, g2) of every transform: the pixel mapping is worked out
// once and the batch loop issues independent loads and stores.
__global__ void __launch_bounds__(kThreads) pad_kernel(PadArgs a, const float2* __restrict__ x, float2* __restrict__ grid) {
    const int g0 = blockIdx.x * blockDim.x + threadIdx.x;
    if (g0 >= a.n0) return;
    const int i0 = pixel_of_grid(g0, a.N0, a.n0);
    for (long long row = blockIdx.y; row < static_cast<long long>(a.n1) * a.n2; row += gridDim.y) {
        const int g1 = static_cast<int>(row % a.n1), g2 = static_cast<int>(row / a.n1);
        const int i1 = pixel_of_grid(g1, a.N1, a.n1), i2 = pixel_of_grid(g2, a.N2, a.n2);
        const long long out = g0 + a.n0 * row;
        if (i0 < 0 || i1 < 0 || i2 < 0) {
            for (int b = 0; b < a.batch; ++b) grid[out + b * a.grid_size] = make_float2(0.f, 0.f);
            continue;
        }
        const long long in = i0 + static_cast<long long>(a.N0) * (i1 + static_cast<long long>(a.N1) * i2);
        const float w = __ldg(a.weight + in);
        for (int b = 0; b < a.batch; ++b) {
            const float2 v = __ldg(x + in + b * a.image_size);
            grid[out + b * a.grid_size] = make_float2(v.x * w, v.y * w);
        }
    }
}

__global__ void __launch_bounds__(kThreads) crop_kernel(PadArgs a, const float2* __restrict__ grid, float2* __restrict__ x) {
    const int i0 = blockIdx.x * blockDim.x + threadIdx.x;
    if (i0 >= a.N0) return;
    const int g0 = grid_of_pixel(i0, a.N0, a.n0);
    for (long long row = blockIdx.y; row < static_cast<long long>(a.N1) * a.N2; row += gridDim.y) {
        const int i1 = static_cast<int>(row % a.N1), i2 = static_cast<int>(row / a.N1);
        const long long in = g0 + a.n0 * (grid_of_pixel(i1, a.N1, a.n1) +
                                          static_cast<long long>(a.n1) * grid_of_pixel(i2, a.N2, a.n2));
        const long long out = i0 + a.N0 * row;
        const float w = __ldg(a.weight + out);
        for (int b = 0; b < a.batch; ++b) {
            const float2 v = __ldg(grid + in + b * a.grid_size);
            x[out + b * a.image_size] = make_float2(v.x * w, v.y * w);
        }
    }
}

PadArgs check(const NufftGrid& g, const Shape& image, const RArray& weight, const CArray& x, const CArray& grid,
              const char* who) {
    check_nufft_pad_arguments(g, image, weight, x, grid, Device::Cuda, who);
    PadArgs a{1, 1, 1, 1, 1, 1, static_cast<int>(g.batch), 0, g.grid_size(), weight.data()};
    int* N[3] = {&a.N0, &a.N1, &a.N2};
    int* n[3] = {&a.n0, &a.n1, &a.n2};
    for (int d = 0; d < g.dims; ++d) {
        *N[d] = static_cast<int>(image[d]);
        *n[d] = static_cast<int>(g.n[d]);
    }
    a.image_size = static_cast<long long>(a.N0) * a.N1 * a.N2;
    return a;
}

// RAII cuFFT handle, planned for the grid and bound to the backend's stream at each execution.
class CufftGridFft final : public NufftGridFft {
public:
    CufftGridFft(Backend& be, const NufftGrid& g) : be_(be), size_(g.grid_size() * g.batch) {
        DeviceGuard guard(backend_device(be));
        LARMOR_CUFFT_CHECK(cufft_library().create(&h_), "NUFFT grid FFT");
        // cuFFT is row-major: the slowest axis first.
        std::vector<long long> n;
        for (int d = g.dims - 1; d >= 0; --d) n.push_back(g.n[d]);
        std::string ctx = "NUFFT grid FFT of";
        for (int d = 0; d < g.dims; ++d) ctx += (d ? "x" : " ") + std::to_string(g.n[d]);
        ctx += ", batch " + std::to_string(g.batch);
        size_t work = 0;
        cufftResult r;
        if (size_ <= 0x7fffffffLL) {
            std::vector<int> ni(n.begin(), n.end());
            r = cufft_library().make_plan_many(h_, g.dims, ni.data(), nullptr, 1, static_cast<int>(g.grid_size()), nullptr, 1,
                                               static_cast<int>(g.grid_size()), CUFFT_C2C, static_cast<int>(g.batch), &work);
        } else {
            r = cufft_library().make_plan_many64(h_, g.dims, n.data(), nullptr, 1, g.grid_size(), nullptr, 1, g.grid_size(),
                                                 CUFFT_C2C, g.batch, &work);
        }
        if (r != CUFFT_SUCCESS) {
            cufft_library().destroy(h_);
            if (r == CUFFT_ALLOC_FAILED)
                throw std::runtime_error("cufftMakePlanMany: out of GPU memory for the work area of the " + ctx);
            throw_cufft("cufftMakePlanMany", r, ctx);
        }
        ctx_ = std::move(ctx);
    }
    ~CufftGridFft() override { cufft_library().destroy(h_); }
    CufftGridFft(const CufftGridFft&) = delete;
    CufftGridFft& operator=(const CufftGridFft&) = delete;

    void from_image(CArray& grid, FFTDirection dir) override { execute(grid, dir); }
    void to_image(CArray& grid, FFTDirection dir) override { execute(grid, dir); }

private:
    void execute(CArray& grid, FFTDirection dir) {
        if (static_cast<long long>(grid.size()) != size_ || grid.device() != Device::Cuda)
            throw std::invalid_argument("cuda::nufft_grid_fft: grid " + grid.shape().str() + " on " +
                                        device_name(grid.device()) + ", the plan is for " + ctx_);
        DeviceGuard guard(backend_device(be_));
        LARMOR_CUFFT_CHECK(cufft_library().set_stream(h_, backend_stream(be_)), ctx_);
        auto* p = reinterpret_cast<cufftComplex*>(grid.data());
        LARMOR_CUFFT_CHECK(cufft_library().exec_c2c(h_, p, p, dir == FFTDirection::Forward ? CUFFT_FORWARD : CUFFT_INVERSE),
                           ctx_);
    }

    Backend& be_;
    long long size_;
    cufftHandle h_ = 0;
    std::string ctx_;
};

// One cuFFT handle, planned without a work area of its own (the owner gives it one).
class CufftHandle {
public:
    CufftHandle(int rank, int* n, int* embed, int stride, int dist, int batch, const std::string& ctx) {
        LARMOR_CUFFT_CHECK(cufft_library().create(&h_), ctx);
        cufftResult r = cufft_library().set_auto_allocation(h_, 0);
        if (r == CUFFT_SUCCESS)
            r = cufft_library().make_plan_many(h_, rank, n, embed, stride, dist, embed, stride, dist, CUFFT_C2C, batch, &work_);
        if (r != CUFFT_SUCCESS) {
            cufft_library().destroy(h_);
            throw_cufft("cufftMakePlanMany", r, ctx);
        }
    }
    ~CufftHandle() { cufft_library().destroy(h_); }
    CufftHandle(const CufftHandle&) = delete;
    CufftHandle& operator=(const CufftHandle&) = delete;

    size_t work() const { return work_; }
    cufftHandle get() const { return h_; }

private:
    cufftHandle h_ = 0;
    size_t work_ = 0;
};

// The 3D grid's DFT as the NUFFT uses it, pruned along z. The image's footprint along z is two runs of
// planes ([0, h1) and [n2 - h2, n2), pad's layout); outside them a padded grid is zero and crop reads
// nothing. So the forward's 2D (x, y) transforms run on the footprint's planes only, before the 1D
// transforms along z; the adjoint's run after the z transforms, again on those planes only. With the
// default oversampling of 2 that halves the 2D part: about 2 read-and-write passes over the grid
// instead of the 3 of a full 3D transform (bench/FLOORS-nufft.md, "Session 24"). The z transforms
// are strided (stride n0 n1, one per column); plans go per transform of the batch, each grid a
// separate call (24 calls for 8 coils).
// All plans share one work area, allocated through (and charged to) the backend.
class CufftPrunedGridFft final : public NufftGridFft {
public:
    CufftPrunedGridFft(Backend& be, const NufftGrid& g, long long image_z) : be_(be), g_(g) {
        DeviceGuard guard(backend_device(be));
        h1_ = static_cast<int>(image_z - image_z / 2);
        h2_ = static_cast<int>(image_z / 2);
        ctx_ = "NUFFT grid FFT of " + std::to_string(g.n[0]) + "x" + std::to_string(g.n[1]) + "x" + std::to_string(g.n[2]) +
               ", batch " + std::to_string(g.batch) + ", pruned to " + std::to_string(image_z) + " planes";
        const int plane = static_cast<int>(g.n[0] * g.n[1]);
        int nxy[2] = {static_cast<int>(g.n[1]), static_cast<int>(g.n[0])}, nz[1] = {static_cast<int>(g.n[2])};
        columns_ = std::make_unique<CufftHandle>(1, nz, nz, plane, 1, plane, ctx_);
        planes1_ = std::make_unique<CufftHandle>(2, nxy, nullptr, 1, plane, h1_, ctx_);
        if (h2_ > 0 && h2_ != h1_) planes2_ = std::make_unique<CufftHandle>(2, nxy, nullptr, 1, plane, h2_, ctx_);
        size_t work = std::max(columns_->work(), planes1_->work());
        if (planes2_) work = std::max(work, planes2_->work());
        if (work > 0) {
            work_ = be.empty_real(Shape{(work + sizeof(float) - 1) / sizeof(float)});
            for (CufftHandle* h : {columns_.get(), planes1_.get(), planes2_.get()})
                if (h) LARMOR_CUFFT_CHECK(cufft_library().set_work_area(h->get(), work_.data()), ctx_);
        }
    }

    void from_image(CArray& grid, FFTDirection dir) override {
        DeviceGuard guard(backend_device(be_));  // once for the 3 calls per transform of the batch
        cufftComplex* p = check(grid);
        for (long long b = 0; b < g_.batch; ++b) {
            cufftComplex* one = p + b * g_.grid_size();
            footprint_planes(one, dir);
            exec(*columns_, one, dir);
        }
    }

    void to_image(CArray& grid, FFTDirection dir) override {
        DeviceGuard guard(backend_device(be_));  // once for the 3 calls per transform of the batch
        cufftComplex* p = check(grid);
        for (long long b = 0; b < g_.batch; ++b) {
            cufftComplex* one = p + b * g_.grid_size();
            exec(*columns_, one, dir);
            footprint_planes(one, dir);
        }
    }

private:
    cufftComplex* check(CArray& grid) {
        if (static_cast<long long>(grid.size()) != g_.grid_size() * g_.batch || grid.device() != Device::Cuda)
            throw std::invalid_argument("cuda::nufft_grid_fft: grid " + grid.shape().str() + " on " +
                                        device_name(grid.device()) + ", the plan is for " + ctx_);
        const cudaStream_t stream = backend_stream(be_);
        for (CufftHandle* h : {columns_.get(), planes1_.get(), planes2_.get()})
            if (h) LARMOR_CUFFT_CHECK(cufft_library().set_stream(h->get(), stream), ctx_);
        return reinterpret_cast<cufftComplex*>(grid.data());
    }
    void footprint_planes(cufftComplex* one, FFTDirection dir) {
        exec(*planes1_, one, dir);
        if (h2_ > 0) exec(planes2_ ? *planes2_ : *planes1_, one + (g_.n[2] - h2_) * g_.n[0] * g_.n[1], dir);
    }
    // Under the caller's DeviceGuard.
    void exec(const CufftHandle& h, cufftComplex* p, FFTDirection dir) {
        LARMOR_CUFFT_CHECK(cufft_library().exec_c2c(h.get(), p, p, dir == FFTDirection::Forward ? CUFFT_FORWARD : CUFFT_INVERSE),
                           ctx_);
    }

    Backend& be_;
    NufftGrid g_;
    int h1_ = 0, h2_ = 0;
    std::string ctx_;
    std::unique_ptr<CufftHandle> columns_, planes1_, planes2_;
    RArray work_;
};

dim3 blocks_for(int x, long long rows) {
    return dim3(static_cast<unsigned>((x + kThreads - 1) / kThreads),
                static_cast<unsigned>(std::min<long long>(rows, kMaxGridY)));
}

}  // namespace

void nufft_pad(Backend& be, const NufftGrid& g, const Shape& image, const RArray& weight, const CArray& x,
               CArray& grid) {
    const PadArgs a = check(g, image, weight, x, grid, "cuda::nufft_pad");
    DeviceGuard guard(backend_device(be));
    pad_kernel<<<blocks_for(a.n0, static_cast<long long>(a.n1) * a.n2), kThreads, 0, backend_stream(be)>>>(
        a, reinterpret_cast<const float2*>(x.data()), reinterpret_cast<float2*>(grid.data()));
    LARMOR_CUDA_LAUNCH_CHECK("nufft pad_kernel", "image " + image.str() + ", grid " + grid.shape().str());
}

void nufft_crop(Backend& be, const NufftGrid& g, const Shape& image, const RArray& weight, const CArray& grid,
                CArray& x) {
    const PadArgs a = check(g, image, weight, x, grid, "cuda::nufft_crop");
    DeviceGuard guard(backend_device(be));
    crop_kernel<<<blocks_for(a.N0, static_cast<long long>(a.N1) * a.N2), kThreads, 0, backend_stream(be)>>>(
        a, reinterpret_cast<const float2*>(grid.data()), reinterpret_cast<float2*>(x.data()));
    LARMOR_CUDA_LAUNCH_CHECK("nufft crop_kernel", "image " + image.str() + ", grid " + grid.shape().str());
}

std::unique_ptr<NufftGridFft> nufft_grid_fft(Backend& be, const NufftGrid& g, const Shape& image) {
    // Pruning pays where the footprint leaves planes out, and each grid fits cuFFT's 32-bit plans.
    if (g.dims == 3 && image.rank() == 3 && static_cast<long long>(image[2]) < g.n[2] && g.grid_size() <= 0x7fffffffLL)
        return std::make_unique<CufftPrunedGridFft>(be, g, static_cast<long long>(image[2]));
    return std::make_unique<CufftGridFft>(be, g);
}

}  // namespace larmor::cuda
