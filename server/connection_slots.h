#pragma once
// Who holds what of the server, by client address: pending connections (connected, no chain config
// yet) and sessions (a chain config came: one of --max-sessions). A connection takes a session slot
// only when it asks for a chain, so connections that are silent, trickle their first bytes or only
// query the server (larmor::status, gadgetron::info) never keep a scan out (issue 19, finding 6); they
// are bounded on their own (--max-pending-connections, --max-pending-per-address) and by the
// handshake deadline. Thread-safe: the accepting thread adds pending connections, session threads
// promote and release them.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "server/stats.h"

namespace larmor::server {

struct SlotLimits {
    size_t sessions = 64;              // --max-sessions
    size_t sessions_per_address = 0;   // --max-sessions-per-address; 0: none
    size_t pending = 1024;             // --max-pending-connections
    size_t pending_per_address = 0;    // --max-pending-per-address; 0: none
};

class ConnectionSlots {
public:
    // `stats`: sessions_active and connections_pending follow the slots (it must outlive this).
    ConnectionSlots(SlotLimits limits, ServerStats& stats) : limits_(limits), stats_(stats) {}

    enum class Verdict { Ok, ServerFull, AddressFull };

    // A new connection from `address` (empty: unknown, counted only in the totals).
    Verdict add_pending(const std::string& address);
    // A pending connection ended without becoming a session.
    void drop_pending(const std::string& address);
    // The pending connection asks for a chain: it becomes a session, or stays pending when the server or
    // its address is at its session limit. `running` is then how many sessions the refusing limit counts.
    Verdict promote(const std::string& address, size_t& running);
    // A session gave its slot back.
    void end_session(const std::string& address);

    const SlotLimits& limits() const { return limits_; }
    size_t pending() const;
    size_t sessions() const;

private:
    struct PerAddress {
        size_t pending = 0, sessions = 0;
    };
    void forget_if_idle(std::map<std::string, PerAddress>::iterator it);

    const SlotLimits limits_;
    ServerStats& stats_;
    mutable std::mutex m_;
    size_t pending_ = 0, sessions_ = 0;
    std::map<std::string, PerAddress> by_address_;  // only addresses that hold something
};

}  // namespace larmor::server
