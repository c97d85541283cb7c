#include "server/memory_admission.h"

namespace larmor::server {
namespace {

uint64_t or_unlimited(uint64_t bytes) { return bytes ? bytes : MemoryBudget::kUnlimited; }

}  // namespace

ServerMemory::ServerMemory(const MemoryLimitOptions& o, uint64_t machine_bytes, const std::vector<int>& devices,
                           uint64_t (*device_memory)(int))
    : wait_(o.admission_wait) {
    uint64_t host = 0, session = 0;
    // Machine memory unknown: percentages of it mean nothing, so they leave the budget unbounded.
    resolve_host_limits(o, or_unlimited(machine_bytes), host, session);
    host_ = std::make_shared<MemoryBudget>("server host memory budget (--memory-limit)", host);
    session_host_ = session;
    for (int d : devices) {
        uint64_t dev = 0, dev_session = 0;
        resolve_device_limits(o, or_unlimited(device_memory(d)), dev, dev_session);
        devices_[d] = Device{std::make_shared<MemoryBudget>("server memory budget of CUDA device " + std::to_string(d) +
                                                                " (--device-memory-limit)",
                                                            dev),
                             dev_session};
    }
}

std::shared_ptr<MemoryBudget> ServerMemory::session_host_budget() const {
    return std::make_shared<MemoryBudget>("session host memory budget (--session-memory-limit)", session_host_, host_);
}

MemoryBudgets ServerMemory::admit(uint64_t need, int device, const std::string& declared,
                                  std::shared_ptr<MemoryBudget> host) const {
    MemoryBudgets b;
    b.host = host ? std::move(host) : session_host_budget();
    if (device >= 0) {
        const auto it = devices_.find(device);
        if (it == devices_.end())
            throw AdmissionError("CUDA device " + std::to_string(device) + " has no memory budget (not in --devices)");
        b.device = std::make_shared<MemoryBudget>("session memory budget on CUDA device " + std::to_string(device) +
                                                      " (--session-device-memory-limit)",
                                                  it->second.session_limit, it->second.budget);
    }
    const std::shared_ptr<MemoryBudget>& arrays = device >= 0 ? b.device : b.host;
    const std::shared_ptr<MemoryBudget>& server = arrays->parent();
    const std::string what = declared + ": the chain needs an estimated " + format_bytes(need) +
                             (device >= 0 ? " on CUDA device " + std::to_string(device) : std::string(" of host memory"));
    if (need > arrays->limit())
        throw AdmissionError(what + ", over the " + arrays->name() + " of " + format_bytes(arrays->limit()));
    if (need > server->limit())
        throw AdmissionError(what + ", over the " + server->name() + " of " + format_bytes(server->limit()));
    // A session first makes room in the caches charged to its budget (they are only saved work), then
    // waits for other sessions to finish.
    if (reclaim_ && !arrays->claim(need, std::chrono::milliseconds(0))) {
        const uint64_t used = server->in_use();
        if (used + need > server->limit()) reclaim_(device, used + need - server->limit());
    }
    if (!arrays->claim(need, std::chrono::duration_cast<std::chrono::milliseconds>(wait_))) {
        const uint64_t used = server->in_use();
        throw AdmissionError("server busy: " + what + ", but other sessions hold " + format_bytes(used) + " of the " +
                             server->name() + " of " + format_bytes(server->limit()) + " (waited " +
                             std::to_string(wait_.count()) + " s for room); try again later");
    }
    return b;
}

std::string ServerMemory::describe() const {
    std::string s = "host " + format_bytes(host_->limit()) + " (session " + format_bytes(session_host_) + ")";
    for (const auto& [d, dev] : devices_)
        s += "; CUDA device " + std::to_string(d) + " " + format_bytes(dev.budget->limit()) + " (session " +
             format_bytes(dev.session_limit) + ")";
    return s;
}

}  // namespace larmor::server
