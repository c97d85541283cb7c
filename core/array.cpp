#include "core/array.h"

#include <vector>

namespace larmor {
namespace {
// std::complex<float> keeps the SIMD alignment FFTW and vector loops want for complex and real views.
class HostStorage final : public Storage {
public:
    explicit HostStorage(size_t bytes) : buf_((bytes + sizeof(cfloat) - 1) / sizeof(cfloat)) {}
    void* data() override { return buf_.data(); }
    size_t bytes() const override { return buf_.size() * sizeof(cfloat); }
    Device device() const override { return Device::Cpu; }

private:
    std::vector<cfloat> buf_;
};
}  // namespace

std::shared_ptr<Storage> make_host_storage(size_t bytes) { return std::make_shared<HostStorage>(bytes); }

}  // namespace larmor
