#pragma once
// Complex single-precision N-d array that lives on the host or on a CUDA device.
// Storage is shared (cheap to copy the handle, like a tensor view); ownership of the bytes sits in a
// Storage object whose destructor releases them, so host, pinned and pooled device memory are all RAII.
#include <complex>
#include <cstddef>
#include <memory>
#include <utility>

#include "core/shape.h"

namespace larmor {

using cfloat = std::complex<float>;

enum class Device { Cpu, Cuda };

inline const char* device_name(Device d) { return d == Device::Cpu ? "cpu" : "cuda"; }

// Owner of a block of memory. Subclasses free it in their destructor (std::vector, cudaFreeHost,
// cudaFreeAsync on the owning stream...).
class Storage {
public:
    virtual ~Storage() = default;
    virtual void* data() = 0;
    virtual size_t bytes() const = 0;
    virtual Device device() const = 0;
    // True when host memory is page-locked (fast, asynchronous uploads).
    virtual bool pinned() const { return false; }
};

// Plain pageable host memory.
std::shared_ptr<Storage> make_host_storage(size_t bytes);

class CArray {
public:
    CArray() = default;
    CArray(Shape shape, std::shared_ptr<Storage> storage);

    // Host array of the given shape, zero-initialised, pageable memory.
    static CArray host(const Shape& shape);

    const Shape& shape() const { return shape_; }
    size_t size() const { return shape_.size(); }
    size_t bytes() const { return size() * sizeof(cfloat); }
    Device device() const { return storage_ ? storage_->device() : Device::Cpu; }
    bool empty() const { return !storage_ || size() == 0; }
    bool pinned() const { return storage_ && storage_->pinned(); }

    cfloat* data() { return storage_ ? static_cast<cfloat*>(storage_->data()) : nullptr; }
    const cfloat* data() const { return storage_ ? static_cast<const cfloat*>(storage_->data()) : nullptr; }

    // Same storage seen with another shape of equal size (no copy).
    CArray reshaped(const Shape& s) const;

    const std::shared_ptr<Storage>& storage() const { return storage_; }

private:
    Shape shape_;
    std::shared_ptr<Storage> storage_;
};

}  // namespace larmor
