#pragma once
/// @file traced_oom_findings.h
/// @brief What the verdict on a traced OOM found (traced_oom_verdict.h), as data: the replay at
/// the capacity, the phase and how it was told, the projections with their margins, the rule that
/// decided. report/traced_oom_words.h words it as evidence, trigger and what would decide it.
///
/// Where the words are made: the doctor's other steps read them as soon as the verdict is in (its
/// actions quote the trigger, the evidence keeps its order among the OOM's other facts), and
/// diagnose may not include report. So the caller of the doctor passes the wording in
/// (DoctorOptions::word_traced_oom, normally report::traced_oom_words); the verdict fills the
/// record, calls it once, and keeps the words it returns.
/// Thread-safety: plain values.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "diagnose/compiled_graph.h"
#include "diagnose/diagnosis.h"
#include "diagnose/list_op_projection.h"
#include "snapshot/history_start.h"

namespace fragscope::diagnose {

/// @brief The rule of traced_oom_verdict.h that decided, in the order the rules are tried.
enum class TracedOomRule : std::uint8_t {
  kIdealPackerFails,         ///< capacity: even perfect packing cannot serve the failing malloc
  kExpandableFailsAtOom,     ///< capacity: from the job's start, expandable segments cannot serve it either
  kListOpExceeds,            ///< capacity: an optimizer step's list op needs more than the device
  kUnrecordedPass,           ///< undetermined: a pass the recorded steps never ran
  kNoStepProjection,         ///< undetermined: a training step whose peak cannot be projected
  kStepExceeds,              ///< capacity: the step projected from telemetry needs more
  kNextStepExceeds,          ///< capacity: ... or the next one, with the gradients back
  kStepTooClose,             ///< undetermined: within too_close_fraction below the capacity
  kStepFits,                 ///< fragmentation (stranded: no setting of the sweep passes)
  kUncheckedSeveralScales,   ///< undetermined: sizes follow the reference by more than one scale, no unit checks it
  kProjectionMissesHistory,  ///< undetermined: the trace projection misses its own earlier units
  kPrefixMisfit,             ///< undetermined: the fit misses the failing step's own allocations so far
  kProjectedStepExceeds,     ///< capacity: the step projected from the trace, beyond its margins
  kNextUnitMayNotFit,        ///< undetermined: it fits, a step like it with the gradients back may not
  kLongerBatchMayNotFit,     ///< undetermined: it fits, a longer batch the trace made may not
  kFewBatchesSeen,           ///< undetermined: it fits, but the batches vary and few were seen (their range unseen)
  kRunGrows,                 ///< undetermined: it fits, but the run grows (RunGrowth): the steps still to come decide
  kBatchesGrow,              ///< undetermined: it fits, but the batches grew step after step: one more may not fit
  kProjectedStepFits,        ///< fragmentation: a setting runs it with its margin
  kNoSettingRunsProjected,   ///< capacity: no setting runs it even with the margin added
  kNoSettingRunsAtCapacity,  ///< capacity: no setting runs it at the capacity, the margin to fail unmet
  kProjectedStepTooClose,    ///< undetermined: within the projection's margins
  kWorkspacesHidden,         ///< undetermined: needs more, but stacks without C++ frames hide its cuDNN workspaces
  kEvalExceeds,              ///< capacity: a first eval pass, projected from the training's call
  kEvalFits,                 ///< fragmentation
  kEvalTooClose,             ///< undetermined
};

/// @brief How the phase of the failing pass was told.
enum class PhaseReason : std::uint8_t {
  kCallPath,       ///< oom_phase.h decided it; PhaseClues::source says how
  kFirstStep,      ///< no statement of the loop ran before: the run's first step (at program_frame)
  kFirstEval,      ///< an evaluation (eval_statement) that did not run before in the trace
  kStepRepeats,    ///< the failing unit's statement ran before: the training step repeating
  kUnitRepeats,    ///< the program's own loop repeats below one call: training or eval repeating
  kOtherPass,      ///< the failing pass shares no call stack with the recorded training steps
  kProjectedUnit,  ///< the unit of the trace projection (its statement, its earlier units)
};

/// @brief What the call path and the trace's units say of the failing pass.
struct PhaseClues {
  std::string source;          ///< oom_phase.h's account (kCallPath)
  std::string program_frame;   ///< kFirstStep: where the first step failed
  bool starts_mid_run = false;  ///< kFirstStep: ... or, the trace starting mid-run, the first step it holds
  bool backward = false;        ///< kFirstStep: the failing malloc is autograd's (the step's backward pass)
  /// kFirstStep: a later statement of a function the failing one runs through that allocated before it
  /// (TraceUnits::later_statement): the failing pass is one the loop had not run before, not the run's first step.
  std::string later_statement;
  std::string later_than;      ///< ... the failing pass's statement it comes after
  std::string eval_statement;  ///< kFirstEval
  std::string call_statement;  ///< the call path's statement (kFirstEval: below it, when it repeated)
  bool eval_below_repeating = false;
  std::string unit_statement;     ///< the repeating unit's (kStepRepeats, kUnitRepeats)
  std::size_t earlier_units = 0;  ///< times it ran before in the trace
  bool eval_units = false;        ///< kUnitRepeats: the units are eval batches
  bool anchor_is_oom = true;      ///< kStepRepeats: false when the failing malloc has no Python frames
};

/// @brief One setting of the what-if sweep at the capacity, as the verdict names it.
struct SweepSetting {
  std::string conf;  ///< PYTORCH_CUDA_ALLOC_CONF ("" = defaults)
  bool passes_oom_point = false;
  std::uint64_t peak_reserved_bytes = 0;  ///< up to where it stopped
};

/// @brief Why StepProjection (telemetry) has no figures, when the verdict is the reason.
enum class StepProjectionGap : std::uint8_t {
  kNone,            ///< available, or step_projection.h's own reason
  kNoTelemetry,     ///< no step telemetry of the failing rank
  kPassNotInTrace,  ///< a pass the recorded steps never ran
  kNotNeeded,       ///< the failing malloc alone does not fit
};

/// @brief The record the verdict on a traced OOM fills in, in the order it finds things.
struct TracedOomFindings {
  TracedOomRule rule = TracedOomRule::kUnrecordedPass;
  std::uint64_t capacity_bytes = 0;
  std::string capacity_source;
  std::size_t oom_index = 0;
  std::uint64_t request_bytes = 0;
  std::uint64_t live_at_oom_bytes = 0;   ///< recorded, before the failing request
  /// What CUDA graphs' private pools hold beyond their live blocks there, packed ideally: the most each had
  /// live (PyTorch neither frees nor lends a pool's memory while its graphs live).
  std::uint64_t private_pool_idle_bytes = 0;
  std::optional<SweepSetting> recorded;  ///< the recorded setting replayed at the capacity
  std::optional<SweepSetting> best;      ///< the first of the sweep that passes the OOM point
  std::size_t sweep_settings = 0;
  std::uint64_t expandable_reserved_bytes = 0;  ///< kExpandableFailsAtOom: reserved where it failed

