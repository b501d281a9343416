#pragma once
/// @file agent.h
/// @brief The node agent: polls rank files and NVML, evaluates the rules, acts, serves metrics.

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>

#include "agent/actions.h"
#include "agent/agent_config.h"
#include "agent/checkpoint_acks.h"
#include "agent/node_metrics.h"
#include "agent/nvml.h"
#include "agent/rules.h"

namespace fragscope::agent {

/// @brief The agent's command-line settings (the config file holds thresholds and actions).
struct AgentOptions {
  std::string listen = "127.0.0.1:9478";
  std::filesystem::path rank_dir = "/dev/shm/fragscope";
  std::chrono::milliseconds poll_interval{1000};
  std::chrono::seconds stale_after{60};
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string node;  ///< {node} in the drain command
};

/// @brief One agent per node. poll() is the whole job; run() repeats it and serves HTTP.
///
/// Thread-safety: poll() and run() belong to one thread; the HTTP threads only read the
/// published MetricsPage.
class Agent {
 public:
  /// @param events JSON-lines sink for alerts, actions and drain exits; must outlive the agent.
  Agent(AgentOptions options, AgentConfig config, std::ostream& events);

  /// @brief One poll: scan rank files, sample NVML, evaluate rules, act, publish metrics.
  void poll();

  /// @brief Serves /metrics and /healthz and polls every poll_interval until `stop` is set.
  /// @throws InputError when the listen address cannot be bound.
  void run(const std::atomic<bool>& stop);

  const Nvml& nvml() const { return nvml_; }
  const MetricsPage& metrics_page() const { return page_; }

 private:
  std::string health_problem() const;

  AgentOptions options_;
  Nvml nvml_;
  RuleEvaluator rules_;
  ActionDispatcher actions_;
  CheckpointAckCounter checkpoint_acks_;
  std::ostream& events_;
  MetricsPage page_;
  AgentStatus status_;
  std::atomic<std::int64_t> last_poll_steady_ns_{0};
};

}  // namespace fragscope::agent
