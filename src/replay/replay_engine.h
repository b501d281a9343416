#pragma once
/// @file replay_engine.h
/// @brief Replays a prepared trace through one allocator model and one config.
///
/// The loop: every op of the trace, in order, becomes a call on the model (malloc, free, the
/// two halves of a record_stream free, empty_cache). A malloc the model cannot serve is an
/// OOM: at a recorded `oom` entry the real run failed there too and the replay goes on (the
/// trace continues with the failed step's frees); anywhere else the replay stops, because the
/// rest of the trace assumes that malloc succeeded. A config that serves the request of the OOM
/// the run died of has passed the point where the real run died: the replay stops there, as the
/// trace does for anything but clean-up. An OOM the run's caller caught (cuDNN's algorithm
/// search, a retry loop) is no end: failing there is what the recording did, and a config that
/// serves it frees the block at once (the caller used and released it) and goes on.
/// Thread-safety: run_replay only reads the PreparedTrace; call it from many threads at once.

#include <cstdint>
#include <optional>
#include <vector>

#include "alloc/alloc_config.h"
#include "alloc/allocator_model.h"
#include "replay/capacity.h"
#include "replay/prepared_trace.h"
#include "util/progress.h"

namespace fragscope::replay {

enum class ModelKind : std::uint8_t {
  kCaching,  ///< PyTorch's native caching allocator (expandable segments per config)
  kIdeal,    ///< the ideal packer: live rounded bytes, the floor
};

/// How a replay treats the mallocs ATen retries smaller when they are refused (Op::elastic). The plan ATen
/// falls back to asks for less workspace, by how much the trace cannot tell: a replay that lets them go is a lower
/// bound of what the run needs, fit to show that it fails, not that it runs.
enum class ElasticAllocs : std::uint8_t {
  kServe,           ///< as recorded: one refused is an OOM like any other
  kRefuseWhenFull,  ///< one the model cannot serve is refused and the replay goes on (its fallback taken as none)
  kSkip,            ///< never allocated (the floor without workspaces)
};

struct ReplayOptions {
  /// Bytes this process may hold on the device (cudaMalloc fails beyond); nullopt = unlimited.
  std::optional<std::uint64_t> capacity;
  /// Capacity over time (capacity.h): from each step's event on, its bytes replace `capacity`.
  std::vector<CapacityStep> capacity_steps;
  /// set_per_process_memory_fraction: fraction × device memory; nullopt = no fraction.
  std::optional<std::uint64_t> allowed_memory_maximum;
  /// totalGlobalMem when known (sizes expandable segments' virtual ranges).
  std::uint64_t device_total_memory = 0;
  /// Give new segments the addresses the real driver returned (exact tie-breaking of best fit).
  bool use_recorded_addresses = true;
  /// Compare the model's segment events with the recorded ones, malloc by malloc.
  bool self_check = false;
  /// Points of the reserved/allocated timeline (0 = none).
  std::size_t timeline_points = 60;
  /// What an elastic malloc (Op::elastic: a cuDNN plan's workspace) does when the model cannot serve it.
  ElasticAllocs elastic = ElasticAllocs::kServe;
  /// Counts every op of the trace in batches as it is replayed, the ops after a stop included
  /// (null = not counted).
  ProgressCounter* progress = nullptr;
};

/// @brief Options that simulate `capacity`'s device: its cudaMalloc limit, fraction cap and
/// total memory; every other option at its default.
ReplayOptions replay_options_for(const Capacity& capacity);

/// @brief Reserved and allocated bytes over one stretch of the trace (maxima over it).
struct TimelinePoint {
  std::uint32_t first_trace_index = 0;
  std::uint32_t last_trace_index = 0;
  std::uint64_t reserved = 0;
  std::uint64_t allocated = 0;
};

struct ReplayResult {
  alloc::AllocatorStats stats;           ///< the model's statistics when the replay ended
  bool oom = false;                      ///< a malloc failed that no caller caught
  std::optional<std::uint32_t> oom_trace_index;  ///< the first failing event
  std::uint64_t oom_request_bytes = 0;   ///< what that malloc asked for
  bool oom_matches_recorded = false;     ///< the first OOM is at a recorded `oom` entry
  bool passed_recorded_oom = false;      ///< served the fatal recorded OOM's request; stopped there
  std::uint32_t caught_ooms = 0;         ///< recorded caught OOMs that failed here too
  std::uint32_t served_caught_ooms = 0;  ///< recorded caught OOMs this config served
  std::uint32_t refused_elastic = 0;     ///< elastic mallocs refused or skipped (ReplayOptions::elastic)
  bool completed = false;                ///< replayed every op to the end of the trace
  std::uint32_t last_trace_index = 0;    ///< the last event replayed
  std::size_t ops_replayed = 0;
  /// Self-check (when asked): mallocs whose segment events differ from the recorded ones.
  std::uint32_t segment_mismatches = 0;
  std::optional<std::uint32_t> first_mismatch_trace_index;
  std::vector<TimelinePoint> timeline;
  /// An upper bound of the memory the replay held at its peak: the model's, the handle table's
  /// and the segment logs' (replay_memory.h budgets replays run at once by it).
  std::uint64_t memory_bytes = 0;
};

/// @brief A replay of `trace` under `config` starts from its live blocks re-laid rather than as
/// recorded: the trace starts mid-run in cudaMalloc segments and `config` maps expandable
/// segments, which hold none (CachingAllocator::restore).
bool relays_initial_state(const PreparedTrace& trace, const alloc::AllocConfig& config);

/// @brief Replays `trace` through a fresh model of `kind` configured by `config`. A trace that
/// starts mid-run starts from its rebuilt state; on a device smaller than that state the model
/// first gives its cache back, and when what is live does not fit either, the replay fails at
/// the first event (`oom`).
/// @throws InputError naming the trace's source when the replay needs more device address space
///         than exists (alloc::AddressSpaceExhausted: a hostile trace's hundreds of streams).
ReplayResult run_replay(const PreparedTrace& trace, ModelKind kind,
                        const alloc::AllocConfig& config, const ReplayOptions& options);

}  // namespace fragscope::replay
