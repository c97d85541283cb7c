#pragma once
// Blocking FIFO with a fixed capacity: the bound is what turns a slow gadget into backpressure on
// the socket instead of unbounded memory growth.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>

namespace larmor {

template <typename T>
class BoundedQueue {
public:
    explicit BoundedQueue(size_t capacity) : capacity_(capacity ? capacity : 1) {}

    // Blocks while full. Returns false (dropping the item) once the queue is aborted.
    bool push(T item) {
        std::unique_lock<std::mutex> lock(mutex_);
        not_full_.wait(lock, [&] { return aborted_ || items_.size() < capacity_; });
        if (aborted_) return false;
        items_.push_back(std::move(item));
        not_empty_.notify_one();
        return true;
    }

    // Blocks while empty. Returns nullopt once the queue is aborted.
    std::optional<T> pop() {
        std::unique_lock<std::mutex> lock(mutex_);
        not_empty_.wait(lock, [&] { return aborted_ || !items_.empty(); });
        if (aborted_) return std::nullopt;
        T item = std::move(items_.front());
        items_.pop_front();
        not_full_.notify_one();
        return item;
    }

    // Drops everything and wakes all waiters for good (used when a session is torn down).
    void abort() {
        std::lock_guard<std::mutex> lock(mutex_);
        aborted_ = true;
        items_.clear();
        not_full_.notify_all();
        not_empty_.notify_all();
    }

    size_t size() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return items_.size();
    }

private:
    const size_t capacity_;
    mutable std::mutex mutex_;
    std::condition_variable not_full_, not_empty_;
    std::deque<T> items_;
    bool aborted_ = false;
};

}  // namespace larmor
