#pragma once
// The server's memory budgets (core/memory_budget.h) and admission of sessions against them. The
// server holds one host budget and one per CUDA device; each session gets its own budgets under
// them when its ISMRMRD header arrives. The chain's estimate of what that header needs
// (ChainRunner::working_set) is checked against the session's limit and claimed from the server's
// budget before anything big is allocated: a stream that declares more than a session may have is
// refused at once, and one that would not fit next to the running sessions waits a while for room,
// then is told the server is busy. Every array the session's backend allocates is charged to its
// budgets as well, so data that outgrow what the header declared are stopped the same way.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/memory_budget.h"
#include "server/memory_limits.h"

namespace larmor::server {

// A session that cannot be admitted; the message names the numbers and the flag that sets them.
class AdmissionError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class ServerMemory {
public:
    // Resolves `o` against this machine's memory and, for each of `devices`, that device's memory
    // (device_memory(d); 0: unknown, unbounded). Throws std::invalid_argument for a malformed flag.
    ServerMemory(const MemoryLimitOptions& o, uint64_t machine_bytes, const std::vector<int>& devices,
                 uint64_t (*device_memory)(int));

    // A session's host budget under the server's, before anything is admitted: what a connection holds
    // before its header (messages being received, their parsing) is charged to it from the start.
    std::shared_ptr<MemoryBudget> session_host_budget() const;

    // Budgets for a session whose backend arrays will need `need` bytes (on CUDA device `device`, or
    // host memory when device < 0). `declared` says where the figure comes from, for the message.
    // `host`: the session's own host budget (session_host_budget()) when it has one already; null:
    // a new one. Throws AdmissionError when it exceeds the session's or the server's limit, or when it
    // does not fit beside the other sessions within the admission wait.
    MemoryBudgets admit(uint64_t need, int device, const std::string& declared,
                        std::shared_ptr<MemoryBudget> host = nullptr) const;

    // What admission may free when a session does not fit: reclaim(device, bytes) evicts that much from
    // caches charged to the host budget (device -1) or to CUDA device `device`'s (the precompute cache)
    // and returns what it evicted.
    void set_reclaimer(std::function<uint64_t(int, uint64_t)> reclaim) { reclaim_ = std::move(reclaim); }

    // The server's budget of CUDA device `device` (null when it has none).
    std::shared_ptr<MemoryBudget> device_budget(int device) const {
        const auto it = devices_.find(device);
        return it == devices_.end() ? nullptr : it->second.budget;
    }

    // "host 17.6 GiB (session 4.39 GiB); device 0 71.9 GiB (session 35.9 GiB)": for the start-up log.
    std::string describe() const;

    const std::shared_ptr<MemoryBudget>& host() const { return host_; }
    uint64_t session_host_limit() const { return session_host_; }

private:
    struct Device {
        std::shared_ptr<MemoryBudget> budget;
        uint64_t session_limit;
    };

    std::chrono::seconds wait_;
    std::shared_ptr<MemoryBudget> host_;
    uint64_t session_host_;
    std::map<int, Device> devices_;
    std::function<uint64_t(int, uint64_t)> reclaim_;
};

}  // namespace larmor::server
