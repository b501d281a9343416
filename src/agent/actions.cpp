#include "agent/actions.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agent/rank_file_layout.h"

extern char** environ;

namespace fragscope::agent {
namespace {

std::string replace_all(std::string text, std::string_view from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

double unix_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The request beside a rank file, and the temp name it is written under before the rename.
std::string checkpoint_suffix() { return std::string(layout::kCheckpointSuffix); }
std::string temp_checkpoint_suffix() { return checkpoint_suffix() + ".tmp"; }

}  // namespace

const char* action_name(ActionKind kind) {
  switch (kind) {
    case ActionKind::kLog: return "log";
    case ActionKind::kCheckpoint: return "checkpoint";
    case ActionKind::kDrain: return "drain";
  }
  return "unknown";
}

const char* outcome_name(ActionOutcome outcome) {
  switch (outcome) {
    case ActionOutcome::kExecuted: return "executed";
    case ActionOutcome::kDryRun: return "dry_run";
    case ActionOutcome::kRateLimited: return "rate_limited";
    case ActionOutcome::kFailed: return "failed";
  }
  return "unknown";
}

ActionDispatcher::ActionDispatcher(ActionSettings settings, std::filesystem::path rank_dir, std::string node,
                                   std::ostream& events)
    : settings_(std::move(settings)), rank_dir_(std::move(rank_dir)), node_(std::move(node)), events_(events) {
  limiters_.emplace(ActionKind::kLog, RateLimiter(settings_.log.min_interval));
  limiters_.emplace(ActionKind::kCheckpoint, RateLimiter(settings_.checkpoint.min_interval));
  limiters_.emplace(ActionKind::kDrain, RateLimiter(settings_.drain.min_interval));
}

ActionDispatcher::~ActionDispatcher() {
  // Never leave a zombie behind; a drain still running is left to finish on its own.
  if (drain_pid_ > 0) ::waitpid(drain_pid_, nullptr, WNOHANG);
}

std::uint64_t ActionDispatcher::count(ActionKind kind, ActionOutcome outcome) const {
  return counts_[static_cast<std::size_t>(kind)][static_cast<std::size_t>(outcome)];
}

void ActionDispatcher::dispatch(const std::vector<Alert>& alerts, const NodeView& view,
                                std::chrono::steady_clock::time_point now) {
  for (const auto& alert : alerts) {
    if (settings_.log.enabled && settings_.log.rules.contains(alert.rule)) {
      act(ActionKind::kLog, alert, fmt::format("{}/{}", rule_name(alert.rule), alert.target), view, now);
    }
    if (settings_.checkpoint.enabled && settings_.checkpoint.rules.contains(alert.rule)) {
      act(ActionKind::kCheckpoint, alert, alert.target, view, now);
    }
    if (settings_.drain.enabled && settings_.drain.rules.contains(alert.rule)) {
      act(ActionKind::kDrain, alert, "node", view, now);
    }
  }
}

void ActionDispatcher::act(ActionKind kind, const Alert& alert, const std::string& key, const NodeView& view,
                           std::chrono::steady_clock::time_point now) {
  if (!limiters_.at(kind).try_acquire(key, now)) {
    ++counts_[static_cast<std::size_t>(kind)][static_cast<std::size_t>(ActionOutcome::kRateLimited)];
    return;
  }
  if (kind == ActionKind::kLog) {
    emit(kind, ActionOutcome::kExecuted, alert, "");
    return;
  }
  const ActionPolicy& policy = kind == ActionKind::kDrain ? settings_.drain : settings_.checkpoint;
  if (settings_.dry_run || policy.dry_run) {
    emit(kind, ActionOutcome::kDryRun, alert,
         kind == ActionKind::kDrain ? fmt::format("would run: {}", fmt::join(drain_arguments(alert), " "))
                                    : std::string("would request a checkpoint"));
    return;
  }
  if (kind == ActionKind::kDrain) {
    std::string detail;
    emit(kind, run_drain(alert, detail) ? ActionOutcome::kExecuted : ActionOutcome::kFailed, alert, detail);
    return;
  }
  // A GPU-wide alert asks every rank on that GPU.
  std::vector<const RankView*> ranks;
  if (alert.rank) {
    ranks.push_back(&*alert.rank);
  } else {
    for (const auto& rank : view.ranks) {
      if (rank.gpu == alert.gpu) ranks.push_back(&rank);
    }
  }
  if (ranks.empty()) {
    emit(kind, ActionOutcome::kFailed, alert, "no rank on this GPU publishes a rank file");
    return;
  }
  for (const RankView* rank : ranks) {
    std::string detail;
    Alert for_rank = alert;
    for_rank.rank = *rank;
    emit(kind, request_checkpoint(*rank, detail) ? ActionOutcome::kExecuted : ActionOutcome::kFailed, for_rank, detail);
  }
}

void ActionDispatcher::remove_requests_of_gone_ranks(const std::set<std::string>& present) {
  std::error_code error;
  std::vector<std::pair<std::filesystem::path, std::string>> gone;  // request file, its rank file
  for (auto it = std::filesystem::directory_iterator(rank_dir_, error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    for (const std::string& suffix : {checkpoint_suffix(), temp_checkpoint_suffix()}) {
      if (!name.ends_with(suffix)) continue;
      std::string rank_file = name.substr(0, name.size() - suffix.size());
      if (rank_file.ends_with(layout::kFileSuffix) && !present.contains(rank_file))
        gone.emplace_back(it->path(), std::move(rank_file));
    }
  }
  for (const auto& [path, rank_file] : gone) {
    if (std::filesystem::remove(path, error)) {
      checkpoint_ids_.erase(rank_file);
      events_ << nlohmann::json{{"event", "checkpoint_request_removed"}, {"node", node_}, {"path", path.string()},
                                {"reason", "rank gone"}}.dump()
              << '\n' << std::flush;
    }
  }
}

bool ActionDispatcher::request_checkpoint(const RankView& rank, std::string& detail) {
  std::uint64_t& id = checkpoint_ids_[rank.file_name];
  id = std::max(id, rank.record.checkpoint_ack) + 1;
  const auto path = rank_dir_ / (rank.file_name + checkpoint_suffix());
  const auto tmp = rank_dir_ / (rank.file_name + temp_checkpoint_suffix());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << id << '\n';
    if (!out.flush()) {
      detail = fmt::format("cannot write {}", tmp.string());
      return false;
    }
  }
  std::error_code error;
  std::filesystem::rename(tmp, path, error);
  if (error) {
    detail = fmt::format("cannot rename to {}: {}", path.string(), error.message());
    return false;
  }
  detail = fmt::format("request {} written to {}", id, path.string());
  return true;
}

std::vector<std::string> ActionDispatcher::drain_arguments(const Alert& alert) const {
  std::vector<std::string> args;
  for (std::string arg : settings_.drain_command) {
    arg = replace_all(std::move(arg), "{node}", node_);
    arg = replace_all(std::move(arg), "{rule}", rule_name(alert.rule));
    arg = replace_all(std::move(arg), "{gpu}", std::to_string(alert.gpu));
    arg = replace_all(std::move(arg), "{value}", fmt::format("{:.4g}", alert.value));
    arg = replace_all(std::move(arg), "{rank}", alert.rank ? std::to_string(alert.rank->record.rank) : "");
    arg = replace_all(std::move(arg), "{job}", alert.rank ? alert.rank->record.job : "");
    arg = replace_all(std::move(arg), "{pid}", alert.rank ? std::to_string(alert.rank->record.pid) : "");
    args.push_back(std::move(arg));
  }
  return args;
}

bool ActionDispatcher::run_drain(const Alert& alert, std::string& detail) {
  reap();
  if (drain_pid_ > 0) {
    detail = fmt::format("drain command still running (pid {})", drain_pid_);
    return false;
  }
  if (settings_.drain_command.empty()) {
    detail = "no drain command configured";
    return false;
  }
  std::vector<std::string> args = drain_arguments(alert);
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (const int error = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ); error != 0) {
    detail = fmt::format("cannot run {}: {}", args[0], std::strerror(error));
    return false;
  }
  drain_pid_ = pid;
  detail = fmt::format("started {} (pid {})", fmt::join(args, " "), pid);
  return true;
}

void ActionDispatcher::reap() {
  if (drain_pid_ <= 0) return;
  int status = 0;
  const pid_t done = ::waitpid(drain_pid_, &status, WNOHANG);
  if (done == 0) return;
  nlohmann::json event{{"ts", unix_seconds_now()}, {"event", "drain_exit"}, {"pid", drain_pid_}};
  if (done < 0) {
    event["error"] = std::strerror(errno);
  } else if (WIFEXITED(status)) {
    event["exit_status"] = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    event["signal"] = WTERMSIG(status);
  }
  events_ << event.dump() << '\n' << std::flush;
  drain_pid_ = -1;
}

void ActionDispatcher::emit(ActionKind kind, ActionOutcome outcome, const Alert& alert, const std::string& detail) {
  ++counts_[static_cast<std::size_t>(kind)][static_cast<std::size_t>(outcome)];
  nlohmann::json event{{"ts", unix_seconds_now()},
                       {"event", "action"},
                       {"action", action_name(kind)},
                       {"outcome", outcome_name(outcome)},
                       {"rule", rule_name(alert.rule)},
                       {"value", alert.value},
                       {"threshold", alert.threshold},
                       {"gpu", alert.gpu},
                       {"target", alert.target}};
  if (alert.rank) {
    event["rank"] = alert.rank->record.rank;
    event["pid"] = alert.rank->record.pid;
    event["job"] = alert.rank->record.job;
    event["step"] = alert.rank->record.step;
  }
  if (!detail.empty()) event["detail"] = detail;
  events_ << event.dump() << '\n' << std::flush;
}

}  // namespace fragscope::agent