  /// The phase: `found` from the call path and the trace's units; `other_pass` when the
  /// telemetry's projection saw a pass unlike the recorded steps; projected_unit when the
  /// trace projection decided (it replaces the others).
  std::string phase;  ///< the final phase_name()
  PhaseReason found_reason = PhaseReason::kCallPath;
  std::string found_phase;
  bool other_pass = false;
  bool projected_unit = false;
  PhaseClues clues;
  std::optional<std::size_t> optimizer_steps_done;  ///< in the trace, when they outnumber the records
  std::size_t optimizer_steps_recorded = 0;
  std::optional<std::string> call_site;  ///< the failing malloc's innermost frame
  std::string call_site_statement;

  /// The failing pass's statement (a pass the recorded steps never ran) and the last recorded step.
  std::string pass_statement;
  std::optional<std::int64_t> last_recorded_step;
  std::optional<ListOpProjection> list_op;  ///< an optimizer step's failing list op
  /// The failing malloc ran in a graph torch.compile generated for the failing unit.
  std::optional<CompiledAnew> compiled_anew;

  StepProjection step;  ///< from the telemetry
  StepProjectionGap step_gap = StepProjectionGap::kNone;
  TraceStepProjection trace;  ///< from the trace alone
  bool trace_has_no_repeating_unit = false;
  bool starts_mid_run = false;           ///< the trace starts mid-run (projected step, or a pass never recorded)
  /// What the telemetry's projection needed when it lay within too_close_fraction of the capacity
  /// and the trace's projection decided instead.
  std::optional<std::uint64_t> telemetry_too_close_bytes;
  /// kStepTooClose where no setting runs the projection, which would be capacity but that the step before's
  /// gradients, freed where its backward begins, leave it this much live with perfect packing, 1% under the capacity
  /// or more (TraceStepProjection::held_freed_saving_bytes).
  std::optional<std::uint64_t> held_freed_needed_bytes;
  std::int64_t max_recorded_tokens = 0;  ///< the largest recorded step's (telemetry)
  bool longest_batch = false;            ///< the failing step has more tokens than any recorded

