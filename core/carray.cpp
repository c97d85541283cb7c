#include "core/carray.h"

#include <stdexcept>
#include <vector>

namespace larmor {
namespace {
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

CArray::CArray(Shape shape, std::shared_ptr<Storage> storage) : shape_(shape), storage_(std::move(storage)) {
    if (storage_ && storage_->bytes() < shape_.size() * sizeof(cfloat))
        throw std::invalid_argument("CArray: storage of " + std::to_string(storage_->bytes()) +
                                    " bytes is too small for shape " + shape_.str());
}

CArray CArray::host(const Shape& shape) { return CArray(shape, make_host_storage(shape.size() * sizeof(cfloat))); }

CArray CArray::reshaped(const Shape& s) const {
    if (s.size() != shape_.size())
        throw std::invalid_argument("CArray::reshaped: " + shape_.str() + " to " + s.str() + " changes the size");
    return CArray(s, storage_);
}

}  // namespace larmor
