#pragma once
// N-d single-precision arrays, complex (CArray) or real (RArray), that live on the host or on a CUDA
// device. A handle shares its storage (cheap to copy, like a tensor view) and may see only part of it:
// view() and slice_last() give a coil, a slice or a scalar slot of a larger array without a copy.
// Ownership of the bytes sits in a Storage object whose destructor releases them, so host, pinned and
// pooled device memory are all RAII.
//
// Aliasing contract of every Backend primitive and operator (core/backend.h): an output may be the
// very same view as an input (same first element, same size: the operation runs in place) only where
// the primitive says so; any other overlap of an output with an input is refused with
// std::invalid_argument. overlaps() and same_view() below are the two tests.
#include <complex>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/memory_budget.h"
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

// Plain pageable host memory, zero-filled. With a budget, the bytes are charged to it before anything
// is allocated (MemoryBudgetExceeded names `what`) and given back when the storage goes.
std::shared_ptr<Storage> make_host_storage(size_t bytes, const std::shared_ptr<MemoryBudget>& budget = nullptr,
                                           const std::string& what = "host array");

template <class T>
class Array {
public:
    using value_type = T;

    Array() = default;
    // The elements [offset, offset + shape.size()) of `storage`, which must hold them.
    Array(Shape shape, std::shared_ptr<Storage> storage, size_t offset = 0)
        : shape_(shape), storage_(std::move(storage)), offset_(offset) {
        if (storage_ && storage_->bytes() < (offset_ + shape_.size()) * sizeof(T))
            throw std::invalid_argument("Array: storage of " + std::to_string(storage_->bytes()) +
                                        " bytes is too small for shape " + shape_.str() + " at element offset " +
                                        std::to_string(offset_));
    }

    // Host array of the given shape, zero-initialised, pageable memory; charged to `budget` when given.
    static Array host(const Shape& shape, const std::shared_ptr<MemoryBudget>& budget = nullptr) {
        return Array(shape, make_host_storage(shape.size() * sizeof(T), budget, "host array " + shape.str()));
    }

    const Shape& shape() const { return shape_; }
    size_t size() const { return shape_.size(); }
    size_t bytes() const { return size() * sizeof(T); }
    Device device() const { return storage_ ? storage_->device() : Device::Cpu; }
    bool empty() const { return !storage_ || size() == 0; }
    bool pinned() const { return storage_ && storage_->pinned(); }
    // First element of this view within its storage.
    size_t offset() const { return offset_; }

    T* data() { return storage_ ? static_cast<T*>(storage_->data()) + offset_ : nullptr; }
    const T* data() const { return storage_ ? static_cast<const T*>(storage_->data()) + offset_ : nullptr; }

    // Same elements seen with another shape of equal size (no copy).
    Array reshaped(const Shape& s) const {
        if (s.size() != shape_.size())
            throw std::invalid_argument("Array::reshaped: " + shape_.str() + " to " + s.str() + " changes the size");
        return Array(s, storage_, offset_);
    }

    // Elements [first, first + shape.size()) of this view, as an array of `shape` (no copy).
    Array view(size_t first, const Shape& shape) const {
        if (first + shape.size() > size())
            throw std::invalid_argument("Array::view: elements [" + std::to_string(first) + ", " +
                                        std::to_string(first + shape.size()) + ") are outside " + shape_.str());
        return Array(shape, storage_, offset_ + first);
    }

    // Index i of the last axis (one coil of [X, Y, Z, C], one slice of [X, Y, Z]) as an array of the
    // other axes (no copy).
    Array slice_last(size_t i) const {
        if (shape_.rank() == 0) throw std::invalid_argument("Array::slice_last: array of rank 0");
        const size_t n = shape_[shape_.rank() - 1];
        if (i >= n)
            throw std::invalid_argument("Array::slice_last: index " + std::to_string(i) + " is outside the last axis of " +
                                        shape_.str());
        Shape inner;
        for (int a = 0; a + 1 < shape_.rank(); ++a) inner.push_back(shape_[a]);
        return view(i * inner.size(), inner);
    }

    const std::shared_ptr<Storage>& storage() const { return storage_; }

private:
    Shape shape_;
    std::shared_ptr<Storage> storage_;
    size_t offset_ = 0;
};

using CArray = Array<cfloat>;
using RArray = Array<float>;

// True when a and b share storage and their byte ranges intersect.
template <class A, class B>
bool overlaps(const Array<A>& a, const Array<B>& b) {
    if (!a.storage() || a.storage() != b.storage() || a.size() == 0 || b.size() == 0) return false;
    const size_t a0 = a.offset() * sizeof(A), a1 = a0 + a.bytes();
    const size_t b0 = b.offset() * sizeof(B), b1 = b0 + b.bytes();
    return a0 < b1 && b0 < a1;
}

// True when a and b are the same elements (in-place use of a primitive).
template <class T>
bool same_view(const Array<T>& a, const Array<T>& b) {
    return a.storage() && a.storage() == b.storage() && a.offset() == b.offset() && a.size() == b.size();
}

}  // namespace larmor
