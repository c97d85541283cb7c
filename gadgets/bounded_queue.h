#pragma once
// Blocking FIFO with a fixed capacity: the bound is what turns a slow gadget into backpressure on
// the socket instead of unbounded memory growth.
#include <chrono>
#include <condition_variable>
#include <cstdint>
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
        ++pops_;
        not_full_.notify_all();  // a pusher waiting for room, or one waiting for a pop (wait_for_pop)
        return item;
    }

    // Waits until the consumer has taken an item, for at most `at_most`. False at once when there is
    // nothing it could take (empty or aborted): waiting would then be waiting for nothing.
    template <typename Rep, typename Period>
    bool wait_for_pop(std::chrono::duration<Rep, Period> at_most) {
        std::unique_lock<std::mutex> lock(mutex_);
        if (aborted_ || items_.empty()) return false;
        const uint64_t seen = pops_;
        not_full_.wait_for(lock, at_most, [&] { return aborted_ || pops_ != seen; });
        return !aborted_;
    }

    // Wakes all waiters for good (used when a session is torn down) and hands back what was still
    // queued, so the caller can account for it (the acquisition ledger) before it is dropped.
    std::deque<T> abort() {
        std::deque<T> left;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            aborted_ = true;
            left.swap(items_);
        }
        not_full_.notify_all();
        not_empty_.notify_all();
        return left;
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
    uint64_t pops_ = 0;
    bool aborted_ = false;
};

}  // namespace larmor
