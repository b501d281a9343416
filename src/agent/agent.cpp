#include "agent/agent.h"

#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agent/http_server.h"
#include "agent/node_view.h"

namespace fragscope::agent {
namespace {

std::uint64_t unix_ns_now() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

std::int64_t steady_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

Agent::Agent(AgentOptions options, AgentConfig config, std::ostream& events)
    : options_(std::move(options)),
      nvml_(options_.nvml_library),
      rules_(config.thresholds),
      actions_(config.actions, options_.rank_dir, options_.node, events),
      events_(events) {
  nlohmann::json start{{"event", "start"},
                       {"rank_dir", options_.rank_dir.string()},
                       {"nvml_up", nvml_.up()},
                       {"dry_run", config.actions.dry_run}};
  if (!nvml_.up()) start["nvml_problem"] = nvml_.problem();
  events_ << start.dump() << '\n' << std::flush;
}

void Agent::poll() {
  const auto started = std::chrono::steady_clock::now();
  const std::uint64_t now_ns = unix_ns_now();
  auto readings = scan_rank_directory(options_.rank_dir, now_ns, options_.stale_after);
  std::set<std::string> present;
  for (const auto& reading : readings) {
    if (reading.state != RankFileState::kStale) present.insert(reading.path.filename().string());
  }
  actions_.remove_requests_of_gone_ranks(present);
  NodeView view = make_node_view(now_ns, std::move(readings), nvml_.sample());
  view.scan_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  const auto alerts = rules_.evaluate(view, started);
  actions_.reap();
  actions_.dispatch(alerts, view, started);

  status_.alerts_by_rule.fill(0);
  for (const auto& alert : alerts) ++status_.alerts_by_rule[static_cast<std::size_t>(alert.rule)];
  for (ActionKind kind : kAllActions) {
    for (ActionOutcome outcome : kAllOutcomes) {
      status_.actions[static_cast<std::size_t>(kind)][static_cast<std::size_t>(outcome)] = actions_.count(kind, outcome);
    }
  }
  checkpoint_acks_.observe(view);
  status_.checkpoint_acks = checkpoint_acks_.counts();
  ++status_.polls;
  page_.publish(view, status_);
  last_poll_steady_ns_.store(steady_ns(std::chrono::steady_clock::now()));
}

std::string Agent::health_problem() const {
  const auto last = last_poll_steady_ns_.load();
  if (last == 0) return "no poll has completed yet";
  const auto age = std::chrono::nanoseconds(steady_ns(std::chrono::steady_clock::now()) - last);
  const auto limit = 3 * options_.poll_interval + std::chrono::seconds(5);
  if (age > limit) {
    return fmt::format("last poll {:.1f} s ago", std::chrono::duration<double>(age).count());
  }
  return "";
}

void Agent::run(const std::atomic<bool>& stop) {
  HttpServer server(options_.listen, page_, [this] { return health_problem(); });
  poll();
  events_ << nlohmann::json{{"event", "listening"}, {"address", options_.listen}, {"port", server.port()}}.dump()
          << '\n' << std::flush;
  auto next = std::chrono::steady_clock::now() + options_.poll_interval;
  while (!stop.load()) {
    // Sleep in short slices so a signal's stop flag is seen quickly.
    const auto now = std::chrono::steady_clock::now();
    if (now < next) {
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(next - now, std::chrono::milliseconds(50)));
      continue;
    }
    poll();
    next += options_.poll_interval;
    if (next < std::chrono::steady_clock::now()) next = std::chrono::steady_clock::now() + options_.poll_interval;
  }
  events_ << nlohmann::json{{"event", "stop"}}.dump() << '\n' << std::flush;
}

}  // namespace fragscope::agent
