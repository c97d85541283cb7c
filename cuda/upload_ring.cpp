#include "cuda/upload_ring.h"

#include <cstring>

#include "cuda/cuda_check.h"
#include "cuda/device_context.h"

namespace larmor::cuda {

UploadRing::~UploadRing() {
    if (!host_) return;
    DeviceGuard guard(device_);
    for (size_t s = 0; s < kSlots; ++s) {
        // The copies out of a slot must finish before its memory goes.
        if (in_flight_[s] && cudaEventSynchronize(done_[s]) != cudaSuccess) cudaGetLastError();
        if (done_[s] && cudaEventDestroy(done_[s]) != cudaSuccess) cudaGetLastError();
    }
    free_pinned(host_, kSlots * kSlotBytes);
}

void UploadRing::allocate(const std::function<std::string()>& what) {
    BudgetCharge charge(budget_, kSlots * kSlotBytes, "upload staging for " + what());
    void* p = alloc_pinned(device_, kSlots * kSlotBytes, "upload staging for " + what());
    host_ = static_cast<char*>(p);
    charge_ = std::move(charge);
    for (size_t s = 0; s < kSlots; ++s)
        LARMOR_CUDA_CHECK(cudaEventCreateWithFlags(&done_[s], cudaEventDisableTiming), "upload staging event, " + what());
}

bool UploadRing::upload(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows,
                        cudaStream_t stream, const std::function<std::string()>& what) {
    if (rows == 0 || width == 0) return true;
    if (width > kSlotBytes || rows > kSlotBytes / width) return false;
    std::lock_guard<std::mutex> lock(m_);
    DeviceGuard guard(device_);
    if (!host_) allocate(what);
    const size_t s = next_;
    next_ = (next_ + 1) % kSlots;
    if (in_flight_[s]) {
        LARMOR_CUDA_CHECK(cudaEventSynchronize(done_[s]), "waiting for an earlier upload, " + what());
        in_flight_[s] = false;
    }
    char* slot = host_ + s * kSlotBytes;
    const auto* from = static_cast<const char*>(src);
    if (spitch == width) {
        std::memcpy(slot, from, rows * width);
    } else {
        for (size_t r = 0; r < rows; ++r) std::memcpy(slot + r * width, from + r * spitch, width);
    }
    LARMOR_CUDA_CHECK(cudaMemcpy2DAsync(dst, dpitch, slot, width, width, rows, cudaMemcpyHostToDevice, stream), what());
    LARMOR_CUDA_CHECK(cudaEventRecord(done_[s], stream), "upload staging event, " + what());
    in_flight_[s] = true;
    return true;
}

}  // namespace larmor::cuda
