#pragma once
// Memory budgets: how many bytes of host or device memory a session (and the whole server) may hold
// in arrays. Storages charge their bytes to a budget before they allocate and give them back in their
// destructor, so a request that would exceed it fails with MemoryBudgetExceeded before a single page
// is touched, instead of growing the process until the machine swaps or the OOM killer steps in.
//
// Budgets form a tree: a session's budget has the server's as its parent, and every byte charged to
// the session is charged to the server too. A session may claim() part of its parent ahead of use
// (admission: what its header says it will need); bytes within that claim then cost the parent nothing
// more, so a session admitted is not starved later by sessions that came after it.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

namespace larmor {

// Sizes computed from what a client declares can overflow 64 bits (a header may declare 2^16 in
// every dimension); these stop at UINT64_MAX, which no budget admits.
inline uint64_t saturating_add(uint64_t a, uint64_t b) {
    return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max() : a + b;
}
inline uint64_t saturating_mul(uint64_t a, uint64_t b) {
    return b && a > std::numeric_limits<uint64_t>::max() / b ? std::numeric_limits<uint64_t>::max() : a * b;
}

// "4.00 GiB (4294967296 bytes)": sizes in errors and logs, exact and readable.
std::string format_bytes(uint64_t bytes);

// A reservation that would take a budget over its limit. The message names what was requested, for
// what, which budget refused it, its limit and what it already holds.
class MemoryBudgetExceeded : public std::runtime_error {
public:
    MemoryBudgetExceeded(const std::string& message, uint64_t requested, uint64_t limit, uint64_t in_use)
        : std::runtime_error(message), requested_(requested), limit_(limit), in_use_(in_use) {}
    uint64_t requested() const { return requested_; }
    uint64_t limit() const { return limit_; }
    uint64_t in_use() const { return in_use_; }

private:
    uint64_t requested_, limit_, in_use_;
};

class MemoryBudget {
public:
    static constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();

    // `name` says in errors which budget this is and how to change it, e.g. "session host memory
    // budget (--session-memory)". A null parent: the root of a tree.
    MemoryBudget(std::string name, uint64_t limit, std::shared_ptr<MemoryBudget> parent = nullptr);
    // Gives what it still charges its parent back (its claim; charges of live storages keep the
    // budget alive through their shared_ptr, so none are left here).
    ~MemoryBudget();
    MemoryBudget(const MemoryBudget&) = delete;
    MemoryBudget& operator=(const MemoryBudget&) = delete;

    // Charges `bytes` (for `what`, named in the error) here and, beyond this budget's claim, to its
    // ancestors; throws MemoryBudgetExceeded naming the first budget that cannot take it, having
    // charged nothing.
    void reserve(uint64_t bytes, const std::string& what);
    // Returns bytes charged by reserve().
    void release(uint64_t bytes) noexcept;

    // Sets this budget's claim on its parent to `bytes` (admission): waits up to `wait` for the
    // parent to have room. Returns false, having claimed nothing more, when it has none by then.
    // Meant to be called before the budget is used; a budget without a parent always succeeds.
    bool claim(uint64_t bytes, std::chrono::milliseconds wait);

    const std::string& name() const { return name_; }
    uint64_t limit() const { return limit_; }
    uint64_t in_use() const;
    uint64_t peak() const;
    uint64_t claimed() const;
    const std::shared_ptr<MemoryBudget>& parent() const { return parent_; }

private:
    // What this budget holds of its parent: its claim or its use, whichever is larger.
    static uint64_t held(uint64_t in_use, uint64_t claim) { return in_use > claim ? in_use : claim; }
    // reserve() without the limit check's message building; waits up to `wait` for room.
    bool reserve_waiting(uint64_t bytes, std::chrono::milliseconds wait);
    [[noreturn]] void refuse(uint64_t bytes, const std::string& what) const;

    const std::string name_;
    const uint64_t limit_;
    const std::shared_ptr<MemoryBudget> parent_;
    mutable std::mutex m_;
    std::condition_variable freed_;  // signalled on release: claim() may be waiting for room
    uint64_t in_use_ = 0, peak_ = 0, claim_ = 0;
};

// The budgets a backend charges its allocations to; null: not bounded.
struct MemoryBudgets {
    std::shared_ptr<MemoryBudget> host;
    std::shared_ptr<MemoryBudget> device;
};

// Bytes charged to a budget for as long as the object lives (a storage's allocation). Charging to a
// null budget does nothing, so unbudgeted arrays (tests, tools) cost nothing.
class BudgetCharge {
public:
    BudgetCharge() = default;
    BudgetCharge(std::shared_ptr<MemoryBudget> budget, uint64_t bytes, const std::string& what);
    ~BudgetCharge() { reset(); }
    BudgetCharge(BudgetCharge&& o) noexcept : budget_(std::move(o.budget_)), bytes_(o.bytes_) { o.bytes_ = 0; }
    BudgetCharge& operator=(BudgetCharge&& o) noexcept;
    BudgetCharge(const BudgetCharge&) = delete;
    BudgetCharge& operator=(const BudgetCharge&) = delete;

    void reset() noexcept;
    uint64_t bytes() const { return bytes_; }

private:
    std::shared_ptr<MemoryBudget> budget_;
    uint64_t bytes_ = 0;
};

}  // namespace larmor
