#pragma once
/// @file replay_summary.h
/// @brief One `fragscope replay`: a config's replay next to the ideal packer and what the
/// trace itself recorded, ready to print (replay_report.h).

#include <optional>
#include <string>

#include "alloc/alloc_config.h"
#include "replay/capacity.h"
#include "replay/prepared_trace.h"
#include "replay/replay_engine.h"
#include "util/progress.h"

namespace fragscope::replay {

struct ReplaySummary {
  const PreparedTrace* trace = nullptr;
  std::string conf;          ///< the replayed PYTORCH_CUDA_ALLOC_CONF (canonical)
  bool conf_is_recorded = false;  ///< same settings as the recording: the self-check applies
  Capacity capacity;
  ReplayResult result;
  ReplayResult ideal;
  /// With capacity over time and the recorded OOM reproduced: the same replay at the capacity
  /// the run started with (does the OOM follow from non-PyTorch memory's growth?).
  std::optional<ReplayResult> at_start_capacity;
};

/// @brief Replays `trace` under `conf` (nullopt = the recorded allocator_settings) at
/// `capacity`, with the ideal packer alongside. The self-check runs when the config is the
/// recorded one. `progress` hears of both replays as one task counted in trace events.
/// @throws InputError when `conf` is not a valid PYTORCH_CUDA_ALLOC_CONF.
ReplaySummary summarize_replay(const PreparedTrace& trace, const std::optional<std::string>& conf,
                               const Capacity& capacity, const Progress& progress = {});

}  // namespace fragscope::replay
