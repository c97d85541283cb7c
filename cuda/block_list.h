#pragma once
// Size-keyed free lists of reusable memory blocks, bounded per size and in total: the bookkeeping
// behind the session's device-block cache and the page-locked download cache (device_context.h).
// It never allocates or frees memory itself; the owner does. Thread-safe.
#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace larmor::cuda {

class BlockList {
public:
    BlockList(size_t per_size, size_t max_bytes) : per_size_(per_size), max_bytes_(max_bytes) {}

    // A kept block of exactly `bytes`, or nullptr when there is none.
    void* take(size_t bytes) {
        std::lock_guard<std::mutex> lock(m_);
        auto it = free_.find(bytes);
        if (it == free_.end() || it->second.empty()) return nullptr;
        void* p = it->second.back();
        it->second.pop_back();
        total_ -= bytes;
        return p;
    }

    // Keeps the block for a later take(); false when that would exceed the bounds (or the
    // bookkeeping cannot grow), and the caller frees the block instead.
    bool keep(void* p, size_t bytes) noexcept {
        try {
            std::lock_guard<std::mutex> lock(m_);
            if (bytes > max_bytes_ || total_ + bytes > max_bytes_) return false;
            std::vector<void*>& list = free_[bytes];
            if (list.size() >= per_size_) return false;
            list.push_back(p);
            total_ += bytes;
            return true;
        } catch (...) {
            return false;
        }
    }

    // Every kept block with its size, handed over to be freed; the list is empty afterwards.
    std::vector<std::pair<void*, size_t>> drain() {
        std::lock_guard<std::mutex> lock(m_);
        std::vector<std::pair<void*, size_t>> out;
        for (auto& [bytes, list] : free_)
            for (void* p : list) out.emplace_back(p, bytes);
        free_.clear();
        total_ = 0;
        return out;
    }

    size_t bytes() const {
        std::lock_guard<std::mutex> lock(m_);
        return total_;
    }

private:
    const size_t per_size_, max_bytes_;
    mutable std::mutex m_;
    std::unordered_map<size_t, std::vector<void*>> free_;
    size_t total_ = 0;
};

}  // namespace larmor::cuda
