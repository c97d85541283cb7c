#pragma once
// A process-wide store of transform plans (FFTW's, cuFFT's) shared by every session, so that a shape
// is planned once per process, not once per session (issue 23: about 60 ms per CUDA session with LTO
// callback plans, 0.1-1 s per CPU session with measured FFTW plans, and CPU images of the same data
// that differed in the last digits between sessions, each with its own measured plan).
//
// get(key, make) returns the plan of `key`, calling make() only when none is stored. The registry's
// lock is held for the map lookup only, never while a plan is made: concurrent first uses of the same
// key wait for the one creation in progress; uses of other keys go on. A creation that throws is
// reported to the caller and to everyone who waited for it, and is not stored (the next use tries
// again).
//
// Bounded: beyond `max_entries` plans, the least recently used ones that no session holds any more
// are dropped (a session keeps the plans it got alive through its own shared_ptr, so dropping one
// never pulls it from under a running transform). With a budget (charge_to), each stored plan is
// charged to it; a plan the budget cannot take is used but not kept, and drop_idle() (the server's
// admission, before it refuses a session for memory) says how much it gave back.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/memory_budget.h"

namespace larmor {

struct PlanRegistryStats {
    uint64_t created = 0;  // plans made
    uint64_t reused = 0;   // uses answered from the store (waiting for a creation in progress included)
    uint64_t waited = 0;   // of those, uses that waited for another thread's creation of the same key
    uint64_t dropped = 0;  // plans dropped for the bound
    uint64_t failed = 0;   // creations that threw
    size_t entries = 0;    // plans stored now
    uint64_t charged_bytes = 0;  // what the stored plans are charged (charge_to)
};

template <class Plan>
class PlanRegistry {
public:
    using Key = std::vector<size_t>;

    explicit PlanRegistry(size_t max_entries) : max_entries_(max_entries < 1 ? 1 : max_entries) {}
    PlanRegistry(const PlanRegistry&) = delete;
    PlanRegistry& operator=(const PlanRegistry&) = delete;

    // Plans stored from now on are charged `bytes_of(plan)` to `budget` (null: none).
    void charge_to(std::shared_ptr<MemoryBudget> budget, std::function<uint64_t(const Plan&)> bytes_of) {
        std::lock_guard<std::mutex> lock(mutex_);
        budget_ = std::move(budget);
        bytes_of_ = std::move(bytes_of);
    }

    std::shared_ptr<Plan> get(const Key& key, const std::function<std::shared_ptr<Plan>()>& make) {
        std::shared_ptr<Slot> slot;
        bool creator = false;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            auto it = slots_.find(key);
            if (it == slots_.end()) {
                slot = std::make_shared<Slot>();
                slots_.emplace(key, slot);
                creator = true;
            } else {
                slot = it->second;
                ++stats_.reused;
            }
            slot->last_use = ++clock_;
        }
        if (creator) return create(key, slot, make);

        std::unique_lock<std::mutex> lock(slot->mutex);
        if (!slot->done.load(std::memory_order_acquire)) {
            {
                std::lock_guard<std::mutex> g(mutex_);
                ++stats_.waited;
            }
            slot->ready.wait(lock, [&] { return slot->done.load(std::memory_order_acquire); });
        }
        if (slot->error) std::rethrow_exception(slot->error);
        return slot->plan;
    }

    PlanRegistryStats stats() const {
        std::lock_guard<std::mutex> lock(mutex_);
        PlanRegistryStats s = stats_;
        s.entries = slots_.size();
        for (const auto& [key, slot] : slots_) s.charged_bytes += slot->charge.bytes();
        return s;
    }

    // Drops every stored plan no session holds (memory pressure, tests); returns the bytes they were
    // charged.
    uint64_t drop_idle() {
        std::lock_guard<std::mutex> lock(mutex_);
        uint64_t freed = 0;
        for (auto it = slots_.begin(); it != slots_.end();)
            if (idle(*it->second)) {
                freed += it->second->charge.bytes();
                it = slots_.erase(it);
                ++stats_.dropped;
            } else {
                ++it;
            }
        return freed;
    }

private:
    struct Slot {
        std::mutex mutex;
        std::condition_variable ready;
        // Set (release) once plan and error are written; neither changes after, so whoever reads done
        // as true (acquire) may read them without the slot's mutex.
        std::atomic<bool> done{false};
        std::shared_ptr<Plan> plan;
        std::exception_ptr error;
        uint64_t last_use = 0;  // guarded by the registry's mutex
        BudgetCharge charge;    // guarded by the registry's mutex
    };

    std::shared_ptr<Plan> create(const Key& key, const std::shared_ptr<Slot>& slot,
                                 const std::function<std::shared_ptr<Plan>()>& make) {
        std::shared_ptr<Plan> plan;
        std::exception_ptr error;
        try {
            plan = make();
        } catch (...) {
            error = std::current_exception();
        }
        {
            std::lock_guard<std::mutex> lock(slot->mutex);
            slot->plan = plan;
            slot->error = error;
            slot->done.store(true, std::memory_order_release);
        }
        slot->ready.notify_all();
        {
            std::lock_guard<std::mutex> lock(mutex_);
            auto it = slots_.find(key);
            const bool stored = it != slots_.end() && it->second == slot;
            if (error) {
                ++stats_.failed;
                if (stored) slots_.erase(it);
            } else {
                ++stats_.created;
                if (stored && budget_) {
                    try {
                        slot->charge = BudgetCharge(budget_, bytes_of_(*plan), "a stored transform plan");
                    } catch (const MemoryBudgetExceeded&) {
                        slots_.erase(it);  // used by its callers, but not kept: the server has no room
                        ++stats_.dropped;
                    }
                }
                trim_locked();
            }
        }
        if (error) std::rethrow_exception(error);
        return plan;
    }

    // A slot only the registry refers to, whose plan only the registry holds. Registry mutex held.
    static bool idle(const Slot& s) {
        return s.done.load(std::memory_order_acquire) && s.plan && s.plan.use_count() == 1;
    }

    void trim_locked() {
        while (slots_.size() > max_entries_) {
            auto oldest = slots_.end();
            for (auto it = slots_.begin(); it != slots_.end(); ++it)
                if (idle(*it->second) && (oldest == slots_.end() || it->second->last_use < oldest->second->last_use))
                    oldest = it;
            if (oldest == slots_.end()) return;  // every plan is in use: they cost memory either way
            slots_.erase(oldest);
            ++stats_.dropped;
        }
    }

    const size_t max_entries_;
    mutable std::mutex mutex_;
    std::shared_ptr<MemoryBudget> budget_;
    std::function<uint64_t(const Plan&)> bytes_of_;
    std::map<Key, std::shared_ptr<Slot>> slots_;
    uint64_t clock_ = 0;
    PlanRegistryStats stats_;
};

}  // namespace larmor
