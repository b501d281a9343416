#pragma once
/// @file rules.h
/// @brief The agent's alert thresholds and their evaluation over successive node views.
/// deploy/prometheus/rules.yaml states the same thresholds as Prometheus alerting rules.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/node_view.h"

namespace fragscope::agent {

/// @brief The four conditions the issue names. Rank rules fire per rank, kHbmUsed per GPU
/// (per rank, from its own reserved/total view, when NVML is down).
enum class Rule { kFragmentation, kAllocRetries, kHbmUsed, kDataWait };
inline constexpr Rule kAllRules[] = {Rule::kFragmentation, Rule::kAllocRetries, Rule::kHbmUsed, Rule::kDataWait};

/// @brief Config and label name: "fragmentation", "alloc_retries", "hbm_used", "data_wait".
const char* rule_name(Rule rule);
/// @brief The inverse of rule_name. @return nullopt for an unknown name.
std::optional<Rule> parse_rule(std::string_view name);

/// @brief Thresholds; each rule fires when its value stays above the threshold for hold_for.
struct Thresholds {
  double fragmentation_ratio = 0.25;       ///< inactive_split_bytes / reserved_bytes
  double alloc_retries_per_minute = 1.0;   ///< retries in retry_window, per minute
  std::chrono::seconds retry_window{300};
  double hbm_used_ratio = 0.90;            ///< NVML used / total
  double data_wait_ratio = 0.10;           ///< the hook's windowed data-wait ratio
  std::chrono::seconds hold_for{120};

  bool operator==(const Thresholds&) const = default;
};

/// @brief A rule holding (for at least hold_for) on one target.
struct Alert {
  Rule rule = Rule::kFragmentation;
  double value = 0;
  double threshold = 0;
  std::int32_t gpu = -1;                ///< the GPU concerned, -1 unknown
  std::optional<RankView> rank;         ///< set for rank-scoped alerts
  std::string target;                   ///< "gpu3" or the rank file name: the rate-limit key
};

/// @brief Remembers, across polls, since when each (rule, target) holds and each rank's retry
/// counter history. Not thread-safe: one poll loop owns it.
class RuleEvaluator {
 public:
  explicit RuleEvaluator(Thresholds thresholds);

  /// @brief Alerts that hold at `now` and have held for hold_for. Targets that vanished from
  /// the view are forgotten.
  std::vector<Alert> evaluate(const NodeView& view, std::chrono::steady_clock::time_point now);

  const Thresholds& thresholds() const { return thresholds_; }

 private:
  double retries_per_minute(const RankView& rank, std::chrono::steady_clock::time_point now);

  Thresholds thresholds_;
  std::map<std::pair<Rule, std::string>, std::chrono::steady_clock::time_point> holding_since_;
  std::map<std::string, std::deque<std::pair<std::chrono::steady_clock::time_point, std::uint64_t>>> retries_;
};

}  // namespace fragscope::agent
