#include "agent/agent.h"

#include <unistd.h>

#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agent/event_log.h"
#include "agent/metrics_endpoint.h"
#include "agent/node_view.h"
#include "agent/rank_selection.h"
#include "agent/signals.h"
#include "http/server.h"

namespace fragscope::agent {
namespace {

std::uint64_t unix_ns_now() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

// Pages held for clients still reading them: two of the largest the rank caps allow (about 8 MB,
// rank_selection.h), so clients that stop reading cannot make the agent keep one old page each.
constexpr std::size_t kMaxPageBytesInFlight = std::size_t{16} << 20;

// A driver that was not ready when the agent started (loading, upgrading) is tried again this often.
constexpr std::chrono::seconds kNvmlRetryInterval{60};

std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string();
}

std::int64_t steady_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

Agent::Agent(AgentOptions options, AgentConfig config, std::ostream& events)
    : options_(std::move(options)),
      scanner_(options_.rank_dir),
      nvml_(options_.nvml_library),
      rules_(config.thresholds),
      actions_(config.actions, options_.rank_dir, options_.node, events),
      events_(events),
      next_nvml_retry_(std::chrono::steady_clock::now() + kNvmlRetryInterval) {
  nlohmann::json start{{"event", "start"},
                       {"rank_dir", options_.rank_dir.string()},
                       {"nvml_up", nvml_.up()},
                       {"dry_run", config.actions.dry_run}};
  if (!nvml_.up()) start["nvml_problem"] = nvml_.problem();
  events_ << event_line(start) << std::flush;
}

void Agent::poll() {
  const auto started = std::chrono::steady_clock::now();
  const std::uint64_t now_ns = unix_ns_now();
  RankScan scan = scanner_.scan(now_ns, options_.stale_after);
  {
    std::lock_guard lock(rank_dir_problem_mutex_);
    rank_dir_problem_ = scan.problem;
  }
  report_scan(scan);
  std::set<std::string> present;
  for (const auto& reading : scan.readings) {
    if (reading.state != RankFileState::kStale) present.insert(reading.name);
  }
  actions_.remove_requests_of_gone_ranks(present, scan.checkpoint_files);
  if (!nvml_.up() && started >= next_nvml_retry_) {
    next_nvml_retry_ = started + kNvmlRetryInterval;
    if (nvml_.retry()) events_ << event_line(nlohmann::json{{"event", "nvml"}, {"nvml_up", true}}) << std::flush;
  }
  NodeView view = make_node_view(now_ns, std::move(scan.readings), nvml_.sample());
  view.rank_files_unread = scan.files_unread;
  report_dropped_ranks(view);
  view.scan_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  const auto alerts = rules_.evaluate(view, started);
  actions_.reap(started);
  actions_.dispatch(alerts, view, started);

  status_.alerts_by_rule.fill(0);
  for (const auto& alert : alerts) ++status_.alerts_by_rule[static_cast<std::size_t>(alert.rule)];
  for (ActionKind kind : kAllActions) {
    for (ActionOutcome outcome : kAllOutcomes) {
      status_.actions[static_cast<std::size_t>(kind)][static_cast<std::size_t>(outcome)] =
          actions_.count(kind, outcome);
    }
  }
  checkpoint_acks_.observe(view);
  status_.checkpoint_acks = checkpoint_acks_.counts();
  ++status_.polls;
  page_.publish(view, status_);
  last_poll_steady_ns_.store(steady_ns(std::chrono::steady_clock::now()));
}

void Agent::report_scan(const RankScan& scan) {
  auto log = [this](const nlohmann::json& event) { events_ << event_line(event); };
  if (scan.problem != reported_problem_) {
    log({{"event", "rank_dir"}, {"path", options_.rank_dir.string()},
         {"problem", scan.problem.empty() ? "none (readable again)" : scan.problem}});
    reported_problem_ = scan.problem;
  }
  std::set<std::string> warnings(scan.warnings.begin(), scan.warnings.end());
  for (const auto& warning : warnings) {
    if (!reported_warnings_.contains(warning)) log({{"event", "rank_dir_warning"}, {"warning", warning}});
  }
  reported_warnings_ = std::move(warnings);
  // A flood of bad files must not flood the log: the first kMaxFileEvents per poll, then a count.
  constexpr std::size_t kMaxFileEvents = 100;
  std::map<std::string, RankFileState> troubled;
  std::size_t logged = 0;
  for (const auto& reading : scan.readings) {
    if (reading.state == RankFileState::kOk) continue;
    troubled.emplace(reading.name, reading.state);
    const auto before = reported_files_.find(reading.name);
    if (before != reported_files_.end() && before->second == reading.state) continue;
    if (logged++ < kMaxFileEvents) {
      log({{"event", "rank_file"}, {"file", reading.name}, {"state", state_name(reading.state)},
           {"problem", reading.problem}});
    }
  }
  if (logged > kMaxFileEvents) log({{"event", "rank_file"}, {"more_files", logged - kMaxFileEvents}});
  reported_files_ = std::move(troubled);
  events_ << std::flush;
}

void Agent::report_dropped_ranks(const NodeView& view) {
  if (view.owners_dropped == reported_owners_dropped_) return;
  nlohmann::json event{{"event", "ranks_dropped"}, {"dropped", view.ranks_dropped}};
  if (view.owners_dropped.empty()) {
    event["detail"] = "every live rank is tracked again";
  } else {
    event["owners"] = view.owners_dropped;
    event["detail"] = fmt::format("over the caps of {} ranks per node and {} per owner; fragscope_ranks_dropped "
                                  "counts them at every poll",
                                  kMaxRanksPerNode, kMaxRanksPerOwner);
  }
  events_ << event_line(event) << std::flush;
  reported_owners_dropped_ = view.owners_dropped;
}

std::string Agent::health_problem() const {
  const auto last = last_poll_steady_ns_.load();
  if (last == 0) return "no poll has completed yet";
  const auto age = std::chrono::nanoseconds(steady_ns(std::chrono::steady_clock::now()) - last);
  const auto limit = 3 * options_.poll_interval + std::chrono::seconds(5);
  if (age > limit) {
    return fmt::format("last poll {:.1f} s ago", std::chrono::duration<double>(age).count());
  }
  std::lock_guard lock(rank_dir_problem_mutex_);
  return rank_dir_problem_.empty() ? "" : "degraded: " + rank_dir_problem_;
}

void Agent::poll_or_log() {
  try {
    poll();
    reported_poll_failure_.clear();
  } catch (const std::exception& error) {
    if (error.what() == reported_poll_failure_) return;
    reported_poll_failure_ = error.what();
    events_ << event_line({{"event", "poll_failed"}, {"detail", reported_poll_failure_}}) << std::flush;
  }
}

void Agent::run(const std::atomic<bool>& stop) {
  http::Limits limits;
  limits.max_body_bytes_in_flight = kMaxPageBytesInFlight;
  http::Server server(options_.listen,
                      metrics_endpoint(page_, [this] { return health_problem(); }, {options_.node, host_name()}),
                      limits);
  poll_or_log();
  events_ << event_line({{"event", "listening"}, {"address", options_.listen}, {"port", server.port()}})
          << std::flush;
  auto next = std::chrono::steady_clock::now() + options_.poll_interval;
  while (!stop.load()) {
    for (const int signal_number : take_ignored_signals()) {
      events_ << event_line({{"event", "signal"},
                             {"signal", signal_name(signal_number)},
                             {"action", "ignored: the config is read at start; restart the agent to change it"}})
              << std::flush;
    }
    // Sleep in short slices so a signal's stop flag is seen quickly.
    const auto now = std::chrono::steady_clock::now();
    if (now < next) {
      std::this_thread::sleep_for(
          std::min<std::chrono::steady_clock::duration>(next - now, std::chrono::milliseconds(50)));
      continue;
    }
    poll_or_log();
    next += options_.poll_interval;
    if (next < std::chrono::steady_clock::now()) next = std::chrono::steady_clock::now() + options_.poll_interval;
  }
  events_ << event_line(nlohmann::json{{"event", "stop"}}) << std::flush;
}

}  // namespace fragscope::agent
