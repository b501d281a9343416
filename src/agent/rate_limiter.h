#pragma once
/// @file rate_limiter.h
/// @brief At most one go per key per interval: the guard in front of every agent action.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

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

  /// @brief Forgets the keys whose interval has passed (they would go ahead anyway); then, while
  /// more than `max_keys` remain, the longest-held keys that `is_live` rejects (their target left
  /// the node): a stream of short-lived targets costs bounded memory, and a live target's
  /// interval is never cut short. Afterwards at most max(`max_keys`, live keys) remain.
  void prune(std::chrono::steady_clock::time_point now, std::size_t max_keys,
             const std::function<bool(const std::string&)>& is_live) {
    std::erase_if(last_, [&](const auto& entry) { return now - entry.second >= interval_; });
    if (last_.size() <= max_keys) return;
    std::vector<std::map<std::string, std::chrono::steady_clock::time_point>::const_iterator> gone;
    for (auto it = last_.cbegin(); it != last_.cend(); ++it) {
      if (!is_live(it->first)) gone.push_back(it);
    }
    const std::size_t excess = std::min(last_.size() - max_keys, gone.size());
    std::nth_element(gone.begin(), gone.begin() + static_cast<std::ptrdiff_t>(excess), gone.end(),
                     [](const auto& a, const auto& b) { return a->second < b->second; });
    for (std::size_t i = 0; i < excess; ++i) last_.erase(gone[i]);
  }

  /// @brief Keys remembered.
  std::size_t size() const { return last_.size(); }

 private:
  std::chrono::seconds interval_;
  std::map<std::string, std::chrono::steady_clock::time_point> last_;
};

}  // namespace fragscope::agent
