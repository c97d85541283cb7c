#pragma once
// Server-wide counters, updated lock-free by every session and read by the status queries.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace larmor::server {

struct ServerStats {
    const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
    std::atomic<uint64_t> sessions_active{0};  // holding a --max-sessions slot (connection_slots.h)
    std::atomic<uint64_t> connections_pending{0};  // connected, no chain config yet
    std::atomic<uint64_t> pending_refused{0};  // over --max-pending-connections / --max-pending-per-address
    std::atomic<uint64_t> pending_timed_out{0};  // silent until the handshake deadline
    std::atomic<uint64_t> sessions_total{0};
    std::atomic<uint64_t> sessions_rejected{0};  // over --max-sessions (when they asked for a chain)
    std::atomic<uint64_t> sessions_over_budget{0};  // refused at admission (memory_admission.h)
    std::atomic<uint64_t> connections_refused{0};    // from outside --allow
    std::atomic<uint64_t> per_address_refused{0};    // over --max-sessions-per-address
    std::atomic<uint64_t> tls_handshakes_failed{0};  // TLS clients not admitted (certificate, plain TCP, silence)
    std::atomic<uint64_t> acquisitions{0};
    std::atomic<uint64_t> waveforms{0};
    std::atomic<uint64_t> bytes_received{0};
    std::atomic<uint64_t> images_sent{0};
    std::atomic<uint64_t> errors{0};  // error TEXTs sent to clients
    std::atomic<uint64_t> sessions_failed{0};  // sessions that ended with at least one error

    double uptime_seconds() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    }
};

// The last few errors sent to clients, for the status page (server/http_status.h).
class RecentErrors {
public:
    struct Entry {
        std::chrono::system_clock::time_point when;
        std::string session;
        std::string text;
    };
    static constexpr size_t kKept = 10;

    void add(const std::string& session, const std::string& text) {
        std::lock_guard<std::mutex> g(lock_);
        entries_.push_back(Entry{std::chrono::system_clock::now(), session, text.substr(0, 500)});
        if (entries_.size() > kKept) entries_.pop_front();
    }
    std::vector<Entry> newest_first() const {
        std::lock_guard<std::mutex> g(lock_);
        return std::vector<Entry>(entries_.rbegin(), entries_.rend());
    }

private:
    mutable std::mutex lock_;
    std::deque<Entry> entries_;
};

}  // namespace larmor::server
