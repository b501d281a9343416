#pragma once
/// @file node_metrics.h
/// @brief The agent's Prometheus metrics (docs/monitor.md explains each one) and the page that
/// serves the latest poll.

#include <array>
#include <cstdint>
#include <functional>
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

/// @brief Every metric family for one poll, all names prefixed `fragscope_`, base units, handed to
/// `sink` one at a time. Rank series (one set per tracked rank, NodeView::ranks) carry the labels
/// training_job, rank, gpu and uid (the rank file's owner); GPU series carry gpu.
void for_each_metric_family(const NodeView& view, const AgentStatus& status,
                            const std::function<void(prometheus::MetricFamily&&)>& sink);

/// @brief The families of for_each_metric_family(), collected.
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
