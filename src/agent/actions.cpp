#include "agent/actions.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agent/event_log.h"
#include "agent/rank_file_layout.h"
#include "agent/rank_folder.h"

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

// Creates `name` in `folder_fd`, never through a link and never onto an existing file (a
// leftover or planted one is unlinked first: unlinking a link never touches its target).
int create_exclusive(int folder_fd, const std::string& name) {
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::openat(folder_fd, name.c_str(), kFlags, 0600);
  if (fd < 0 && errno == EEXIST && ::unlinkat(folder_fd, name.c_str(), 0) == 0) {
    fd = ::openat(folder_fd, name.c_str(), kFlags, 0600);
  }
  return fd;
}

bool write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

bool is_safe_command_value(std::string_view value) {
  const auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  if (value.empty()) return true;
  if (value.size() > 128 || !alnum(value.front())) return false;
  return std::all_of(value.begin(), value.end(),
                     [&](char c) { return alnum(c) || c == '.' || c == '_' || c == '+' || c == '-'; });
}

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
    : settings_(std::move(settings)),
      rank_dir_(std::move(rank_dir)),
      node_(std::move(node)),
      events_(events),
      refused_drains_(settings_.log.min_interval) {
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

std::size_t ActionDispatcher::remembered() const {
  std::size_t keys = refused_drains_.size() + checkpoint_ids_.size() + written_.size();
  for (const auto& [kind, limiter] : limiters_) keys += limiter.size();
  return keys;
}

void ActionDispatcher::prune_rate_limits(const NodeView& view, std::chrono::steady_clock::time_point now) {
  std::set<std::string> live{"node"};
  for (const auto& rank : view.ranks) live.insert(rank.file_name);
  for (const auto& gpu : view.nvml.gpus) live.insert(fmt::format("gpu{}", gpu.index));
  const std::function<bool(const std::string&)> is_live = [&live](const std::string& target) {
    return live.contains(target);
  };
  // Log keys are "rule/target"; a rule's name has no '/'.
  const std::function<bool(const std::string&)> is_live_log_key = [&live](const std::string& key) {
    return live.contains(key.substr(key.find('/') + 1));
  };
  for (auto& [kind, limiter] : limiters_) {
    limiter.prune(now, kMaxRateLimitKeys, kind == ActionKind::kLog ? is_live_log_key : is_live);
  }
  refused_drains_.prune(now, kMaxRateLimitKeys, is_live);
}

void ActionDispatcher::dispatch(const std::vector<Alert>& alerts, const NodeView& view,
                                std::chrono::steady_clock::time_point now) {
  prune_rate_limits(view, now);
  for (const auto& alert : alerts) {
    if (settings_.log.enabled && settings_.log.rules.contains(alert.rule)) {
      act(ActionKind::kLog, alert, fmt::format("{}/{}", rule_name(alert.rule), alert.target), view, now);
    }
    if (settings_.checkpoint.enabled && settings_.checkpoint.rules.contains(alert.rule)) {
      act(ActionKind::kCheckpoint, alert, alert.target, view, now);
    }
    if (settings_.drain.enabled && settings_.drain.rules.contains(alert.rule)) {
      if (alert.rank && !settings_.drain_on_rank_files) {
        // Checked before the rate limit: a forged rank file must not use up the node's drain.
        if (refused_drains_.try_acquire(alert.target, now)) {
          emit(ActionKind::kDrain, ActionOutcome::kFailed, alert,
               "refused: only a rank file supports this alert (NVML does not), and any user on the node can write "
               "one; set [actions.drain] trust_rank_files = true to drain on rank files");
        }
        continue;
      }
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
    std::string detail = "would request a checkpoint";
    if (kind == ActionKind::kDrain) {
      std::string refusal;
      const auto args = drain_arguments(alert, refusal);
      detail = args ? fmt::format("would run: {}", fmt::join(*args, " ")) : "would refuse: " + refusal;
    }
    emit(kind, ActionOutcome::kDryRun, alert, detail);
    return;
  }
  if (kind == ActionKind::kDrain) {
    std::string detail;
    emit(kind, run_drain(alert, now, detail) ? ActionOutcome::kExecuted : ActionOutcome::kFailed, alert, detail);
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

void ActionDispatcher::remove_requests_of_gone_ranks(const std::set<std::string>& present,
                                                     const std::vector<std::string>& checkpoint_files) {
  if (!settings_.checkpoint.enabled || settings_.dry_run || settings_.checkpoint.dry_run) return;
  // A user who remakes requests beside no rank file must not flood the log: the first few per poll, then a count.
  constexpr std::size_t kMaxRemovalEvents = 10;
  std::size_t removed = 0;
  for (const std::string& name : checkpoint_files) {
    std::string rank_file;
    for (const std::string& suffix : {checkpoint_suffix(), temp_checkpoint_suffix()}) {
      if (name.ends_with(suffix)) rank_file = name.substr(0, name.size() - suffix.size());
    }
    if (rank_file.empty() || present.contains(rank_file) || !may_remove(name)) continue;
    std::string leaf, problem;
    const auto folder = open_folder_of(rank_dir_, name, leaf, problem);
    if (!folder || ::unlinkat(folder->fd.get(), leaf.c_str(), 0) != 0) continue;
    written_.erase(name);
    checkpoint_ids_.erase(rank_file);
    limiters_.at(ActionKind::kCheckpoint).forget(rank_file);
    if (removed++ < kMaxRemovalEvents)
      events_ << event_line({{"event", "checkpoint_request_removed"},
                             {"node", node_},
                             {"path", (rank_dir_ / name).string()},
                             {"reason", "rank gone"}});
  }
  if (removed > kMaxRemovalEvents)
    events_ << event_line({{"event", "checkpoint_request_removed"},
                           {"node", node_},
                           {"more_files", removed - kMaxRemovalEvents},
                           {"reason", "rank gone"}});
  events_ << std::flush;
  std::erase_if(checkpoint_ids_, [&](const auto& entry) { return !present.contains(entry.first); });
  // A request no longer listed was taken by its rank or removed; its rank's next one is new.
  const std::set<std::string> listed(checkpoint_files.begin(), checkpoint_files.end());
  std::erase_if(written_, [&](const auto& entry) { return !listed.contains(entry.first); });
}

bool ActionDispatcher::may_remove(const std::string& name) const {
  std::string leaf, problem;
  const auto folder = open_folder_of(rank_dir_, name, leaf, problem);
  struct stat info {};
  if (!folder || ::fstatat(folder->fd.get(), leaf.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(info.st_mode)) {
    return false;
  }
  if (const auto mine = written_.find(name); mine != written_.end()) {
    return mine->second == std::make_pair(info.st_dev, info.st_ino);
  }
  return info.st_uid == (folder->owner ? *folder->owner : ::geteuid());
}

bool ActionDispatcher::request_checkpoint(const RankView& rank, std::string& detail) {
  std::uint64_t& id = checkpoint_ids_[rank.file_name];
  id = std::max(id, rank.record.checkpoint_ack) + 1;
  std::string leaf, problem;
  const auto folder = open_folder_of(rank_dir_, rank.file_name, leaf, problem);
  if (!folder) {
    detail = fmt::format("cannot open the folder of {}: {}", rank.file_name, problem);
    return false;
  }
  const std::string tmp = leaf + temp_checkpoint_suffix();
  const std::string flag = leaf + checkpoint_suffix();
  const auto path = rank_dir_ / (folder->prefix + flag);
  FileDescriptor fd(create_exclusive(folder->fd.get(), tmp));
  if (!fd) {
    detail = fmt::format("cannot create {}: {}", (rank_dir_ / (folder->prefix + tmp)).string(), std::strerror(errno));
    return false;
  }
  // The rank's owner must read it (and, in a sticky folder, be able to remove it).
  if (::fchown(fd.get(), rank.owner_uid, rank.owner_gid) != 0) ::fchmod(fd.get(), 0644);
  struct stat info {};
  if (!write_all(fd.get(), fmt::format("{}\n", id)) || ::fstat(fd.get(), &info) != 0) {
    detail = fmt::format("cannot write {}: {}", (rank_dir_ / (folder->prefix + tmp)).string(), std::strerror(errno));
    ::unlinkat(folder->fd.get(), tmp.c_str(), 0);
    return false;
  }
  if (::renameat(folder->fd.get(), tmp.c_str(), folder->fd.get(), flag.c_str()) != 0) {
    detail = fmt::format("cannot rename to {}: {}", path.string(), std::strerror(errno));
    ::unlinkat(folder->fd.get(), tmp.c_str(), 0);
    return false;
  }
  written_[folder->prefix + flag] = {info.st_dev, info.st_ino};
  detail = fmt::format("request {} written to {}", id, path.string());
  return true;
}

std::optional<std::vector<std::string>> ActionDispatcher::drain_arguments(const Alert& alert,
                                                                         std::string& refusal) const {
  const std::pair<const char*, std::string> values[] = {
      {"{node}", node_},
      {"{rule}", rule_name(alert.rule)},
      {"{gpu}", std::to_string(alert.gpu)},
      {"{value}", fmt::format("{:.4g}", alert.value)},
      {"{rank}", alert.rank ? std::to_string(alert.rank->record.rank) : ""},
      {"{job}", alert.rank ? alert.rank->record.job : ""},
      {"{pid}", alert.rank ? std::to_string(alert.rank->record.pid) : ""},
  };
  std::vector<std::string> args = settings_.drain_command;
  for (const auto& substitution : values) {
    const std::string_view placeholder = substitution.first;
    const std::string& value = substitution.second;
    const bool used = std::any_of(args.begin(), args.end(), [&](const std::string& arg) {
      return arg.find(placeholder) != std::string::npos;
    });
    if (!used) continue;
    if (!is_safe_command_value(value)) {
      refusal = fmt::format("{} would be '{}' (allowed: up to 128 letters, digits, '.', '_', '+', '-', "
                            "starting with a letter or digit)", placeholder, value);
      return std::nullopt;
    }
    for (auto& arg : args) arg = replace_all(std::move(arg), placeholder, value);
  }
  return args;
}

bool ActionDispatcher::run_drain(const Alert& alert, std::chrono::steady_clock::time_point now,
                                 std::string& detail) {
  reap(now);
  if (drain_pid_ > 0) {
    detail = fmt::format("drain command still running (pid {})", drain_pid_);
    return false;
  }
  if (settings_.drain_command.empty()) {
    detail = "no drain command configured";
    return false;
  }
  std::string refusal;
  std::optional<std::vector<std::string>> substituted = drain_arguments(alert, refusal);
  if (!substituted) {
    detail = "refused: " + refusal;
    return false;
  }
  std::vector<std::string>& args = *substituted;
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  // Its own process group, so a timeout kills whatever it started too. Every descriptor above
  // stderr is closed (one close_range): the agent's are close-on-exec, but NVML's need not be.
  // SIGPIPE, which the agent ignores (signals.h), goes back to its default, and no signal stays blocked: exec keeps
  // both, and a drain run by hand (`kubectl … | head`) has neither.
  posix_spawnattr_t attributes;
  posix_spawn_file_actions_t file_actions;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  posix_spawnattr_setpgroup(&attributes, 0);
  sigset_t defaults, unblocked;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigemptyset(&unblocked);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setsigmask(&attributes, &unblocked);
  posix_spawn_file_actions_init(&file_actions);
  posix_spawn_file_actions_addclosefrom_np(&file_actions, 3);
  pid_t pid = -1;
  const int error = posix_spawnp(&pid, argv[0], &file_actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&file_actions);
  posix_spawnattr_destroy(&attributes);
  if (error != 0) {
    detail = fmt::format("cannot run {}: {}", args[0], std::strerror(error));
    return false;
  }
  drain_pid_ = pid;
  drain_started_ = now;
  drain_killed_ = false;
  detail = fmt::format("started {} (pid {})", fmt::join(args, " "), pid);
  return true;
}

void ActionDispatcher::reap(std::chrono::steady_clock::time_point now) {
  if (drain_pid_ <= 0) return;
  int status = 0;
  const pid_t done = ::waitpid(drain_pid_, &status, WNOHANG);
  if (done == 0) {
    if (!drain_killed_ && now - drain_started_ > settings_.drain_timeout) {
      ::kill(-drain_pid_, SIGKILL);
      drain_killed_ = true;
      events_ << event_line({{"ts", unix_seconds_now()},
                             {"event", "drain_timeout"},
                             {"pid", drain_pid_},
                             {"detail", fmt::format("still running after {} s: its process group was killed",
                                                    settings_.drain_timeout.count())}})
              << std::flush;
    }
    return;
  }
  nlohmann::json event{{"ts", unix_seconds_now()}, {"event", "drain_exit"}, {"pid", drain_pid_}};
  if (done < 0) {
    event["error"] = std::strerror(errno);
  } else if (WIFEXITED(status)) {
    event["exit_status"] = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    event["signal"] = WTERMSIG(status);
  }
  events_ << event_line(event) << std::flush;
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
  events_ << event_line(event) << std::flush;
}

}  // namespace fragscope::agent
