#pragma once
// The sample vector of an acquisition: std::vector of complex floats whose resize() value-initialises
// (zeroes) as any vector's does, except inside an UninitialisedResize scope, where the codec resizes it
// just before the socket writes every new element. std::complex's default constructor zeroes, so a
// plain vector cost every received acquisition one more pass over its samples than the copy from the
// socket (the zero-fill was 30 % of the server's CPU time in a passthrough session: perf, 2026-12-02).
// Its storage comes from the sample pool (wire/sample_pool.h), which keeps freed blocks resident for
// the next acquisition of the same size.
#include <complex>
#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "wire/sample_pool.h"

namespace larmor::wire {

namespace detail {
inline thread_local bool g_uninitialised_resize = false;
}  // namespace detail

template <class T>
struct SampleAllocator : std::allocator<T> {
    static_assert(std::is_trivially_copyable_v<T>, "only for element types the socket may fill byte by byte");
    using value_type = T;
    template <class U>
    struct rebind {
        using other = SampleAllocator<U>;
    };
    SampleAllocator() noexcept = default;
    template <class U>
    SampleAllocator(const SampleAllocator<U>&) noexcept {}  // NOLINT: allocators convert implicitly

    T* allocate(std::size_t n) {
        if (n > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
        return static_cast<T*>(pool_allocate(n * sizeof(T)));
    }
    void deallocate(T* p, std::size_t n) noexcept { pool_deallocate(p, n * sizeof(T)); }

    template <class U>
    void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
        if (!detail::g_uninitialised_resize) ::new (static_cast<void*>(p)) U();
    }
    template <class U, class... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
};

template <class T, class U>
bool operator==(const SampleAllocator<T>&, const SampleAllocator<U>&) noexcept {
    return true;
}
template <class T, class U>
bool operator!=(const SampleAllocator<T>&, const SampleAllocator<U>&) noexcept {
    return false;
}

using Samples = std::vector<std::complex<float>, SampleAllocator<std::complex<float>>>;

// While alive, resize() of a Samples vector on this thread leaves new elements unwritten: the caller
// must write every one of them before anything reads it.
class UninitialisedResize {
public:
    UninitialisedResize() noexcept : previous_(detail::g_uninitialised_resize) { detail::g_uninitialised_resize = true; }
    ~UninitialisedResize() { detail::g_uninitialised_resize = previous_; }
    UninitialisedResize(const UninitialisedResize&) = delete;
    UninitialisedResize& operator=(const UninitialisedResize&) = delete;

private:
    bool previous_;
};

}  // namespace larmor::wire
