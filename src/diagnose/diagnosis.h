#pragma once
/// @file diagnosis.h
/// @brief What `fragscope doctor` concludes: one verdict, the evidence that decided it, the
/// context around it and ranked actions. docs/doctor.md explains every field.
///
/// A Diagnosis is data only; src/report/doctor_report.h renders it as text, JSON or HTML.
/// Thread-safety: a plain value.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "metrics/segment_map.h"
#include "util/job_phase.h"

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

/// @brief How one allocator setting runs the step projected from the trace (trace_projection.h).
struct ProjectedRun {
  std::string conf;  ///< PYTORCH_CUDA_ALLOC_CONF ("" = defaults)
  bool recorded = false;
  bool runs = false;               ///< completes the projected step at the capacity
  bool runs_with_margin = false;   ///< ... at the capacity less margin_to_fit
  /// Fails even at the capacity plus margin_to_fail, with its elastic mallocs refused where they do not fit
  /// (replay::ElasticAllocs::kRefuseWhenFull: ATen would run a plan with less workspace).
  bool fails_with_margin = false;
  /// When it does not run: completes the projected step at the capacity plus kProjectionFloor (projected_runs.h),
  /// its elastic mallocs refused where they do not fit.
  bool runs_above_capacity = false;
  /// Replayed from a mid-run trace's live blocks re-laid as this setting holds them
  /// (replay::relays_initial_state): it must leave relaid_start_margin more.
  bool relaid_start = false;
  /// When it runs at the capacity: what it reserved at its peak (the recorded prefix's and the projected rest's).
  std::uint64_t peak_reserved_bytes = 0;
};

/// @brief A run that grows: what its earlier steps left live at the failing malloc, from call stacks that left
/// some in every step (run_growth.h).
struct RunGrowth {
  /// The least that one counted step left live from those stacks; 0 when the run does not grow.
  std::uint64_t per_step_bytes = 0;
  std::size_t steps = 0;         ///< the steps counted
  std::uint64_t kept_bytes = 0;  ///< live at the failing malloc from those stacks, made before the failing unit
  std::string frame;             ///< the program's frame that made the most of it ("train.py:52 in <module>")
  bool eval_batches = false;     ///< the steps are eval batches (a validation that keeps each batch's outputs)
  /// What grows is made anew every step, the one before it freed (a KV cache grown by torch.cat at every decoded
  /// token): no step leaves blocks live, the memory live at each step's start rises; per_step_bytes is the least
  /// rise, kept_bytes the rise over the steps counted.
  bool regrown = false;
  /// With regrown: the least rise of the complete steps' peaks over the steps counted, when more than
  /// per_step_bytes (the old tensor and its larger copy live at once); else 0.
  std::uint64_t peak_per_step_bytes = 0;
  bool grows() const { return per_step_bytes > 0; }
  /// What each step after the failing one needs more at its peak.
  std::uint64_t peak_growth_bytes() const { return std::max(per_step_bytes, peak_per_step_bytes); }
};

/// @brief The job's own calls of torch.cuda.empty_cache() before the OOM (cache_empties.h).
struct CacheEmpties {
  std::size_t calls = 0;
  std::uint64_t released_bytes = 0;  ///< the segments they released
  std::string frame;                 ///< the program's frame of the last one ("train.py:70 in <module>")
};

