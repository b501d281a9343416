#include "agent/rules.h"

#include <set>

#include <fmt/format.h>

namespace fragscope::agent {

const char* rule_name(Rule rule) {
  switch (rule) {
    case Rule::kFragmentation: return "fragmentation";
    case Rule::kAllocRetries: return "alloc_retries";
    case Rule::kHbmUsed: return "hbm_used";
    case Rule::kDataWait: return "data_wait";
  }
  return "unknown";
}

std::optional<Rule> parse_rule(std::string_view name) {
  for (Rule rule : kAllRules) {
    if (name == rule_name(rule)) return rule;
  }
  return std::nullopt;
}

RuleEvaluator::RuleEvaluator(Thresholds thresholds) : thresholds_(thresholds) {}

double RuleEvaluator::retries_per_minute(const RankView& rank, std::chrono::steady_clock::time_point now) {
  auto& history = retries_[rank.file_name];
  if (!history.empty() && history.back().second > rank.record.alloc_retries) history.clear();  // restarted
  history.emplace_back(now, rank.record.alloc_retries);
  while (history.size() > 1 && now - history[1].first >= thresholds_.retry_window) history.pop_front();
  const double increase = static_cast<double>(history.back().second - history.front().second);
  const double window_minutes = std::chrono::duration<double>(thresholds_.retry_window).count() / 60.0;
  return increase / window_minutes;
}

std::vector<Alert> RuleEvaluator::evaluate(const NodeView& view, std::chrono::steady_clock::time_point now) {
  std::vector<Alert> holding;
  auto check = [&](Rule rule, double value, double threshold, std::int32_t gpu, const RankView* rank,
                   std::string target) {
    if (!(value > threshold)) return;
    holding.push_back({rule, value, threshold, gpu, rank != nullptr ? std::optional(*rank) : std::nullopt,
                       std::move(target)});
  };
  std::set<std::string> live_ranks;
  for (const auto& rank : view.ranks) {
    const auto& r = rank.record;
    live_ranks.insert(rank.file_name);
    check(Rule::kFragmentation, r.fragmentation_ratio(), thresholds_.fragmentation_ratio, rank.gpu, &rank,
          rank.file_name);
    check(Rule::kAllocRetries, retries_per_minute(rank, now), thresholds_.alloc_retries_per_minute, rank.gpu,
          &rank, rank.file_name);
    check(Rule::kDataWait, r.data_wait_ratio, thresholds_.data_wait_ratio, rank.gpu, &rank, rank.file_name);
    if (!view.nvml.up && r.device_total_bytes > 0) {
      check(Rule::kHbmUsed, static_cast<double>(r.reserved_bytes) / static_cast<double>(r.device_total_bytes),
            thresholds_.hbm_used_ratio, rank.gpu, &rank, rank.file_name);
    }
  }
  for (const auto& gpu : view.nvml.gpus) {
    if (gpu.total_bytes == 0) continue;
    check(Rule::kHbmUsed, static_cast<double>(gpu.used_bytes) / static_cast<double>(gpu.total_bytes),
          thresholds_.hbm_used_ratio, static_cast<std::int32_t>(gpu.index), nullptr, fmt::format("gpu{}", gpu.index));
  }
  std::erase_if(retries_, [&](const auto& entry) { return !live_ranks.contains(entry.first); });

  std::map<std::pair<Rule, std::string>, std::chrono::steady_clock::time_point> still_holding;
  std::vector<Alert> firing;
  for (auto& alert : holding) {
    const auto key = std::make_pair(alert.rule, alert.target);
    const auto found = holding_since_.find(key);
    const auto since = found != holding_since_.end() ? found->second : now;
    still_holding.emplace(key, since);
    if (now - since >= thresholds_.hold_for) firing.push_back(std::move(alert));
  }
  holding_since_ = std::move(still_holding);
  return firing;
}

}  // namespace fragscope::agent
