#pragma once
// Server-wide counters, updated lock-free by every session and read by the status queries.
#include <atomic>
#include <chrono>
#include <cstdint>

namespace larmor::server {

struct ServerStats {
    const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
    std::atomic<uint64_t> sessions_active{0};
    std::atomic<uint64_t> sessions_total{0};
    std::atomic<uint64_t> sessions_rejected{0};  // over --max-sessions
    std::atomic<uint64_t> sessions_over_budget{0};  // refused at admission (memory_admission.h)
    std::atomic<uint64_t> connections_refused{0};    // from outside --allow
    std::atomic<uint64_t> tls_handshakes_failed{0};  // TLS clients not admitted (certificate, plain TCP, silence)
    std::atomic<uint64_t> acquisitions{0};
    std::atomic<uint64_t> waveforms{0};
    std::atomic<uint64_t> bytes_received{0};
    std::atomic<uint64_t> images_sent{0};
    std::atomic<uint64_t> errors{0};  // error TEXTs sent to clients

    double uptime_seconds() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    }
};

}  // namespace larmor::server
