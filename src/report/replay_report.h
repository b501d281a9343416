#pragma once
/// @file replay_report.h
/// @brief What `fragscope replay` and `fragscope whatif` print: text for a person, JSON for
/// programs. docs/replay.md explains every line and key.

#include <ostream>

#include <nlohmann/json.hpp>

#include "replay/replay_summary.h"
#include "replay/whatif.h"

namespace fragscope::report {

/// @brief The replay as text: peaks against the recording and the ideal packer, retries,
/// segments, OOM verdict, self-check and a reserved/allocated timeline chart.
void write_replay_text(std::ostream& out, const replay::ReplaySummary& summary);

/// @brief The replay as JSON. Keys: peak_reserved_bytes, peak_allocated_bytes, ideal_peak_bytes,
/// num_alloc_retries, oom, oom_event_index (index in device_traces[device] or null), and more
/// (docs/replay.md).
nlohmann::json replay_json(const replay::ReplaySummary& summary);

/// @brief The sweep as a table sorted by peak reserved, the floor, the capacity verdicts, the
/// smallest surviving capacities (when computed) and the recommended PYTORCH_CUDA_ALLOC_CONF.
void write_whatif_text(std::ostream& out, const replay::PreparedTrace& trace, const replay::WhatIfReport& report);

/// @brief The sweep as JSON (one object per config, in table order).
nlohmann::json whatif_json(const replay::PreparedTrace& trace, const replay::WhatIfReport& report);

}  // namespace fragscope::report
