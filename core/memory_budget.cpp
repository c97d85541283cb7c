#include "core/memory_budget.h"

#include <cstdio>

namespace larmor {

std::string format_bytes(uint64_t bytes) {
    if (bytes == MemoryBudget::kUnlimited) return "unlimited";
    if (bytes < 1024) return std::to_string(bytes) + " bytes";
    static const char* const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = double(bytes) / 1024.0;
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        ++u;
    }
    char text[32];
    std::snprintf(text, sizeof text, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, units[u]);
    return std::string(text) + " (" + std::to_string(bytes) + " bytes)";
}

MemoryBudget::MemoryBudget(std::string name, uint64_t limit, std::shared_ptr<MemoryBudget> parent)
    : name_(std::move(name)), limit_(limit), parent_(std::move(parent)) {}

MemoryBudget::~MemoryBudget() {
    if (parent_) parent_->release(held(in_use_, claim_));
}

void MemoryBudget::refuse(uint64_t bytes, const std::string& what) const {
    throw MemoryBudgetExceeded(what + " needs " + format_bytes(bytes) + " more, over the " + name_ + " of " +
                                   format_bytes(limit_) + ", of which " + format_bytes(in_use_) + " are in use",
                               bytes, limit_, in_use_);
}

void MemoryBudget::reserve(uint64_t bytes, const std::string& what) {
    if (bytes == 0) return;
    std::lock_guard<std::mutex> lock(m_);
    if (bytes > limit_ - in_use_) refuse(bytes, what);
    const uint64_t next = in_use_ + bytes;
    // Locks are only ever taken child first, then parent: no cycle, no deadlock.
    const uint64_t extra = held(next, claim_) - held(in_use_, claim_);
    if (extra && parent_) parent_->reserve(extra, what);
    in_use_ = next;
    if (in_use_ > peak_) peak_ = in_use_;
}

void MemoryBudget::release(uint64_t bytes) noexcept {
    {
        std::lock_guard<std::mutex> lock(m_);
        if (bytes > in_use_) bytes = in_use_;  // never below zero, whatever a caller got wrong
        const uint64_t next = in_use_ - bytes;
        const uint64_t freed = held(in_use_, claim_) - held(next, claim_);
        in_use_ = next;
        if (freed && parent_) parent_->release(freed);
    }
    freed_.notify_all();
}

bool MemoryBudget::reserve_waiting(uint64_t bytes, std::chrono::milliseconds wait) {
    if (bytes == 0) return true;
    std::unique_lock<std::mutex> lock(m_);
    if (!freed_.wait_for(lock, wait, [&] { return bytes <= limit_ - in_use_; })) return false;
    const uint64_t next = in_use_ + bytes;
    const uint64_t extra = held(next, claim_) - held(in_use_, claim_);
    if (extra && parent_) {
        // Further up nobody waits: holding this lock while waiting there would block the releases
        // that this budget's other users make.
        try {
            parent_->reserve(extra, name_);
        } catch (const MemoryBudgetExceeded&) {
            return false;
        }
    }
    in_use_ = next;
    if (in_use_ > peak_) peak_ = in_use_;
    return true;
}

bool MemoryBudget::claim(uint64_t bytes, std::chrono::milliseconds wait) {
    std::lock_guard<std::mutex> lock(m_);
    if (parent_) {
        const uint64_t before = held(in_use_, claim_), after = held(in_use_, bytes);
        if (after > before && !parent_->reserve_waiting(after - before, wait)) return false;
        if (after < before) parent_->release(before - after);
    }
    claim_ = bytes;
    return true;
}

uint64_t MemoryBudget::in_use() const {
    std::lock_guard<std::mutex> lock(m_);
    return in_use_;
}

uint64_t MemoryBudget::peak() const {
    std::lock_guard<std::mutex> lock(m_);
    return peak_;
}

uint64_t MemoryBudget::claimed() const {
    std::lock_guard<std::mutex> lock(m_);
    return claim_;
}

BudgetCharge::BudgetCharge(std::shared_ptr<MemoryBudget> budget, uint64_t bytes, const std::string& what) {
    if (!budget || bytes == 0) return;
    budget->reserve(bytes, what);
    budget_ = std::move(budget);
    bytes_ = bytes;
}

BudgetCharge& BudgetCharge::operator=(BudgetCharge&& o) noexcept {
    if (this != &o) {
        reset();
        budget_ = std::move(o.budget_);
        bytes_ = o.bytes_;
        o.bytes_ = 0;
    }
    return *this;
}

void BudgetCharge::reset() noexcept {
    if (budget_ && bytes_) budget_->release(bytes_);
    budget_.reset();
    bytes_ = 0;
}

}  // namespace larmor
