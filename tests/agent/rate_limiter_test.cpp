// The actions' rate limit: one go per key and interval, and memory bounded however many keys
// come and go.
#include "agent/rate_limiter.h"

#include <string>

#include <gtest/gtest.h>

namespace fragscope::agent {
namespace {

using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

TEST(RateLimiter, OneGoPerKeyAndInterval) {
  RateLimiter limiter(seconds(60));
  const auto t0 = Clock::time_point{} + seconds(1000);
  EXPECT_TRUE(limiter.try_acquire("a", t0));
  EXPECT_FALSE(limiter.try_acquire("a", t0 + seconds(59)));
  EXPECT_TRUE(limiter.try_acquire("b", t0 + seconds(59)));
  EXPECT_TRUE(limiter.try_acquire("a", t0 + seconds(60)));
  limiter.forget("a");
  EXPECT_TRUE(limiter.try_acquire("a", t0 + seconds(61)));
}

TEST(RateLimiter, PruneForgetsWhatHasExpiredAndNothingThatHolds) {
  RateLimiter limiter(seconds(60));
  const auto t0 = Clock::time_point{} + seconds(1000);
  limiter.try_acquire("old", t0);
  limiter.try_acquire("recent", t0 + seconds(30));
  limiter.prune(t0 + seconds(60), 100, [](const std::string&) { return false; });
  EXPECT_EQ(limiter.size(), 1u);
  EXPECT_FALSE(limiter.try_acquire("recent", t0 + seconds(60)));  // still within its interval
}

// Before: 40 rounds of 500 new target names (renamed rank files) grew the log limiter by 20,000
// keys of up to 255 characters each (28 MB) although no rank was left on the node.
TEST(RateLimiter, AStreamOfGoneTargetsStaysWithinTheBoundAndLiveTargetsKeepTheirHold) {
  RateLimiter limiter(seconds(3600));
  const auto t0 = Clock::time_point{} + seconds(1000);
  limiter.try_acquire("fragmentation/live", t0);
  const std::string padding(200, 'x');
  const auto live = [](const std::string& key) { return key == "fragmentation/live"; };
  for (int round = 0; round < 40; ++round) {
    const auto now = t0 + seconds(round + 1);
    for (int i = 0; i < 500; ++i) limiter.try_acquire(padding + std::to_string(round * 500 + i), now);
    limiter.prune(now, 1000, live);
    EXPECT_LE(limiter.size(), 1000u);
  }
  EXPECT_FALSE(limiter.try_acquire("fragmentation/live", t0 + seconds(100)));
  // The newest gone keys are the ones kept: a target back within its interval still waits.
  EXPECT_FALSE(limiter.try_acquire(padding + "19999", t0 + seconds(100)));
}

TEST(RateLimiter, LiveKeysAreKeptEvenBeyondTheBound) {
  RateLimiter limiter(seconds(3600));
  const auto t0 = Clock::time_point{} + seconds(1000);
  for (int i = 0; i < 10; ++i) limiter.try_acquire(std::to_string(i), t0);
  limiter.prune(t0, 4, [](const std::string&) { return true; });
  EXPECT_EQ(limiter.size(), 10u);
}

}  // namespace
}  // namespace fragscope::agent