/// @brief The failing step projected from the trace alone, without step telemetry.
struct TraceStepProjection {
  bool available = false;
  std::string unavailable_reason;
  std::string unit_statement;     ///< the repeating unit's statement
  bool eval_units = false;        ///< the units are eval batches
  /// The failing pass ran for the first time in the trace (an eval batch) and is projected from
  /// the training step's call of the same function (eval_projection.h): "units" below are those
  /// calls, and the projected peak is an upper estimate.
  bool from_training_call = false;
  std::string training_call;  ///< with from_training_call: the training's call site, "trainer.py:2014 in training_step"
  std::string shared_function;     ///< with from_training_call: the function both call, "trainer.py in compute_loss"
  /// With from_training_call: the live peak from the failing malloc to the batch's end, upper
  /// and lower estimates (projected_peak_bytes is over the whole synthetic trace, history included).
  std::uint64_t most_peak_bytes = 0;
  std::uint64_t least_peak_bytes = 0;
  std::size_t learned_lifetimes = 0;   ///< with from_training_call: blocks freed where the eval freed their like
  std::size_t earlier_units = 0;  ///< units before the failing one in the trace
  std::size_t reference_unit = 0;                ///< 1-based among the trace's units
  std::size_t reference_first_event = 0;         ///< trace events of the reference unit
  std::size_t reference_end_event = 0;           ///< (the next unit's first allocation)
  std::size_t aligned_event = 0;  ///< the reference's allocation matched with the failing malloc
  std::size_t prefix_allocations = 0;   ///< the failing unit's, up to the failing malloc
  std::size_t matched_allocations = 0;  ///< of them, matched with the reference's
  /// The reference's allocations up to the aligned one that the failing prefix has no counterpart for
  /// (a first step's cudnn.benchmark trials, lazily made workspaces), in bytes.
  std::uint64_t reference_unmatched_bytes = 0;
  /// The reference is the job's first step (the trace starts with the job).
  bool reference_is_first_step = false;
  /// ... and its unmatched bytes are more than its later steps would allocate (a share of the capacity): first-time
  /// work such as cudnn.benchmark's trials, which its rest may hold too; an unchecked fit keeps a wider margin.
  bool first_step_unlike = false;
  /// Unavailable because a ring or a late history start cut the trace's only earlier unit: the
  /// trace events a whole unit takes (its record plus the failing unit's head that it lost).
  std::optional<std::size_t> cut_unit_events;
  double scale = 1.0;  ///< the failing unit's allocation sizes / the reference's
  std::size_t aligned_units = 0;  ///< earlier units its prefix aligned with (any kind)
  std::size_t smaller_units = 0;  ///< of them, those the failing unit is larger than (by 2%)
  /// Of them, those whose sizes are not the failing unit's: by the scale (2%), or in a part of their bytes (a
  /// pass of a fixed-size part and a part that follows the batch: the scale by bytes is the fixed part's).
  std::size_t varying_units = 0;
  double off_scale_share = 0;  ///< the most, over them, of the paired bytes at another size than the scale
  double reference_off_scale_share = 0;  ///< the reference's paired bytes at another size than `scale` (a share)
  /// The failing unit's sizes follow the reference's by one scale (reference_off_scale_share within 5%): else
  /// two dimensions vary apart (a translation's source and target), or a part of fixed size sits beside one that
  /// follows the batch.
  bool follows_one_scale = true;
  /// The longest of them when one is longer than the failing unit (1-based), and the live peak
  /// of a step that long begun as the failing one began (its held blocks, its kind).
  std::optional<std::size_t> longest_unit;
  std::uint64_t longest_peak_bytes = 0;
  /// Batches that grew up to the failing one (a warm-up of the batch size or the sequence length): how many aligned
  /// units before it, newest first, were each smaller than the one after them (by 2%), and the failing unit's
  /// sizes against the newest of them (the last step's growth; 1 when the newest was not smaller).
  std::size_t growing_units = 0;
  double last_growth = 1.0;
  /// The reference's allocations after the aligned one, by how their size follows the scale.
  std::uint64_t constant_bytes = 0;
  std::uint64_t linear_bytes = 0;
  std::uint64_t quadratic_bytes = 0;
  std::uint64_t other_bytes = 0;      ///< another exponent (between the three)
  std::uint64_t unfitted_bytes = 0;   ///< no other unit tells how they scale: taken as linear
  std::uint64_t unmatched_free_bytes = 0;
  /// The reference is of another kind (fewer or more blocks live when it began, e.g. before the
  /// optimizer made its state): the difference of the bytes live when each began.
  std::uint64_t kind_difference_bytes = 0;
  bool reference_began_lower = false;  ///< ... the reference holding less (the failing unit's doubt is over)
  /// With reference_began_lower: the long-lived blocks (still held where the reference ends) that its
  /// rest made before the projected peak, the most of the difference that can raise the peak.
  std::uint64_t kept_before_peak_bytes = 0;
  /// ... and what the failing unit held at the failing malloc that it may free where the reference had nothing to
  /// free: made since the reference began, outside an optimizer's code, standing for no block of the reference's
  /// rest (the step before's gradients and outputs).
  std::uint64_t held_freeable_bytes = 0;
  /// How much lower the projected peak comes when what the failing unit holds that the reference's rest never frees
  /// is freed where the rest's backward begins (`zero_grad()` between the forward and the backward); 0 when the
  /// trace has no Python frames, the reference began holding as much, or the rest has no backward.
  std::uint64_t held_freed_saving_bytes = 0;
  std::size_t checked_units = 0;      ///< earlier units projected from the reference
  /// Aligned units of another kind left out of the check (the reference being of the failing
  /// unit's kind, two or more of that kind checked).
  std::size_t other_kind_units = 0;
  std::optional<double> fit_error;    ///< largest |projected − real| / real peak among them
  double fit_error_below = 0;  ///< of them, the largest (real − projected) / real: the projection below the truth
  double fit_error_above = 0;  ///< and the largest (projected − real) / real: above it
  /// The share of the failing prefix's paired bytes (allocations of 1 MiB or more whose exponent the other units
  /// tell) whose size the fitted exponents at `scale` miss by more than 2%: a checked fit that misses more than 5%
  /// does not describe the failing step itself.
  double prefix_misfit_share = 0;
  /// What the projected peak may be above / below the truth by: the reference's kind, frees
  /// without a counterpart, allocations no unit tells how they scale (constant to quadratic).
  std::uint64_t over_bytes = 0;
  std::uint64_t under_bytes = 0;
  double fit_margin = 0;      ///< the fit's error as a fraction, at least 1% (5% when unchecked)
  double margin_to_fit = 0;   ///< fraction of the capacity a setting must leave: fit_margin + under
  double margin_to_fail = 0;  ///< fraction the step must exceed it by: fit_margin + over
  double relaid_start_margin = 0;  ///< what a run from a re-laid start leaves beyond margin_to_fit
  std::uint64_t start_level_bytes = 0;     ///< live when the failing unit began
  /// Of start_level_bytes, what its own iteration made before it began (a backward unit's forward activations);
  /// reference_head_bytes the same for the reference.
  std::uint64_t head_bytes = 0;
  std::uint64_t reference_head_bytes = 0;
  std::uint64_t live_at_oom_bytes = 0;     ///< live + the failing request
  std::uint64_t projected_peak_bytes = 0;  ///< the ideal packer's peak over the projected step
  /// The same without its elastic mallocs (replay::Op::elastic: cuDNN workspaces, which ATen replaces by a plan
  /// with less when they are refused): the least the step can need, what a capacity verdict weighs.
  std::uint64_t inelastic_peak_bytes = 0;
  /// The unit after the reference began this much higher than the reference (gradients the
  /// steps after a zero_grad hold again); 0 when it did not.
  std::uint64_t next_unit_extra_bytes = 0;
  std::vector<ProjectedRun> runs;  ///< per setting of the sweep
};

