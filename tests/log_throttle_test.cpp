// LogThrottle (server/log_throttle.h): a burst per window is logged, the rest counted and reported.
#include <gtest/gtest.h>

#include "server/log_throttle.h"

namespace larmor::server {
namespace {

using namespace std::chrono_literals;

TEST(LogThrottle, LogsABurstPerWindowAndCountsTheRest) {
    LogThrottle throttle(3, 10s);
    const auto t0 = LogThrottle::Clock::time_point{} + 1000s;
    uint64_t left_out = 99;
    for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE(throttle.allow(left_out, t0 + std::chrono::seconds(i)));
        EXPECT_EQ(left_out, 0u);
    }
    for (int i = 0; i < 5; ++i) EXPECT_FALSE(throttle.allow(left_out, t0 + 9s));
    // A new window: logged again, with the five left out before it.
    ASSERT_TRUE(throttle.allow(left_out, t0 + 10s));
    EXPECT_EQ(left_out, 5u);
    ASSERT_TRUE(throttle.allow(left_out, t0 + 11s));
    EXPECT_EQ(left_out, 0u);
}

TEST(LogThrottle, QuietPeriodsNeverSuppress) {
    LogThrottle throttle(1, 10s);
    const auto t0 = LogThrottle::Clock::time_point{} + 1000s;
    uint64_t left_out = 0;
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(throttle.allow(left_out, t0 + std::chrono::seconds(10 * i)));
    EXPECT_FALSE(throttle.allow(left_out, t0 + 41s));
}

}  // namespace
}  // namespace larmor::server
