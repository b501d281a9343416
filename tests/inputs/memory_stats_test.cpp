// MemoryStats's invariant on every recorded stats.json: each typed field is the value of its
// key as PyTorch spelled it (0 or nullopt when absent), and every key read stays in `values`.
#include "inputs/memory_stats.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fragscope::inputs {
namespace {

namespace fs = std::filesystem;
using Values = std::map<std::string, std::int64_t, std::less<>>;

Values flat_values(const fs::path& stats_json) {
  std::ifstream in(stats_json);
  const auto raw = nlohmann::json::parse(in);
  Values values;
  for (const auto& [key, value] : raw.items()) values[key] = value.get<std::int64_t>();
  return values;
}

/// Every typed field with its dotted key.
std::vector<std::pair<std::string, std::function<std::int64_t(const MemoryStats&)>>> typed_fields() {
  std::vector<std::pair<std::string, std::function<std::int64_t(const MemoryStats&)>>> out;
  auto add_counters = [&](const std::string& prefix, std::function<const StatCounters&(const MemoryStats&)> of) {
    out.emplace_back(prefix + ".current", [of](const MemoryStats& s) { return of(s).current; });
    out.emplace_back(prefix + ".peak", [of](const MemoryStats& s) { return of(s).peak; });
    out.emplace_back(prefix + ".allocated", [of](const MemoryStats& s) { return of(s).allocated; });
    out.emplace_back(prefix + ".freed", [of](const MemoryStats& s) { return of(s).freed; });
  };
  auto add_pools = [&](const std::string& name, PoolStat MemoryStats::*stat) {
    add_counters(name + ".all", [stat](const MemoryStats& s) -> const StatCounters& { return (s.*stat).all; });
    add_counters(name + ".small_pool",
                 [stat](const MemoryStats& s) -> const StatCounters& { return (s.*stat).small_pool; });
    add_counters(name + ".large_pool",
                 [stat](const MemoryStats& s) -> const StatCounters& { return (s.*stat).large_pool; });
  };
  add_pools("allocated_bytes", &MemoryStats::allocated_bytes);
  add_pools("reserved_bytes", &MemoryStats::reserved_bytes);
  add_pools("active_bytes", &MemoryStats::active_bytes);
  add_pools("inactive_split_bytes", &MemoryStats::inactive_split_bytes);
  add_pools("requested_bytes", &MemoryStats::requested_bytes);
  add_pools("allocation", &MemoryStats::allocation);
  add_pools("active", &MemoryStats::active);
  add_pools("inactive_split", &MemoryStats::inactive_split);
  add_pools("segment", &MemoryStats::segment);
  add_counters("oversize_allocations",
               [](const MemoryStats& s) -> const StatCounters& { return s.oversize_allocations; });
  add_counters("oversize_segments", [](const MemoryStats& s) -> const StatCounters& { return s.oversize_segments; });
  out.emplace_back("num_alloc_retries", [](const MemoryStats& s) { return s.num_alloc_retries; });
  out.emplace_back("num_ooms", [](const MemoryStats& s) { return s.num_ooms; });
  out.emplace_back("num_sync_all_streams", [](const MemoryStats& s) { return s.num_sync_all_streams; });
  out.emplace_back("num_device_alloc", [](const MemoryStats& s) { return s.num_device_alloc; });
  out.emplace_back("num_device_free", [](const MemoryStats& s) { return s.num_device_free; });
  return out;
}

TEST(MemoryStats, EveryTypedFieldIsItsKeysValueOnEveryRecording) {
  int recordings = 0;
  for (const auto& entry : fs::directory_iterator(FRAGSCOPE_FIXTURES_DIR)) {
    if (!fs::exists(entry.path() / "stats.json")) continue;
    SCOPED_TRACE(entry.path().filename().string());
    ++recordings;
    const Values values = flat_values(entry.path() / "stats.json");
    const MemoryStats stats = memory_stats_from_values(values);
    EXPECT_EQ(stats.values, values);
    for (const auto& [key, field] : typed_fields()) {
      const auto it = values.find(key);
      EXPECT_EQ(field(stats), it == values.end() ? 0 : it->second) << key;
      EXPECT_EQ(stats.get(key), it == values.end() ? std::nullopt : std::optional(it->second)) << key;
    }
    const auto limit = values.find("max_split_size");
    if (limit == values.end() || limit->second < 0) {
      EXPECT_FALSE(stats.max_split_size) << "-1 is PyTorch's unlimited";
    } else {
      EXPECT_EQ(stats.max_split_size, limit->second);
    }
  }
  EXPECT_GE(recordings, 19);
}

TEST(MemoryStats, AbsentKeysAreZeroAndUnknownKeysAreKept) {
  const MemoryStats stats = memory_stats_from_values({{"reserved_bytes.all.peak", 4096}, {"a_future_key", 7}});
  EXPECT_EQ(stats.reserved_bytes.all.peak, 4096);
  EXPECT_EQ(stats.reserved_bytes.all.current, 0);
  EXPECT_EQ(stats.num_ooms, 0);
  EXPECT_FALSE(stats.max_split_size);
  EXPECT_EQ(stats.get("a_future_key"), 7);
  EXPECT_EQ(stats.get("num_ooms"), std::nullopt);
}

}  // namespace
}  // namespace fragscope::inputs
