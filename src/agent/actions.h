#pragma once
/// @file actions.h
/// @brief What the agent does about a firing alert: log an event, ask the rank to checkpoint,
/// run the configured drain command. All opt-in (but logging), rate-limited, with a dry run.

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/node_view.h"
#include "agent/rate_limiter.h"
#include "agent/rules.h"

namespace fragscope::agent {

enum class ActionKind { kLog, kCheckpoint, kDrain };
inline constexpr ActionKind kAllActions[] = {ActionKind::kLog, ActionKind::kCheckpoint, ActionKind::kDrain};
const char* action_name(ActionKind kind);

/// @brief What happened to one action attempt (the `outcome` label of the action counter).
enum class ActionOutcome { kExecuted, kDryRun, kRateLimited, kFailed };
inline constexpr ActionOutcome kAllOutcomes[] = {ActionOutcome::kExecuted, ActionOutcome::kDryRun,
                                                 ActionOutcome::kRateLimited, ActionOutcome::kFailed};
const char* outcome_name(ActionOutcome outcome);

/// @brief One action's switch, trigger rules, minimum interval between two goes per target,
/// and its own dry run (on top of the global one).
struct ActionPolicy {
  bool enabled = false;
  std::set<Rule> rules;
  std::chrono::seconds min_interval{600};
  bool dry_run = false;

  bool operator==(const ActionPolicy&) const = default;
};

/// @brief The [actions] table of the agent config.
struct ActionSettings {
  bool dry_run = false;  ///< every action: log what would be done, do nothing else
  ActionPolicy log{true, {Rule::kFragmentation, Rule::kAllocRetries, Rule::kHbmUsed, Rule::kDataWait},
                   std::chrono::seconds(60)};
  ActionPolicy checkpoint{false, {Rule::kFragmentation, Rule::kAllocRetries, Rule::kHbmUsed},
                          std::chrono::seconds(600)};
  ActionPolicy drain{false, {Rule::kHbmUsed}, std::chrono::seconds(3600)};
  /// argv of the drain command, run without a shell; placeholders {node} {rule} {gpu} {rank}
  /// {job} {pid} {value} are replaced argument by argument, each value checked first
  /// (is_safe_command_value).
  std::vector<std::string> drain_command;
  /// Drain on alerts that only rank files support (rank rules, or hbm_used without NVML). Any
  /// user on the node can write a rank file, so by default only NVML's own numbers drain a node.
  bool drain_on_rank_files = false;
  /// A drain command still running this long after it started is killed with its whole process
  /// group (it runs in one of its own), so one that hangs cannot block every later drain. The
  /// config's [actions.drain] timeout_seconds, 1 s to 24 h.
  std::chrono::seconds drain_timeout{600};

  bool operator==(const ActionSettings&) const = default;
};

/// @brief Each rate limiter forgets the keys of targets gone from the node (a rank file renamed,
/// removed or stale) once it holds more than this many keys: one key per rule and tracked rank
/// (kMaxRanksPerNode, rank_selection.h) fits, a stream of new file names does not grow it further.
inline constexpr std::size_t kMaxRateLimitKeys = 4096;

/// @brief True for a value that may replace a placeholder of the drain command: empty, or at most
/// 128 letters, digits, '.', '_', '+', '-', starting with a letter or digit. A rank file's `job`
/// of "../../x" would otherwise become a path, "--force" an option.
bool is_safe_command_value(std::string_view value);

/// @brief Runs actions for firing alerts. Not thread-safe: the poll loop owns it.
///
/// Events are JSON lines on `events` ({"event":"action",...}). A checkpoint request is the
/// file `<rank file>.checkpoint` beside the rank file, holding the request id: written to a
/// temp name created with O_EXCL|O_NOFOLLOW (a planted link is never followed), mode 0600 and
/// handed to the rank file's owner (or, where the agent may not chown, mode 0644: it holds
/// only a number), then renamed. The drain command runs with posix_spawnp (no shell), one at a
/// time, in a process group of its own and with no descriptor of the agent's but stdin, stdout
/// and stderr; its exit is logged by reap(). A drain on an alert only rank files support is
/// refused unless drain_on_rank_files is set.
class ActionDispatcher {
 public:
  ActionDispatcher(ActionSettings settings, std::filesystem::path rank_dir, std::string node, std::ostream& events);
  ~ActionDispatcher();
  ActionDispatcher(const ActionDispatcher&) = delete;
  ActionDispatcher& operator=(const ActionDispatcher&) = delete;

