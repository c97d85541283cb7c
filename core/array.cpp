#include "core/array.h"

#include <vector>

#include "core/fault_injection.h"

namespace larmor {
namespace {
// std::complex<float> keeps the SIMD alignment FFTW and vector loops want for complex and real views.
class HostStorage final : public Storage {
public:
    // The charge comes first: a request over budget throws before the vector touches a page.
    HostStorage(size_t bytes, const std::shared_ptr<MemoryBudget>& budget, const std::string& what)
        : charge_(budget, elements(bytes) * sizeof(cfloat), what), buf_(allocate(elements(bytes))) {}
    void* data() override { return buf_.data(); }
    size_t bytes() const override { return buf_.size() * sizeof(cfloat); }
    Device device() const override { return Device::Cpu; }

private:
    static size_t elements(size_t bytes) { return (bytes + sizeof(cfloat) - 1) / sizeof(cfloat); }
    static std::vector<cfloat> allocate(size_t n) {
        if (inject_fault(FaultSite::HostAlloc)) throw std::bad_alloc();
        return std::vector<cfloat>(n);
    }

    BudgetCharge charge_;
    std::vector<cfloat> buf_;
};
}  // namespace

std::shared_ptr<Storage> make_host_storage(size_t bytes, const std::shared_ptr<MemoryBudget>& budget,
                                           const std::string& what) {
    return std::make_shared<HostStorage>(bytes, budget, what);
}

}  // namespace larmor