/// @brief A memory reduction the snapshot shows, with what it would save (memory_advice.h).
struct MemoryAdvice {
  std::string key;       ///< "kept_per_step", "kv_cache", "fp32_logits", "foreach_temporaries", "eval_outputs", ...
  std::string title;
  std::string setting;
  std::string evidence;
  std::uint64_t bytes = 0;  ///< live at the OOM that it would not hold
};

/// @brief One row of the what-if table (a replay of the trace under one config).
struct WhatIfLine {
  std::string conf;  ///< PYTORCH_CUDA_ALLOC_CONF ("" = defaults)
  bool recorded = false;
  std::uint64_t peak_reserved_bytes = 0;  ///< without a memory limit (to the OOM point at most)
  /// At the capacity: what it reserved up to where it stopped (the OOM point, or its own OOM).
  std::optional<std::uint64_t> peak_reserved_at_capacity_bytes;
  std::optional<std::size_t> oom_event;   ///< at the capacity: the event it ran out of memory at
  std::optional<bool> passes_oom_point;   ///< at the capacity: served the failing malloc
  std::optional<bool> fits;               ///< at the capacity: no OOM at all
  /// The step projected from the trace (trace_projection.h) at the capacity: runs it / not.
  std::optional<bool> runs_projected_step;
  /// @brief The peak to compare settings by: under the capacity when one is known (without it a cache grows
  /// past what the device had).
  std::uint64_t comparable_peak_reserved_bytes() const {
    return peak_reserved_at_capacity_bytes.value_or(peak_reserved_bytes);
  }
};

/// @brief One point of the recorded reserved / allocated curve: the extremes over one stretch
/// of the trace (recorded_curve.h), so a one-event spike survives the downsampling.
struct TimelineSample {
  std::size_t trace_index = 0;       ///< the stretch's last event
  std::uint64_t reserved_bytes = 0;  ///< the stretch's maxima
  std::uint64_t allocated_bytes = 0;
  std::uint64_t reserved_min_bytes = 0;  ///< the stretch's minima
  std::uint64_t allocated_min_bytes = 0;
  /// The last event's time since the trace's first, when the trace records time.
  std::optional<double> seconds;
};

/// @brief One telemetry record's time split, for the step-time chart.
struct StepTime {
  std::int64_t step = 0;
  double data_wait_ms = 0;
  double compute_ms = 0;
  std::optional<double> t;  ///< seconds since the run started, at the record's end
  std::optional<std::uint64_t> reserved_bytes;   ///< reserved_bytes.all.current at the record's end
  std::optional<std::uint64_t> allocated_bytes;  ///< allocated_bytes.all.current at the record's end
};

/// @brief Where a telemetry record's step ended on the trace (step_alignment.h).
struct StepMark {
  std::int64_t step = 0;
  std::size_t trace_index = 0;  ///< the step's last event
  std::string phase;            ///< the record's phase ("train" when it names none)
  bool optimizer_step = false;
  bool by_figures = false;  ///< placed by its memory figures, not by its time alone
};