  /// Sizes in the trace are the recorded setting's: when it rounds requests up, the live
  /// blocks hold ×inflation what they asked for (1 when that was not taken out).
  double inflation = 1.0;
  std::string unrounded_conf;            ///< the best setting, which does not round (telemetry projection)
  std::uint64_t needed_bytes = 0;        ///< what the failing pass needs at requested sizes
  std::uint64_t most_needed_bytes = 0;   ///< an eval pass's upper estimate at requested sizes
  std::uint64_t next_needed_bytes = 0;   ///< a step like it with the carried bytes back
  double too_close_fraction = 0;         ///< kStepTooClose: the band below the capacity
  double max_fit_error = 0;              ///< kProjectionMissesHistory: the error it exceeded
  /// kProjectionMissesHistory: by how much it missed, and on which side when only the side that would decide
  /// missed (a fit checked on enough units keeps its residuals' signs): "below", "above" or "" (both).
  double missed_by = 0;
  std::string missed_side;
  std::optional<ProjectedRun> best_run;  ///< the projected pass's least-memory setting with margin
  bool any_relaid_start = false;         ///< some setting replayed from a re-laid start
  /// kLongerBatchMayNotFit: what a setting may hold live with the margins the failing step's run kept (the
  /// re-laid start's too), and the room it took above perfect packing in the failing step, which the longest
  /// batch seen needs on top of its own live bytes.
  std::uint64_t longest_batch_limit_bytes = 0;
  std::uint64_t setting_room_bytes = 0;
  /// kBatchesGrow: the live peak of one more step grown as the last one did (TraceStepProjection::last_growth),
  /// at the sizes asked for.
  std::uint64_t grown_batch_needed_bytes = 0;
  /// The run's growth (run_growth.h); with kRunGrows, the steps after the failing one that it leaves room for,
  /// with the fit's margin, and what the next one needs.
  RunGrowth growth;
  std::size_t growing_steps_that_fit = 0;
  std::uint64_t grown_needed_bytes = 0;
  /// A trace that starts mid-run and decided nothing: whether its ring wrapped or history began late, by the
  /// blocks older than it (judge_traced_oom sets it for the words that name it).
  snapshot::HistoryStart history_start = snapshot::HistoryStart::kUnknown;
  /// Undetermined on a trace that starts mid-run with no earlier step to project from.
  bool mid_run_without_projection = false;
  /// ... a pass the steps never ran, on a trace that starts mid-run and holds no earlier step:
  /// the end of the step before and the failing one's head (PhaseReason::kFirstStep).
  bool mid_run_first_pass = false;
  /// A projected step: the least factor of its batch whose step needs more than the device with
  /// perfect packing, and more than that beyond the projection's margins (batch_headroom.h).
  std::optional<double> batch_factor_at_capacity;
  std::optional<double> batch_factor_beyond_margins;
  /// ... whose only earlier step a ring cut (TraceStepProjection::cut_unit_events): the
  /// max_entries of a history that holds two whole steps before the failing one.
  std::optional<std::size_t> max_entries_for_two_steps;
};

/// @brief The max_entries of a history three times `events` long, rounded up to a thousand: two whole
/// steps and the failing one's head, when `events` is what one step takes.
inline std::size_t history_entries_for(std::size_t events) { return (3 * events + 999) / 1000 * 1000; }

/// @brief The verdict's words: evidence (in order), trigger, the phase's source, what would
/// decide it, and the projections' reasons when the verdict supplies them.
struct TracedOomWords {
  std::vector<Evidence> evidence;
  std::string trigger;
  std::string phase_source;
  std::vector<std::string> decide_with;
  std::optional<std::string> step_unavailable_reason;
  std::optional<std::string> trace_unavailable_reason;
};

/// @brief Words a record (report/traced_oom_words.h).
using TracedOomWording = std::function<TracedOomWords(const TracedOomFindings&)>;

}  // namespace fragscope::diagnose
