#include "server/connection_slots.h"

namespace larmor::server {

ConnectionSlots::Verdict ConnectionSlots::add_pending(const std::string& address) {
    std::lock_guard<std::mutex> lock(m_);
    if (pending_ >= limits_.pending) return Verdict::ServerFull;
    if (!address.empty() && limits_.pending_per_address) {
        const auto it = by_address_.find(address);
        if (it != by_address_.end() && it->second.pending >= limits_.pending_per_address) return Verdict::AddressFull;
    }
    ++pending_;
    if (!address.empty()) ++by_address_[address].pending;
    stats_.connections_pending = pending_;
    return Verdict::Ok;
}

void ConnectionSlots::drop_pending(const std::string& address) {
    std::lock_guard<std::mutex> lock(m_);
    if (pending_) --pending_;
    if (!address.empty()) {
        const auto it = by_address_.find(address);
        if (it != by_address_.end()) {
            if (it->second.pending) --it->second.pending;
            forget_if_idle(it);
        }
    }
    stats_.connections_pending = pending_;
}

ConnectionSlots::Verdict ConnectionSlots::promote(const std::string& address, size_t& running) {
    std::lock_guard<std::mutex> lock(m_);
    if (sessions_ >= limits_.sessions) {
        running = sessions_;
        return Verdict::ServerFull;
    }
    if (!address.empty() && limits_.sessions_per_address) {
        const auto it = by_address_.find(address);
        const size_t here = it == by_address_.end() ? 0 : it->second.sessions;
        if (here >= limits_.sessions_per_address) {
            running = here;
            return Verdict::AddressFull;
        }
    }
    if (pending_) --pending_;
    ++sessions_;
    if (!address.empty()) {
        PerAddress& a = by_address_[address];
        if (a.pending) --a.pending;
        ++a.sessions;
    }
    stats_.connections_pending = pending_;
    stats_.sessions_active = sessions_;
    ++stats_.sessions_total;
    return Verdict::Ok;
}

void ConnectionSlots::end_session(const std::string& address) {
    std::lock_guard<std::mutex> lock(m_);
    if (sessions_) --sessions_;
    if (!address.empty()) {
        const auto it = by_address_.find(address);
        if (it != by_address_.end()) {
            if (it->second.sessions) --it->second.sessions;
            forget_if_idle(it);
        }
    }
    stats_.sessions_active = sessions_;
}

size_t ConnectionSlots::pending() const {
    std::lock_guard<std::mutex> lock(m_);
    return pending_;
}

size_t ConnectionSlots::sessions() const {
    std::lock_guard<std::mutex> lock(m_);
    return sessions_;
}

void ConnectionSlots::forget_if_idle(std::map<std::string, PerAddress>::iterator it) {
    if (it->second.pending == 0 && it->second.sessions == 0) by_address_.erase(it);
}

}  // namespace larmor::server
