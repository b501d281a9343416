#pragma once
/// @file diagnosis.h
/// @brief What `fragscope doctor` concludes: one verdict, the evidence that decided it, the
/// context around it and ranked actions. docs/doctor.md explains every field.
///
/// A Diagnosis is data only; src/report/doctor_report.h renders it as text, JSON or HTML.
/// Thread-safety: a plain value.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "metrics/segment_map.h"

namespace fragscope::diagnose {

enum class Verdict : std::uint8_t {
  kOk,             ///< nothing wrong; the report says what is healthy and the margin left
  kCapacity,       ///< the job needs more memory than the device gives it, whatever the allocator
  kFragmentation,  ///< the memory was there but not in one piece: an allocator setting fixes it
  kInputBound,     ///< the GPU waits for data
  kUndetermined,   ///< the data cannot decide (e.g. the OOM is in a phase the trace never shows)
};

/// @brief "ok", "capacity", "fragmentation", "input_bound", "undetermined".
std::string_view to_string(Verdict verdict);

/// @brief Exit status of `fragscope doctor`: 0 for kOk, 1 for any finding.
int exit_status(Verdict verdict);

/// @brief One measured fact that the verdict rests on. `text` is one self-contained line.
struct Evidence {
  std::string key;   ///< stable name for programs ("projected_step_peak", "data_wait_fraction")
  std::string text;  ///< the fact in words and numbers
};

/// @brief One thing to do (or not to do), with its exact setting and why.
struct Action {
  std::string title;     ///< "Use expandable segments"
  std::string setting;   ///< exact line to apply ("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
  std::string evidence;  ///< the measurement it follows from
  /// False when the data cannot show the action is enough on its own (undetermined verdicts).
  bool sufficient = false;
};

/// @brief The nvidia-smi blind spot at the OOM: what the driver saw against what PyTorch held.
struct OomContext {
  std::uint64_t request_bytes = 0;
  std::optional<std::uint64_t> driver_free_bytes;       ///< cudaMemGetInfo / "of which X is free"
  std::optional<std::uint64_t> reserved_bytes;          ///< held by PyTorch at the OOM
  std::optional<std::uint64_t> allocated_bytes;         ///< handed to tensors at the OOM
  std::optional<std::uint64_t> reserved_unallocated;    ///< cached, free inside PyTorch
  std::optional<std::uint64_t> largest_free_block;      ///< biggest hole at the OOM
  std::optional<std::uint64_t> smi_used_bytes;          ///< what nvidia-smi showed in use
  std::optional<std::uint64_t> smi_total_bytes;
  std::optional<std::uint64_t> allowed_bytes;           ///< "X allowed": a memory-fraction cap
  std::optional<std::size_t> trace_index;               ///< the `oom` entry, when a trace has one
  std::optional<int> rank;
};

/// @brief The failing step's peak projected from the steps the trace shows.
struct StepProjection {
  bool available = false;
  std::string unavailable_reason;  ///< why not, when !available
  bool different_pass = false;     ///< unavailable because the failing pass is not the reference step's
  std::uint64_t static_bytes = 0;  ///< live at the failing step's start (telemetry)
  std::uint64_t reference_transient_bytes = 0;  ///< activations at the reference step's peak
  std::uint64_t reference_constant_bytes = 0;   ///< the part of them that does not scale
  std::uint64_t reference_peak_bytes = 0;
  std::optional<std::int64_t> reference_step;
  std::optional<std::int64_t> reference_tokens;
  double token_ratio = 1.0;  ///< failing step's tokens / reference step's tokens
  std::optional<std::int64_t> failing_step;
  std::optional<std::int64_t> failing_tokens;
  std::optional<double> activation_bytes_per_token;
  std::uint64_t live_at_oom_bytes = 0;  ///< live + request at the failing malloc: a lower bound
  std::uint64_t projected_peak_bytes = 0;
  /// Bytes the steps before kept from one step to the next (gradients), freed after the
  /// reference step (zero_grad) and not made again before the failing step began: it runs
  /// without them, the steps after it hold them again.
  std::uint64_t returning_bytes = 0;
  /// A step like the failing one with returning_bytes back: projected_peak_bytes + returning_bytes.
  std::uint64_t next_step_peak_bytes = 0;
};

/// @brief One row of the what-if table (a replay of the trace under one config).
struct WhatIfLine {
  std::string conf;  ///< PYTORCH_CUDA_ALLOC_CONF ("" = defaults)
  bool recorded = false;
  std::uint64_t peak_reserved_bytes = 0;  ///< without a memory limit (to the OOM point at most)
  std::optional<bool> passes_oom_point;   ///< at the capacity: served the failing malloc
  std::optional<bool> fits;               ///< at the capacity: no OOM at all
};

/// @brief One point of the recorded reserved / allocated curve.
struct TimelineSample {
  std::size_t trace_index = 0;
  std::uint64_t reserved_bytes = 0;
  std::uint64_t allocated_bytes = 0;
};

/// @brief One telemetry record's time split, for the step-time chart.
struct StepTime {
  std::int64_t step = 0;
  double data_wait_ms = 0;
  double compute_ms = 0;
};

/// @brief Per-rank figures, for the worst rank and the spread.
struct RankFacts {
  int rank = 0;
  std::optional<std::uint64_t> peak_reserved_bytes;
  std::optional<std::uint64_t> peak_allocated_bytes;
  std::optional<double> data_wait_fraction;
  bool oom = false;
  std::vector<std::string> sources;
};

/// @brief Everything the doctor concluded.
struct Diagnosis {
  Verdict verdict = Verdict::kOk;
  std::string headline;  ///< one sentence
  std::string phase;     ///< "train", "eval", "checkpoint", "optimizer", or "unknown"
  std::string phase_source;  ///< how the phase was found
  std::string trigger;       ///< what set off the OOM (empty when there was none)
  bool oom = false;
  /// Fragmentation only: some allocator setting of the sweep passes the OOM point. False when
  /// the ideal packer fits but every setting inherits pieces the trace starts with.
  bool setting_fixes_it = true;