  /// @brief Acts on `alerts` (from the same poll as `view`). First forgets, in every rate limiter,
  /// the keys whose interval has passed and, past kMaxRateLimitKeys, those of targets not in `view`.
  void dispatch(const std::vector<Alert>& alerts, const NodeView& view, std::chrono::steady_clock::time_point now);

  /// @brief Collects a finished drain command, if any, and logs its exit status; kills the process
  /// group of one running for more than drain_timeout at `now` (and collects it at a later call,
  /// once it is gone: reap() never waits).
  void reap(std::chrono::steady_clock::time_point now);

  /// @brief Removes checkpoint requests (and leftover temp files) of ranks that are gone: whose
  /// rank file is not in `present` (the names of this poll's rank files, stale ones left out).
  /// A rank that died before acting on its request would otherwise leave the flag forever.
  /// Only while checkpoints are enabled and not dry; only regular files among `checkpoint_files`
  /// (RankScan::checkpoint_files) that this agent wrote, or that belong to the agent's user (at
  /// the top level) or to the folder's owner (in a per-user folder); never through a link.
  /// The rank's checkpoint rate limit goes with its request: a rank that was only stale for a
  /// while (stopped, starved of CPU) is asked again when it comes back still firing. What the
  /// dispatcher remembers of gone ranks (request ids; files it wrote that are no longer listed)
  /// is dropped too.
  void remove_requests_of_gone_ranks(const std::set<std::string>& present,
                                     const std::vector<std::string>& checkpoint_files);

  /// @brief Action attempts so far, by action and outcome.
  std::uint64_t count(ActionKind kind, ActionOutcome outcome) const;

  /// @brief Entries the dispatcher keeps across polls (rate-limit keys, request ids, files
  /// written): bounded by the tracked ranks and kMaxRateLimitKeys, whatever comes and goes.
  std::size_t remembered() const;

 private:
  void act(ActionKind kind, const Alert& alert, const std::string& key, const NodeView& view,
           std::chrono::steady_clock::time_point now);
  bool request_checkpoint(const RankView& rank, std::string& detail);
  /// The drain command with its placeholders replaced (what runs, and what a dry run logs), or
  /// nullopt with `refusal` set when a value it uses is not is_safe_command_value.
  std::optional<std::vector<std::string>> drain_arguments(const Alert& alert, std::string& refusal) const;
  bool run_drain(const Alert& alert, std::chrono::steady_clock::time_point now, std::string& detail);
  bool may_remove(const std::string& name) const;
  void prune_rate_limits(const NodeView& view, std::chrono::steady_clock::time_point now);
  void emit(ActionKind kind, ActionOutcome outcome, const Alert& alert, const std::string& detail);

  ActionSettings settings_;
  std::filesystem::path rank_dir_;
  std::string node_;
  std::ostream& events_;
  std::map<ActionKind, RateLimiter> limiters_;
  RateLimiter refused_drains_;  ///< one event per target and log interval for refused drains
  std::map<std::string, std::uint64_t> checkpoint_ids_;  ///< last id written, by rank file
  std::map<std::string, std::pair<dev_t, ino_t>> written_;  ///< checkpoint files this agent wrote
  pid_t drain_pid_ = -1;
  std::chrono::steady_clock::time_point drain_started_;
  bool drain_killed_ = false;
  std::array<std::array<std::uint64_t, 4>, 3> counts_{};
};

}  // namespace fragscope::agent
