#pragma once
/// @file node_metrics.h
/// @brief The agent's Prometheus metrics (docs/monitor.md explains each one) and the page that
/// serves the latest poll.

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <prometheus/metric_family.h>

#include "agent/actions.h"
#include "agent/node_view.h"
#include "agent/rules.h"

namespace fragscope::agent {

/// @brief The agent's own state at one poll, served beside the node's.
struct AgentStatus {
  std::array<std::size_t, 4> alerts_by_rule{};  ///< firing targets, indexed by Rule
  std::array<std::array<std::uint64_t, 4>, 3> actions{};  ///< [ActionKind][ActionOutcome]
  std::uint64_t polls = 0;
  std::map<std::string, std::uint64_t> checkpoint_acks;  ///< by rank file name (CheckpointAckCounter)
};

/// @brief Every metric family for one poll, all names prefixed `fragscope_`, base units.
/// Rank series carry the labels training_job, rank, gpu (one series set per training job and
/// rank: the most recently updated file wins); GPU series carry gpu.
std::vector<prometheus::MetricFamily> node_metric_families(const NodeView& view, const AgentStatus& status);

/// @brief The /metrics page: rendered once per poll (Prometheus text format, prometheus-cpp's
/// TextSerializer), served as is by every scrape, so a scrape costs a copy, not a render.
///
/// Thread-safety: publish() (poll loop) and text() (HTTP threads) may run concurrently.
class MetricsPage {
 public:
  void publish(const NodeView& view, const AgentStatus& status);
  /// @brief The latest rendered page ("" before the first publish()).
  std::shared_ptr<const std::string> text() const;

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const std::string> text_ = std::make_shared<const std::string>();
};

}  // namespace fragscope::agent
