#pragma once
/// @file rate_limiter.h
/// @brief At most one go per key per interval: the guard in front of every agent action.

#include <chrono>
#include <map>
#include <string>

namespace fragscope::agent {

/// @brief Remembers when each key last went ahead. Not thread-safe (one poll loop owns it).
class RateLimiter {
 public:
  explicit RateLimiter(std::chrono::seconds interval) : interval_(interval) {}

  /// @brief True, and records `now`, when `key` has not gone ahead within the interval.
  bool try_acquire(const std::string& key, std::chrono::steady_clock::time_point now) {
    const auto found = last_.find(key);
    if (found != last_.end() && now - found->second < interval_) return false;
    last_[key] = now;
    return true;
  }

  /// @brief Lets `key` go ahead at its next try, as if it had never gone.
  void forget(const std::string& key) { last_.erase(key); }

 private:
  std::chrono::seconds interval_;
  std::map<std::string, std::chrono::steady_clock::time_point> last_;
};

}  // namespace fragscope::agent
