#include "core/fault_injection.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace larmor {
namespace {

struct Plan {
    uint64_t host_alloc = 0, device_alloc = 0;  // 0: never
    bool cuda_backend = false;
};

Plan parse(const char* text) {
    Plan p;
    if (!text) return p;
    std::string s(text);
    size_t pos = 0;
    while (pos <= s.size()) {
        const size_t end = std::min(s.find(',', pos), s.size());
        const std::string item = s.substr(pos, end - pos);
        pos = end + 1;
        if (item.empty()) continue;
        const size_t colon = item.find(':');
        const std::string key = item.substr(0, colon);
        uint64_t n = 0;
        if (colon != std::string::npos) {
            try {
                n = std::stoull(item.substr(colon + 1));
            } catch (const std::exception&) {
                n = 0;
            }
        }
        if (key == "cuda-backend" && colon == std::string::npos) p.cuda_backend = true;
        else if (key == "host-alloc" && n) p.host_alloc = n;
        else if (key == "device-alloc" && n) p.device_alloc = n;
        else std::fprintf(stderr, "LARMOR_FAULT_INJECTION: ignoring '%s'\n", item.c_str());
    }
    return p;
}

const Plan& plan() {
    static const Plan p = parse(std::getenv("LARMOR_FAULT_INJECTION"));
    return p;
}

bool nth_call(std::atomic<uint64_t>& calls, uint64_t n) { return n && calls.fetch_add(1) + 1 == n; }

}  // namespace

bool inject_fault(FaultSite site) {
    static std::atomic<uint64_t> host{0}, device{0};
    const Plan& p = plan();
    switch (site) {
        case FaultSite::HostAlloc: return nth_call(host, p.host_alloc);
        case FaultSite::DeviceAlloc: return nth_call(device, p.device_alloc);
        case FaultSite::CudaBackend: return p.cuda_backend;
    }
    return false;
}

}  // namespace larmor
