#pragma once
/// @file agent.h
/// @brief The node agent: polls rank files and NVML, evaluates the rules, acts, serves metrics.

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <set>
#include <string>

#include "agent/actions.h"
#include "agent/agent_config.h"
#include "agent/checkpoint_acks.h"
#include "agent/node_metrics.h"
#include "agent/nvml.h"
#include "agent/rank_file_reader.h"
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

  /// @brief Serves /metrics and /healthz and polls every poll_interval until `stop` is set;
  /// logs the signals install_agent_signal_handlers() ignored. A poll that throws (a defect, or a
  /// resource gone) is logged, once per distinct reason, and the next poll is tried: metrics stay as
  /// the last poll left them and /healthz reports the polls missing.
  /// @throws InputError when the listen address cannot be bound.
  void run(const std::atomic<bool>& stop);

  const Nvml& nvml() const { return nvml_; }
  const MetricsPage& metrics_page() const { return page_; }

 private:
  /// @brief "" when healthy; else why not: no recent poll, or (degraded) an unreadable rank directory.
  std::string health_problem() const;
  /// @brief Logs what changed since the last poll: the rank directory's problem and warnings,
  /// and the files that entered a state other than ok (each once, not every poll).
  void report_scan(const RankScan& scan);
  /// @brief Logs when the owners whose ranks the caps leave out change (so a flood that goes on
  /// is logged once, when it starts, and once when it ends).
  void report_dropped_ranks(const NodeView& view);
  /// @brief poll(), its failure logged instead of ending run().
  void poll_or_log();

  AgentOptions options_;
  RankDirectoryScanner scanner_;
  Nvml nvml_;
  RuleEvaluator rules_;
  ActionDispatcher actions_;
  CheckpointAckCounter checkpoint_acks_;
  std::ostream& events_;
  MetricsPage page_;
  AgentStatus status_;
  std::chrono::steady_clock::time_point next_nvml_retry_;  ///< while NVML is down
  std::atomic<std::int64_t> last_poll_steady_ns_{0};
  mutable std::mutex rank_dir_problem_mutex_;
  std::string rank_dir_problem_;  ///< the last scan's, read by the HTTP thread
  std::string reported_problem_;
  std::string reported_poll_failure_;
  std::set<std::string> reported_warnings_;
  std::map<std::string, RankFileState> reported_files_;  ///< files not ok at the last poll
  std::set<uid_t> reported_owners_dropped_;
};

}  // namespace fragscope::agent