  std::optional<double> data_wait_fraction;         ///< Σ wait / Σ (wait + compute), all steps
  std::optional<double> steady_data_wait_fraction;  ///< the same without the warm-up step
  std::optional<double> gpu_idle_fraction;          ///< from an nvidia-smi trace

  std::optional<std::uint64_t> capacity_bytes;  ///< what the process could hold at the OOM
  std::string capacity_source;
  std::optional<OomContext> oom_context;
  StepProjection projection;
  std::vector<WhatIfLine> whatif;
  std::optional<std::uint64_t> ideal_peak_bytes;  ///< the ideal packer's peak (the floor)
  std::string recommended_conf;                   ///< least memory that passes, when any

  std::vector<Evidence> evidence;
  std::vector<Action> actions;      ///< ranked: the first is the one to try first
  std::vector<Action> do_not;       ///< what not to do, and why
  std::vector<std::string> decide_with;  ///< for kUndetermined: what would decide it
  std::vector<std::string> healthy;      ///< for kOk: what is healthy and the margin left

  std::vector<std::string> inputs_used;     ///< "snapshot: PATH", ...
  /// Inputs left out (a damaged or special file): the path and why, one line each.
  std::vector<std::pair<std::string, std::string>> skipped_inputs;
  std::vector<std::string> inputs_missing;  ///< what was not given and what it would add
  std::vector<RankFacts> ranks;
  std::optional<int> worst_rank;
  std::string rank_spread;  ///< one line, when several ranks were given

  /// For the HTML: the segments at the OOM (or at the end) and the recorded curve.
  std::vector<metrics::SegmentRow> segment_map;
  bool segment_map_at_oom = false;
  std::vector<TimelineSample> timeline;
  std::optional<std::size_t> timeline_oom_index;
  std::vector<StepTime> step_times;  ///< the diagnosed rank's telemetry, in order

  /// @brief Appends one fact to `evidence`.
  void add_evidence(std::string key, std::string text) { evidence.push_back({std::move(key), std::move(text)}); }
};

}  // namespace fragscope::diagnose
