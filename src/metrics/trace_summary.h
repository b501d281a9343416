#pragma once
/// @file trace_summary.h
/// @brief What the allocator trace of one device holds: events per action, time span, OOMs.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "snapshot/snapshot.h"

namespace fragscope::metrics {

struct OomEvent {
  std::size_t index = 0;             ///< position in device_traces[device]
  std::uint64_t request_bytes = 0;   ///< the rounded size that could not be allocated
  std::uint64_t device_free_bytes = 0;  ///< what the driver reported free at that moment
  std::int64_t time_us = 0;
};

struct TraceSummary {
  std::size_t entries = 0;
  std::map<std::string, std::uint64_t> actions;  ///< action name → count
  std::int64_t first_time_us = 0;
  std::int64_t last_time_us = 0;
  std::vector<OomEvent> ooms;
  /// Reserved bytes gained (segment_alloc + segment_map) minus released (segment_free + unmap)
  /// over the trace; with the end-state reserved bytes this gives the reserved bytes at the start.
  std::int64_t net_reserved_change = 0;
  /// Highest point of reserved bytes over the trace relative to its start.
  std::int64_t peak_reserved_rise = 0;
  /// The reserved bytes at the moment of each OOM, relative to the trace start (parallel to ooms).
  std::vector<std::int64_t> reserved_rise_at_oom;
};

TraceSummary summarize_trace(const snapshot::Snapshot& snapshot, int device);

}  // namespace fragscope::metrics
