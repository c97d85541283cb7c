#pragma once
// Page-locked staging for the small uploads a streaming session makes from pageable memory (one
// readout at a time, as it comes off the socket). A copy from pageable memory makes the driver
// stage it itself, row by row for a 2D copy, before the call returns: ~17 us for one 512 x 32-coil
// readout on the H200 machines. Copying the rows into a page-locked slot on the host and queueing
// one asynchronous 2D copy from there costs a memcpy and two driver calls.
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>

#include "core/memory_budget.h"

namespace larmor::cuda {

class UploadRing {
public:
    static constexpr size_t kSlots = 8;
    static constexpr size_t kSlotBytes = size_t{1} << 20;

    // The slots are charged to `host_budget` from their allocation (at the first upload) on.
    explicit UploadRing(int device, std::shared_ptr<MemoryBudget> host_budget = nullptr)
        : device_(device), budget_(std::move(host_budget)) {}
    ~UploadRing();
    UploadRing(const UploadRing&) = delete;
    UploadRing& operator=(const UploadRing&) = delete;

    // Queues on `stream` the copy of `rows` rows of `width` bytes from host memory (row i at
    // src + i * spitch) to device memory (row i at dst + i * dpitch) through the next slot, and
    // returns once `src` may be reused. A slot is refilled only after its previous copy has run
    // (its event), so at most kSlots uploads are in flight. Returns false, having done nothing, when
    // the rows do not fit one slot (the caller copies directly). `what` names the copy in errors.
    bool upload(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows,
                cudaStream_t stream, const std::function<std::string()>& what);

private:
    void allocate(const std::function<std::string()>& what);

    int device_;
    std::shared_ptr<MemoryBudget> budget_;
    BudgetCharge charge_;  // of host_, while it exists
    std::mutex m_;
    char* host_ = nullptr;  // kSlots x kSlotBytes, page-locked
    std::array<cudaEvent_t, kSlots> done_{};
    std::array<bool, kSlots> in_flight_{};
    size_t next_ = 0;
};

}  // namespace larmor::cuda
