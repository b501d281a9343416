#include "inputs/memory_stats.h"

#include <utility>

namespace fragscope::inputs {

namespace {

using Values = std::map<std::string, std::int64_t, std::less<>>;

std::int64_t value_or_zero(const Values& values, const std::string& key) {
  const auto it = values.find(key);
  return it == values.end() ? 0 : it->second;
}

StatCounters counters(const Values& values, const std::string& prefix) {
  return {value_or_zero(values, prefix + ".current"), value_or_zero(values, prefix + ".peak"),
          value_or_zero(values, prefix + ".allocated"), value_or_zero(values, prefix + ".freed")};
}

PoolStat pool_stat(const Values& values, const std::string& name) {
  return {counters(values, name + ".all"), counters(values, name + ".small_pool"),
          counters(values, name + ".large_pool")};
}

}  // namespace

std::optional<std::int64_t> MemoryStats::get(std::string_view key) const {
  const auto it = values.find(key);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

MemoryStats memory_stats_from_values(Values values) {
  MemoryStats stats;
  stats.allocated_bytes = pool_stat(values, "allocated_bytes");
  stats.reserved_bytes = pool_stat(values, "reserved_bytes");
  stats.active_bytes = pool_stat(values, "active_bytes");
  stats.inactive_split_bytes = pool_stat(values, "inactive_split_bytes");
  stats.requested_bytes = pool_stat(values, "requested_bytes");
  stats.allocation = pool_stat(values, "allocation");
  stats.active = pool_stat(values, "active");
  stats.inactive_split = pool_stat(values, "inactive_split");
  stats.segment = pool_stat(values, "segment");
  stats.oversize_allocations = counters(values, "oversize_allocations");
  stats.oversize_segments = counters(values, "oversize_segments");
  stats.num_alloc_retries = value_or_zero(values, "num_alloc_retries");
  stats.num_ooms = value_or_zero(values, "num_ooms");
  stats.num_sync_all_streams = value_or_zero(values, "num_sync_all_streams");
  stats.num_device_alloc = value_or_zero(values, "num_device_alloc");
  stats.num_device_free = value_or_zero(values, "num_device_free");
  if (const auto it = values.find("max_split_size"); it != values.end() && it->second >= 0)
    stats.max_split_size = it->second;
  stats.values = std::move(values);
  return stats;
}

}  // namespace fragscope::inputs
