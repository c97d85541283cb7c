#include "server/memory_limits.h"

#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <stdexcept>

namespace larmor::server {
namespace {

std::string lower(std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// The first number in a cgroup or meminfo file; 0 when absent or "max" (no limit).
uint64_t read_number(const std::string& path) {
    std::ifstream f(path);
    std::string word;
    if (!(f >> word) || word == "max") return 0;
    try {
        return std::stoull(word);
    } catch (const std::exception&) {
        return 0;
    }
}

uint64_t mem_total() {
    std::ifstream f("/proc/meminfo");
    std::string key, unit;
    uint64_t kib = 0;
    while (f >> key >> kib >> unit)
        if (key == "MemTotal:") return kib * 1024;
    return 0;
}

}  // namespace

uint64_t parse_memory_size(const std::string& text, uint64_t whole, const std::string& flag) {
    const auto bad = [&](const std::string& why) {
        return std::invalid_argument(flag + " '" + text + "': " + why +
                                     " (write a size such as 4GiB, 512MiB, 1073741824 or a percentage such as 25%)");
    };
    size_t end = 0;
    double value = 0;
    try {
        value = std::stod(text, &end);
    } catch (const std::exception&) {
        throw bad("not a number");
    }
    if (!std::isfinite(value) || value < 0) throw bad("must be a finite size of at least 0");
    std::string unit = lower(text.substr(end));
    while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
    if (unit == "%") {
        if (value > 100) throw bad("a percentage cannot exceed 100");
        return uint64_t(double(whole) * value / 100.0);
    }
    double scale = 1;
    if (unit.empty() || unit == "b") scale = 1;
    else if (unit == "k" || unit == "kb" || unit == "kib") scale = 1024.0;
    else if (unit == "m" || unit == "mb" || unit == "mib") scale = 1024.0 * 1024;
    else if (unit == "g" || unit == "gb" || unit == "gib") scale = 1024.0 * 1024 * 1024;
    else if (unit == "t" || unit == "tb" || unit == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
    else throw bad("unknown unit '" + unit + "'");
    const double bytes = value * scale;
    if (bytes >= double(std::numeric_limits<uint64_t>::max())) throw bad("too large");
    return uint64_t(bytes);
}

uint64_t machine_memory() {
    uint64_t total = mem_total();
    // A container's limit is what the OOM killer enforces, whatever the host has.
    for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
        const uint64_t limit = read_number(path);
        if (limit && (total == 0 || limit < total)) total = limit;
    }
    return total;
}

void resolve_host_limits(const MemoryLimitOptions& o, uint64_t machine, uint64_t& host, uint64_t& session_host) {
    host = parse_memory_size(o.host, machine, "--memory-limit");
    session_host = parse_memory_size(o.session_host, host, "--session-memory-limit");
}

void resolve_device_limits(const MemoryLimitOptions& o, uint64_t device_memory, uint64_t& device,
                           uint64_t& session_device) {
    device = parse_memory_size(o.device, device_memory, "--device-memory-limit");
    session_device = parse_memory_size(o.session_device, device, "--session-device-memory-limit");
}

}  // namespace larmor::server