/// @brief One nvidia-smi sample of one GPU, for the utilisation chart.
struct SmiPoint {
  double seconds = 0;  ///< since the trace's first sample
  std::optional<double> utilization_percent;
  std::optional<std::uint64_t> memory_used_bytes;
};

/// @brief A CUDA library's own allocation that failed, outside PyTorch's allocator (no PyTorch OOM).
struct LibraryFailure {
  std::string library;  ///< "cuBLAS", ...
  std::string status;   ///< "CUBLAS_STATUS_ALLOC_FAILED", ...
  std::string call;     ///< "cublasCreate(handle)", or "" when the log does not name it
  std::string source;   ///< "PATH:LINE"
};

/// @brief Per-rank figures, for the worst rank and the spread.
struct RankFacts {
  int rank = 0;
  std::optional<std::uint64_t> peak_reserved_bytes;
  std::optional<std::uint64_t> peak_allocated_bytes;
  std::optional<double> data_wait_fraction;
  bool oom = false;
  std::vector<std::string> sources;
  /// For the per-rank pictures, when several ranks were given: the rank's telemetry, and the
  /// recorded curve of its snapshot with the longest trace.
  std::vector<StepTime> step_times;
  std::vector<TimelineSample> timeline;
};

/// @brief Everything the doctor concluded.
struct Diagnosis {
  Verdict verdict = Verdict::kOk;
  std::string headline;  ///< one sentence
  std::string phase;     ///< a phase_name() (util/job_phase.h), or the telemetry's own name
  std::string phase_source;  ///< how the phase was found
  std::string trigger;       ///< what set off the OOM (empty when there was none)
  bool oom = false;
  /// Fragmentation only: some allocator setting of the sweep passes the OOM point. False when
  /// the ideal packer fits but every setting inherits pieces the trace starts with.
  bool setting_fixes_it = true;
  /// Capacity only: told by expandable segments failing at the same malloc when replayed from the
  /// job's start (the ideal packer would serve it; the rest of the pass is not projected).
  bool expandable_fails_at_oom = false;
  /// The run grows (run_growth.h): each step after the failing one needs per_step_bytes more than the one before.
  RunGrowth run_growth;
  CacheEmpties cache_empties;  ///< the job's own torch.cuda.empty_cache() calls in the trace

  std::optional<double> data_wait_fraction;         ///< Σ wait / Σ (wait + compute), all steps
  std::optional<double> steady_data_wait_fraction;  ///< the same without the warm-up step
  std::optional<double> gpu_idle_fraction;          ///< from an nvidia-smi trace

  std::optional<std::uint64_t> capacity_bytes;  ///< what the process could hold at the OOM
  std::string capacity_source;
  std::optional<OomContext> oom_context;
  /// The log's last library allocation failure, when no PyTorch OOM was found (library_failure.h).
  std::optional<LibraryFailure> library_failure;
  StepProjection projection;
  TraceStepProjection trace_projection;  ///< from the trace alone (without telemetry)
  std::vector<WhatIfLine> whatif;
  std::optional<std::uint64_t> ideal_peak_bytes;  ///< the ideal packer's peak (the floor)
  /// The setting to use: under fragmentation, the one that runs the failing step (least memory
  /// first); with no OOM, the one that lowers the reserved peak; empty otherwise.
  std::string recommended_conf;

  std::vector<MemoryAdvice> memory_advice;  ///< largest first; placed among the actions by verdict
  std::vector<Evidence> evidence;
  std::vector<Action> actions;      ///< ranked: the first is the one to try first
  std::vector<Action> do_not;       ///< what not to do, and why
  std::vector<std::string> warnings;     ///< how inputs were told apart into ranks, what stays merged
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
  std::vector<StepMark> step_marks;  ///< those steps' ends on the curve's trace, when they align
  /// Where the failing unit of the trace began (an eval batch's start when the units are eval
  /// batches; trace_units.h), when the trace shows the unit repeating; the curve shows `phase`
  /// from there to the OOM.
  std::optional<std::size_t> failing_unit_start;
  /// The nvidia-smi trace of the GPU that ran out of memory (else the first), when one of
  /// kMinSmiTraceSamples samples or more was given.
  std::vector<SmiPoint> smi_trace;
  std::optional<int> smi_gpu;

  /// @brief Appends one fact to `evidence`.
  void add_evidence(std::string key, std::string text) { evidence.push_back({std::move(key), std::move(text)}); }
  /// @brief Whether the phase is `p` (by its name: the telemetry may give one of its own).
  bool in_phase(JobPhase p) const { return phase == phase_name(p); }
};

}  // namespace fragscope::diagnose
