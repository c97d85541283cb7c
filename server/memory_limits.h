#pragma once
// The server's memory budgets as the command line states them, and the defaults that fit the
// machine it runs on. A size is "4GiB", "512M", "1073741824" (bytes) or a percentage: of the
// machine's memory (the cgroup's limit when the container has one) for the server-wide host
// budget, of the device's memory for the per-device budget, and of the server-wide budget for the
// per-session ones. Sizes use binary units whatever the suffix says (K/KB/KiB = 1024 bytes).
#include <chrono>
#include <cstdint>
#include <string>

namespace larmor::server {

struct MemoryLimitOptions {
    std::string host = "75%";            // --memory-limit: all sessions together, host memory
    std::string session_host = "25%";    // --session-memory-limit: one session, of --memory-limit
    std::string device = "90%";          // --device-memory-limit: all sessions on one GPU
    std::string session_device = "50%";  // --session-device-memory-limit: one session, of --device-memory-limit
    // A session whose declared need does not fit in what others hold waits this long for room,
    // then is told "server busy".
    std::chrono::seconds admission_wait{10};
};

// "4GiB", "512M", "0" (no bytes), "75%" of `whole`. Throws std::invalid_argument naming `flag`
// and the value when it is not a size, is negative, or a percentage is over 100.
uint64_t parse_memory_size(const std::string& text, uint64_t whole, const std::string& flag);

// Physical memory this process may use: MemTotal, or the cgroup (v2 memory.max, v1
// memory.limit_in_bytes) limit when that is lower. 0 when neither can be read.
uint64_t machine_memory();

// Host budgets of `o` against `machine` bytes of memory. Throws std::invalid_argument (see above).
void resolve_host_limits(const MemoryLimitOptions& o, uint64_t machine, uint64_t& host, uint64_t& session_host);
// Device budgets of `o` for a device with `device_memory` bytes.
void resolve_device_limits(const MemoryLimitOptions& o, uint64_t device_memory, uint64_t& device,
                           uint64_t& session_device);

}  // namespace larmor::server
