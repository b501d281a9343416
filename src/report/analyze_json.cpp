#include "report/analyze_report.h"

#include "report/json_header.h"

namespace fragscope::report {

namespace {

nlohmann::json totals_json(const metrics::MemoryTotals& t) {
  return {
      {"segments", t.segments},
      {"blocks", t.blocks},
      {"total_reserved_bytes", t.reserved_bytes},
      {"allocated_bytes", t.allocated_bytes},
      {"requested_bytes", t.requested_bytes},
      {"free_internal_bytes", t.free_internal_bytes},
      {"free_external_bytes", t.free_external_bytes},
      {"inactive_bytes", t.inactive_bytes},
      {"pending_free_bytes", t.pending_free_bytes},
      {"largest_free_block_bytes", t.largest_free_block},
      {"fragmentation_index", t.fragmentation_index()},
  };
}

const char* run_kind_name(metrics::RunKind kind) {
  switch (kind) {
    case metrics::RunKind::kAllocated: return "allocated";
    case metrics::RunKind::kPendingFree: return "pending_free";
    case metrics::RunKind::kFree: break;
  }
  return "free";
}

}  // namespace

nlohmann::json analyze_json(const metrics::SnapshotAnalysis& a, const std::string& source) {
  nlohmann::json j = totals_json(a.totals);
  add_json_header(j, kAnalyzeJsonSchema);
  j["source"] = source;
  j["device"] = a.device;
  j["devices"] = a.devices;
  j["device_picked"] = a.device_picked;
  j["expandable_segments"] = a.expandable_segments;
  j["largest_cached_allocation_bytes"] = a.largest_cached_allocation;
  j["private_pools"] = totals_json(a.private_pools);
  j["driver_free_bytes"] = a.driver_free_bytes ? nlohmann::json(*a.driver_free_bytes) : nlohmann::json();
  auto& pools = j["by_pool_stream"] = nlohmann::json::array();
  for (const auto& g : a.by_pool_stream) {
    auto entry = totals_json(g.totals);
    entry["pool"] = g.pool == snapshot::PoolKind::kSmall ? "small" : "large";
    entry["stream"] = g.stream;
    entry["mem_pool"] = {g.mem_pool.first, g.mem_pool.second};
    pools.push_back(std::move(entry));
  }
  auto& sites = j["top_sites"] = nlohmann::json::array();
  for (const auto& s : a.top_sites)
    sites.push_back({{"location", s.location}, {"bytes", s.bytes}, {"blocks", s.blocks}});
  j["trace_entries"] = a.trace.entries;
  j["trace_actions"] = a.trace.actions;
  j["trace_first_time_us"] = a.trace.first_time_us;
  j["trace_last_time_us"] = a.trace.last_time_us;
  j["reserved_at_trace_start_bytes"] = a.reserved_at_trace_start;
  j["trace_peak_reserved_bytes"] = a.trace_peak_reserved;
  auto& ooms = j["oom_events"] = nlohmann::json::array();
  for (const auto& o : a.trace.ooms)
    ooms.push_back({{"index", o.index}, {"request_bytes", o.request_bytes},
                    {"device_free_bytes", o.device_free_bytes}, {"time_us", o.time_us}});
  auto& rows = j["segment_map"] = nlohmann::json::array();
  for (const auto& row : a.segment_map) {
    nlohmann::json runs = nlohmann::json::array();
    for (const auto& r : row.runs) runs.push_back({run_kind_name(r.kind), r.offset, r.size});
    rows.push_back({{"address", row.address}, {"pool_id", {row.pool_id.first, row.pool_id.second}},
                    {"total_size", row.total_size},
                    {"free_bytes", row.free_bytes}, {"largest_free", row.largest_free}, {"runs", std::move(runs)}});
  }
  return j;
}

}  // namespace fragscope::report
