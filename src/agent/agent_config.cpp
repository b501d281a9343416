#include "agent/agent_config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include "util/bytes.h"
#include "util/error.h"
#include "util/input_file.h"
#include "util/toml_key_depth.h"

namespace fragscope::agent {
namespace {

/// Walks one TOML table, remembering which keys were consumed, so leftovers can be reported.
class TableReader {
 public:
  TableReader(const toml::table& table, std::string path, std::string_view source)
      : table_(table), path_(std::move(path)), source_(source) {}

  [[noreturn]] void fail(std::string_view key, std::string_view problem) const {
    throw InputError(fmt::format("{}: {}{}: {}", source_, path_.empty() ? "" : path_ + ".", key, problem));
  }

  void number(std::string_view key, double& out, double min, double max) {
    const toml::node* node = take(key);
    if (node == nullptr) return;
    const auto value = node->value<double>();
    if (!value || !(*value >= min && *value <= max)) fail(key, fmt::format("must be a number in [{}, {}]", min, max));
    out = *value;
  }

  void seconds(std::string_view key, std::chrono::seconds& out, double min = 0, double max = 7 * 24 * 3600.0) {
    double value = static_cast<double>(out.count());
    number(key, value, min, max);
    out = std::chrono::seconds(static_cast<std::int64_t>(value));
  }

  void boolean(std::string_view key, bool& out) {
    const toml::node* node = take(key);
    if (node == nullptr) return;
    if (!node->is_boolean()) fail(key, "must be true or false");
    out = node->value<bool>().value_or(out);
  }

  void strings(std::string_view key, std::vector<std::string>& out) {
    const toml::node* node = take(key);
    if (node == nullptr) return;
    const toml::array* array = node->as_array();
    if (array == nullptr) fail(key, "must be an array of strings");
    out.clear();
    for (const auto& item : *array) {
      const auto text = item.value<std::string>();
      if (!text) fail(key, "must be an array of strings");
      out.push_back(*text);
    }
  }

  void rules(std::string_view key, std::set<Rule>& out) {
    std::vector<std::string> names;
    if (!table_.contains(key)) return;
    strings(key, names);
    out.clear();
    for (const auto& name : names) {
      const auto rule = parse_rule(name);
      if (!rule)
        fail(key, fmt::format("unknown rule '{}' (rules: fragmentation, alloc_retries, hbm_used, data_wait)", name));
      out.insert(*rule);
    }
  }

  TableReader table(std::string_view key) {
    const toml::node* node = take(key);
    static const toml::table kEmpty;
    if (node == nullptr) return TableReader(kEmpty, child_path(key), source_);
    if (!node->is_table()) fail(key, "must be a table");
    return TableReader(*node->as_table(), child_path(key), source_);
  }

  /// @throws InputError when a key of this table was not consumed.
  void finish() const {
    for (const auto& [key, value] : table_) {
      if (!taken_.contains(std::string(key.str()))) fail(key.str(), "unknown key");
    }
  }

 private:
  const toml::node* take(std::string_view key) {
    taken_.insert(std::string(key));
    return table_.get(key);
  }
  std::string child_path(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }

  const toml::table& table_;
  std::string path_;
  std::string_view source_;
  std::set<std::string> taken_;
};

// Logging is never dry: it is what a dry run does. Only checkpoint and drain take dry_run.
void read_policy(TableReader table, ActionPolicy& policy, bool can_dry_run) {
  table.boolean("enabled", policy.enabled);
  table.rules("rules", policy.rules);
  table.seconds("min_interval_seconds", policy.min_interval);
  if (can_dry_run) table.boolean("dry_run", policy.dry_run);
  table.finish();
}

}  // namespace

AgentConfig parse_agent_config(std::string_view text, std::string_view source) {
  refuse_deep_toml_keys(text, source);
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw InputError(fmt::format("{}:{}:{}: {}", source, e.source().begin.line, e.source().begin.column,
                                 e.description()));
  }
  AgentConfig config;
  TableReader top(root, "", source);
  {
    TableReader t = top.table("thresholds");
    Thresholds& th = config.thresholds;
    t.number("fragmentation_ratio", th.fragmentation_ratio, 0, 1);
    t.number("alloc_retries_per_minute", th.alloc_retries_per_minute, 0, 1e9);
    t.seconds("retry_window_seconds", th.retry_window);
    t.number("hbm_used_ratio", th.hbm_used_ratio, 0, 1);
    t.number("data_wait_ratio", th.data_wait_ratio, 0, 1);
    t.seconds("hold_for_seconds", th.hold_for);
    t.finish();
    if (th.retry_window.count() == 0) t.fail("retry_window_seconds", "must be at least 1");
  }
  {
    TableReader a = top.table("actions");
    ActionSettings& actions = config.actions;
    a.boolean("dry_run", actions.dry_run);
    read_policy(a.table("log"), actions.log, false);
    read_policy(a.table("checkpoint"), actions.checkpoint, true);
    TableReader drain = a.table("drain");
    drain.strings("command", actions.drain_command);
    drain.boolean("trust_rank_files", actions.drain_on_rank_files);
    // At least a second: 0 would kill every drain at the first poll after it started.
    drain.seconds("timeout_seconds", actions.drain_timeout, 1, 24 * 3600.0);
    read_policy(drain, actions.drain, true);
    a.finish();
    if (actions.drain.enabled && actions.drain_command.empty()) {
      drain.fail("command", "is required when drain is enabled");
    }
    for (Rule rule : actions.drain.rules) {
      if (actions.drain.enabled && !actions.drain_on_rank_files && rule != Rule::kHbmUsed) {
        drain.fail("rules", fmt::format("'{}' is measured by rank files only, which any user on the node can write; "
                                        "set trust_rank_files = true to drain on it",
                                        rule_name(rule)));
      }
    }
  }
  top.finish();
  return config;
}

/// The largest agent config read (the shipped one is 2 KiB).
constexpr std::uint64_t kMaxConfigBytes = 1 * kMiB;

AgentConfig load_agent_config(const std::filesystem::path& path) {
  // Through the one bounded opener: a FIFO, /dev/zero or a directory given as the config is an error, not a hang,
  // unbounded memory, or the defaults taken silently.
  return parse_agent_config(read_bounded(path.string(), kMaxConfigBytes, "an agent config"), path.string());
}

}  // namespace fragscope::agent
