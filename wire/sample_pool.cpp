#include "wire/sample_pool.h"

#include <cstddef>
#include <mutex>
#include <new>
#include <vector>

namespace larmor::wire {
namespace {

struct Block {
    void* p;
    size_t bytes;
};

// At most this many blocks make room for one (a 4 MiB block displaces 64 blocks of 64 KiB).
constexpr size_t kMaxDropped = kPoolMaxBlock / kPoolMinBlock;

// The held blocks, newest last: a stream's next acquisition takes the block its last one freed, which
// is still in cache. The blocks are few (at most kPoolBytes / kPoolMinBlock), so a scan finds a size.
class Pool {
public:
    ~Pool() {
        for (const Block& b : held_) ::operator delete(b.p);
    }
    void* take(size_t bytes) {
        {
            const std::lock_guard<std::mutex> lock(mutex_);
            for (size_t i = held_.size(); i-- > 0;)
                if (held_[i].bytes == bytes) {
                    void* p = held_[i].p;
                    held_.erase(held_.begin() + std::ptrdiff_t(i));  // keeps the others in age order
                    held_bytes_ -= bytes;
                    return p;
                }
        }
        return ::operator new(bytes);
    }
    // A full pool makes room by dropping its oldest blocks, so sizes a finished stream left behind
    // do not keep the next stream's size out.
    void give(void* p, size_t bytes) noexcept {
        Block dropped[kMaxDropped];
        size_t n_dropped = 0;
        {
            const std::lock_guard<std::mutex> lock(mutex_);
            size_t oldest = 0;
            while (oldest < held_.size() && n_dropped < kMaxDropped &&
                   (held_bytes_ + bytes > kPoolBytes || held_.size() - oldest >= held_.capacity())) {
                dropped[n_dropped++] = held_[oldest];
                held_bytes_ -= held_[oldest++].bytes;
            }
            held_.erase(held_.begin(), held_.begin() + std::ptrdiff_t(oldest));
            if (held_bytes_ + bytes <= kPoolBytes && held_.size() < held_.capacity()) {
                held_.push_back({p, bytes});
                held_bytes_ += bytes;
                p = nullptr;
            }
        }
        for (size_t i = 0; i < n_dropped; ++i) ::operator delete(dropped[i].p);  // outside the lock
        if (p) ::operator delete(p);
    }
    size_t held() noexcept {
        const std::lock_guard<std::mutex> lock(mutex_);
        return held_bytes_;
    }
    Pool() { held_.reserve(kPoolBytes / kPoolMinBlock); }  // give() never allocates

private:
    std::mutex mutex_;
    std::vector<Block> held_;
    size_t held_bytes_ = 0;
};

Pool& pool() {
    static Pool p;
    return p;
}

bool pooled(size_t bytes) { return bytes >= kPoolMinBlock && bytes <= kPoolMaxBlock; }

}  // namespace

void* pool_allocate(size_t bytes) { return pooled(bytes) ? pool().take(bytes) : ::operator new(bytes); }

void pool_deallocate(void* p, size_t bytes) noexcept {
    if (p == nullptr) return;
    if (pooled(bytes))
        pool().give(p, bytes);
    else
        ::operator delete(p);
}

size_t pool_held_bytes() noexcept { return pool().held(); }

}  // namespace larmor::wire
