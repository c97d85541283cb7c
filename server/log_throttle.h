#pragma once
// Bounds how many lines one kind of event writes to the log: a client outside --allow that
// reconnects in a loop (or a port scan) must not fill the disk. Up to `burst` events per `window`
// are logged; later ones in the same window are only counted, and the next logged line says how
// many were left out. Used on the accepting thread only.
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace larmor::server {

class LogThrottle {
public:
    using Clock = std::chrono::steady_clock;

    LogThrottle(size_t burst, Clock::duration window) : burst_(burst), window_(window) {}

    // True when the event at `now` may be logged; `left_out` is then the number of events not logged
    // since the previous logged one (to be mentioned in this line).
    bool allow(uint64_t& left_out, Clock::time_point now = Clock::now()) {
        if (logged_ == 0 || now - window_start_ >= window_) {
            window_start_ = now;
            logged_ = 0;
        }
        if (logged_ >= burst_) {
            ++suppressed_;
            return false;
        }
        ++logged_;
        left_out = suppressed_;
        suppressed_ = 0;
        return true;
    }

private:
    const size_t burst_;
    const Clock::duration window_;
    Clock::time_point window_start_{};
    size_t logged_ = 0;
    uint64_t suppressed_ = 0;
};

}  // namespace larmor::server
