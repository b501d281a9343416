#include "diagnose/traced_oom_verdict.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <string>

#include <fmt/format.h>

#include "diagnose/batch_headroom.h"
#include "diagnose/eval_projection.h"
#include "diagnose/list_op_projection.h"
#include "diagnose/memory_advice.h"
#include "diagnose/oom_call_path.h"
#include "diagnose/oom_phase.h"
#include "diagnose/projected_runs.h"
#include "diagnose/step_projection.h"
#include "diagnose/trace_projection.h"
#include "diagnose/trace_units.h"
#include "diagnose/whatif_lines.h"
#include "metrics/memory_totals.h"
#include "replay/capacity.h"
#include "replay/prepared_trace.h"
#include "replay/replay_engine.h"
#include "replay/whatif.h"
#include "util/bytes.h"
#include "util/quantiles.h"

namespace fragscope::diagnose {
namespace {

/// A projected peak this close below the capacity (a fraction of it) decides nothing: the
/// projection came within 1% of the real peaks on held-out recordings (docs/VALIDATION.md),
/// and a real allocator needs some room above live bytes (expandable segments: 1.4% on one).
constexpr double kTooClose = 0.02;

/// The least error assumed of a projection from the trace alone (a fraction of its peak), and
/// the error assumed when no earlier unit could check the fit. On the five held-out recordings
/// whose reruns recorded the failing step's peak, the checked projections (fit errors up to
/// 0.43%) came to it to the byte; unchecked near their reference they missed by at most 0.48%
/// beyond their under_bytes (below).
constexpr double kProjectionFloor = 0.005;
constexpr double kUncheckedProjection = 0.05;

/// A projection no other unit checks still keeps only kProjectionFloor on the side that decides
/// fragmentation when the failing unit is within this factor of its reference (|log scale|):
/// projected from the unit before it alone, every unit of the complete recordings within it
/// (299 cuts, tests/diagnose/trace_projection_test.cpp) peaked at most 0.48% above the
/// projection and its under_bytes; beyond it (3× and more) up to 7.9%.
constexpr double kUncheckedMaxLogScale = 1.0;

/// What an eval projected from the training call (eval_projection.h) keeps from the capacity
/// each way: its two estimates bracketed the real peak at every cut of the complete eval
/// batches (docs/VALIDATION.md), so no fit error is added; this is for what those cuts did not show.
constexpr double kEvalFloor = 0.005;

/// A projection whose own history it misses by more than this (a fraction of the real peaks)
/// decides nothing.
constexpr double kMaxFitError = 0.05;

/// What a setting replayed from a mid-run trace's re-laid start must leave on top of the fit's
/// margin: on the 30 complete recordings that end in an OOM, cut at 10%…90% (257 cuts), such a
/// replay needed up to 0.49% of the capacity less than the same setting replayed from the job's
/// start when the OOM was in a training step, up to 0.99% in an eval pass
/// (tests/replay/field_test.cpp, docs/replay.md).
constexpr double kRelaidTrainingStart = 0.005;
constexpr double kRelaidEvalStart = 0.01;

std::string pct(double fraction) { return fmt::format("{:.1f}%", 100.0 * fraction); }

/// Σ size / Σ requested size of the blocks live in the snapshot of `device` (1 when none).
double rounding_inflation(const snapshot::Snapshot& snap, int device) {
  const metrics::MemoryTotals live =
      metrics::compute_totals(snap, [&](const snapshot::Segment& segment) { return segment.device == device; });
  return live.requested_bytes > 0 && live.allocated_bytes > live.requested_bytes
             ? static_cast<double>(live.allocated_bytes) / static_cast<double>(live.requested_bytes)
             : 1.0;
}

bool rounds_up(const alloc::AllocConfig& config) {
  return std::any_of(config.roundup_power2_divisions.begin(), config.roundup_power2_divisions.end(),
                     [](std::uint32_t divisions) { return divisions > 0; });
}

/// Optimizer.step annotations (PyTorch records them around torch.optim steps) ended before the OOM.
std::optional<std::size_t> optimizer_steps_before(const snapshot::Snapshot& snap, int device, std::size_t oom_index) {
  const std::int64_t time = snap.trace(device)[oom_index].time_us;
  std::size_t ends = 0;
  bool any = false;
  for (const snapshot::Annotation& a : snap.annotations) {
    if (a.device != device) continue;
    std::string_view stage, name;
    for (const auto& [key, value] : a.fields) {
      if (snap.strings.view(key) == "stage") stage = snap.strings.view(value);
      if (snap.strings.view(key) == "name") name = snap.strings.view(value);
    }
    if (!name.starts_with("Optimizer.step")) continue;
    any = true;
    if (stage == "END" && a.time_us <= time) ++ends;
  }
  if (!any) return std::nullopt;
  return ends;
}

/// A pass the recorded steps never ran (eval, checkpoint, an optimizer step): its peak is not
/// in the trace, so only a list op that provably needs more than the device decides it.
Verdict judge_unrecorded_pass(const snapshot::Snapshot& snap, int device, const RecordedCurve& curve,
                              std::size_t oom_index, std::uint64_t cap, const std::string& statement,
                              std::span<const inputs::StepRecord> steps, Diagnosis& d) {
  if (d.in_phase(JobPhase::kOptimizer)) {
    const ListOpProjection op = project_failing_list_op(snap, device, curve, oom_index);
    if (op.available) {
      d.add_evidence(
          "list_op",
          fmt::format("the failing malloc ({}) is result {} of {} of a list op, one tensor per parameter in the order "
                      "{} allocated them: the {} left need {}, so the op needs at least {} live",
                      op.site, op.done + 1, op.total, op.list_site, op.total - op.done,
                      format_bytes(op.remaining_bytes), format_bytes(op.projected_peak_bytes)));
      if (op.projected_peak_bytes > cap) {
        d.add_evidence("projection_vs_capacity",
                       fmt::format("the optimizer step needs at least {} of live memory even with perfect packing; "
                                   "the device gives {} — short by {}",
                                   format_bytes(op.projected_peak_bytes), format_bytes(cap),
                                   format_bytes(op.projected_peak_bytes - cap)));
        d.trigger = "an optimizer step: its state and its foreach temporaries";
        return Verdict::kCapacity;
      }
    }
  }
  const std::int64_t after = steps.empty() ? -1 : steps.back().step;
  d.trigger = d.in_phase(JobPhase::kOptimizer)    ? "an optimizer step allocating its state"
              : d.in_phase(JobPhase::kCheckpoint) ? "a checkpoint save"
              : d.in_phase(JobPhase::kEval)
                  ? fmt::format("an eval pass ({}){}", statement,
                                after >= 0 ? fmt::format(" after the last recorded step ({})", after) : "")
                  : fmt::format("a pass the recorded steps never ran ({})", statement);
  d.projection.available = false;
  d.projection.unavailable_reason = fmt::format("the {} phase's peak is not in the trace: the recorded training steps "
                                                "say nothing about it", d.phase);
  d.add_evidence("undecidable",
                 fmt::format("the OOM is in {}; the trace ends at its failing malloc, so its peak is unknown. "
                             "That the failing malloc would fit proves nothing about the rest of the pass",
                             d.trigger));
  d.decide_with = {
      fmt::format("a snapshot across the whole {} phase: record history through it and dump from the OOM observer "
                  "(torch._C._cuda_attach_out_of_memory_observer), or run the phase alone with history on", d.phase),
      "the job spec (model, batch, sequence length) for `fragscope plan`, which computes the phase's peak",
      fmt::format("one rerun of the {} phase with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True at the same memory: "
                  "if it still fails, the verdict is capacity", d.phase)};
  return Verdict::kUndetermined;
}

/// A training step like the recorded ones: its projected peak (step_projection.h) against the capacity.
Verdict judge_training_step(const snapshot::Snapshot& snap, int device, const alloc::AllocConfig& recorded_config,
                            const replay::WhatIfRow* best, std::uint64_t cap, const TelemetryInput* telemetry,
                            std::span<const inputs::StepRecord> steps, Diagnosis& d) {
  if (!telemetry)
    d.projection.unavailable_reason = "no step telemetry: the failing step's tokens and static memory are unknown";
  const StepProjection& p = d.projection;
  if (!p.available) {
    d.add_evidence("projection", "no projection of the failing step's peak: " + p.unavailable_reason);
    d.trigger = "a training step";
    d.decide_with = {
        "step telemetry (steps.jsonl from the fragscope hook) of the failing rank, so the failing step's peak "
        "can be projected from the recorded steps",
        "one rerun with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True at the same memory"};
    return Verdict::kUndetermined;
  }
  std::int64_t max_tokens = 0;
  for (const auto& r : steps)
    if (const auto t = record_tokens(r)) max_tokens = std::max(max_tokens, *t);
  if (p.failing_tokens && max_tokens > 0 && *p.failing_tokens > max_tokens)
    d.trigger = fmt::format(
        "the longest batch of the run so far: step {} has {} tokens, {:.2f}× the largest recorded step ({} tokens)",
        p.failing_step.value_or(0), *p.failing_tokens,
        static_cast<double>(*p.failing_tokens) / static_cast<double>(max_tokens), max_tokens);
  else
    d.trigger = fmt::format("training step {}", p.failing_step.value_or(0));
  d.add_evidence(
      "projection",
      fmt::format("projected peak of step {}: {} = {} static + {} activations of reference step {} scaled ×{:.3f}{} + "
                  "{} that do not scale",
                  p.failing_step.value_or(0), format_bytes(p.projected_peak_bytes), format_bytes(p.static_bytes),
                  format_bytes(p.reference_transient_bytes - p.reference_constant_bytes), p.reference_step.value_or(0),
                  p.token_ratio,
                  p.failing_tokens && p.reference_tokens
                      ? fmt::format(" ({} → {} tokens)", *p.reference_tokens, *p.failing_tokens)
                      : "",
                  format_bytes(p.reference_constant_bytes)));
  // Sizes in the trace are the recorded setting's: one that rounds requests up
  // (roundup_power2_divisions) inflates every live byte, and the best setting may not round.
  std::uint64_t peak = p.projected_peak_bytes;
  std::uint64_t next = p.next_step_peak_bytes;
  if (const double inflation = rounding_inflation(snap, device);
      rounds_up(recorded_config) && best && !rounds_up(best->config.config) && inflation > 1.01) {
    peak = static_cast<std::uint64_t>(static_cast<double>(peak) / inflation);
    next = static_cast<std::uint64_t>(static_cast<double>(next) / inflation);
    d.add_evidence(
        "rounding",
        fmt::format("the recorded setting rounds requests up (roundup_power2_divisions): the snapshot's live blocks "
                    "hold ×{:.3f} the bytes they asked for; {} does not round, and at requested sizes the step "
                    "projects to about {}",
                    inflation, best->config.conf, format_bytes(next)));
  }
  if (peak > cap) {
    d.add_evidence(
        "projection_vs_capacity",
        fmt::format("the step needs about {} of live memory even with perfect packing; the device gives {} — "
                    "short by {}",
                    format_bytes(peak), format_bytes(cap), format_bytes(peak - cap)));
    return Verdict::kCapacity;
  }
  d.add_evidence("projection_vs_capacity",
                 fmt::format("the step's projected peak {} fits in {} ({} to spare with perfect packing)",
                             format_bytes(peak), format_bytes(cap), format_bytes(cap - peak)));
  if (next > cap) {
    d.add_evidence(
        "next_step",
        fmt::format("but step {} runs without {} that the steps before it kept from one step to the next "
                    "(gradients dropped after the optimizer step); the next steps hold them again, and a batch "
                    "like step {}'s then needs about {}: short by {} even with perfect packing",
                    p.failing_step.value_or(0), format_bytes(p.returning_bytes), p.failing_step.value_or(0),
                    format_bytes(next), format_bytes(next - cap)));
    return Verdict::kCapacity;
  }
  if (const std::uint64_t spare = cap - next; spare < kTooClose * static_cast<double>(cap)) {
    d.add_evidence(
        "too_close",
        fmt::format("the step would leave {} ({:.1f}% of {}) with perfect packing: closer than the projection's "
                    "accuracy ({:.0f}%: on held-out recordings it came within 1% of the real peaks), and every "
                    "allocator needs some room above the live bytes, so whether a setting runs the step cannot be "
                    "told from the trace",
                    format_bytes(spare), 100.0 * static_cast<double>(spare) / static_cast<double>(cap),
                    format_bytes(cap), 100.0 * kTooClose));
    d.trigger =
        fmt::format("training step {}, within {:.0f}% of the capacity", p.failing_step.value_or(0), 100.0 * kTooClose);
    d.decide_with = {
        fmt::format("one rerun with PYTORCH_CUDA_ALLOC_CONF={} at the same memory: if it fails in the same step, "
                    "the verdict is capacity",
                    d.recommended_conf.empty() ? "expandable_segments:True" : d.recommended_conf),
        "or make room instead of deciding: activation checkpointing, or a smaller micro-batch with more accumulation"};
    return Verdict::kUndetermined;
  }
  if (!best) {
    d.setting_fixes_it = false;
    d.add_evidence("stranded",
                   "the ideal packer fits the step but no setting of the sweep does: the trace starts with the memory "
                   "already in pieces (live blocks pinning split segments), and a setting changed from that state "
                   "inherits them");
  }
  return Verdict::kFragmentation;
}

/// The fit's error on earlier units as a fraction (at least kProjectionFloor; kUncheckedProjection
/// when no unit could check it), and the margins the verdict keeps from the capacity each way
/// (an unchecked fit within kUncheckedMaxLogScale of its reference keeps the floor to fit).
void set_margins(TraceStepProjection& p, std::uint64_t cap, bool starts_mid_run) {
  p.fit_margin = p.fit_error ? std::max(kProjectionFloor, *p.fit_error) : kUncheckedProjection;
  p.relaid_start_margin = !starts_mid_run ? 0 : p.eval_units ? kRelaidEvalStart : kRelaidTrainingStart;
  const auto share = [&](std::uint64_t bytes) {
    return static_cast<double>(bytes) / static_cast<double>(std::max<std::uint64_t>(cap, 1));
  };
  const bool near_its_reference = std::abs(std::log(p.scale)) < kUncheckedMaxLogScale;
  p.margin_to_fit = (p.fit_error || !near_its_reference ? p.fit_margin : kProjectionFloor) + share(p.under_bytes);
  p.margin_to_fail = p.fit_margin + share(p.over_bytes);
}

/// How a setting of expandable segments was replayed from a mid-run trace, and why its margin is larger.
std::string relaid_start_note(const TraceStepProjection& p) {
  return fmt::format(
      " (the trace starts mid-run: it was replayed from the live blocks the trace starts with, laid back to back as "
      "expandable segments hold them, so it must leave {} more than the fit's margin)",
      pct(p.relaid_start_margin));
}

std::string describe_projection(const TraceStepProjection& p) {
  std::string rest =
      fmt::format("{} constant, {} linear", format_bytes(p.constant_bytes), format_bytes(p.linear_bytes));
  if (p.quadratic_bytes) rest += fmt::format(", {} quadratic", format_bytes(p.quadratic_bytes));
  if (p.other_bytes) rest += fmt::format(", {} another power", format_bytes(p.other_bytes));
  if (p.unfitted_bytes)
    rest += fmt::format(", {} that no earlier unit tells (taken as linear)", format_bytes(p.unfitted_bytes));
  return fmt::format(
      "the failing unit's allocations up to the failing malloc match unit {} of {} (events {}–{}) call stack by "
      "call stack ({} of {}; the failing malloc is its event {}); their sizes are ×{:.3f} its own. Its rest, "
      "scaled by how each allocation's size follows the scale over the other units ({}), makes the failing "
      "step peak at {} live with perfect packing",
      p.reference_unit, p.earlier_units + 1, p.reference_first_event, p.reference_end_event - 1, p.matched_allocations,
      p.prefix_allocations, p.aligned_event, p.scale, rest, format_bytes(p.projected_peak_bytes));
}

/// The failing step projected from the trace alone (trace_projection.h), replayed at the
/// capacity: capacity when even perfect packing exceeds it by more than the projection's
/// margins (set_margins), fragmentation when a setting runs it with its margin, undetermined
/// between.
Verdict judge_projected_step(ProjectedStep& step, const std::vector<replay::WhatIfConfig>& configs,
                             const replay::Capacity& capacity, double inflation, const DoctorOptions& options,
                             const OomCallPath& call_path, Diagnosis& d) {
  TraceStepProjection& p = step.figures;
  const std::uint64_t cap = capacity.effective_bytes().value_or(0);
  set_margins(p, cap, step.trace.starts_mid_run);
  replay_projected_step(step, configs, capacity, options.threads);
  for (WhatIfLine& line : d.whatif)
    for (const ProjectedRun& run : p.runs)
      if (run.conf == line.conf) line.runs_projected_step = run.runs;
  d.phase = phase_name(p.eval_units ? JobPhase::kEval : call_path.optimizer ? JobPhase::kOptimizer : JobPhase::kTrain);
  d.phase_source = fmt::format("the failing unit's statement ({}) ran {} time(s) before in the trace: {} repeating",
                               p.unit_statement, p.earlier_units, p.eval_units ? "evaluation" : "the training step");
  d.add_evidence("phase", fmt::format("phase {}: {}", d.phase, d.phase_source));
  d.add_evidence("projection", describe_projection(p));
  const std::string margins = fmt::format(
      "a setting must run it with {} of the capacity to spare, and perfect packing must "
      "miss it by {}, to decide",
      pct(p.margin_to_fit), pct(p.margin_to_fail));
  d.add_evidence(
      "fit",
      p.fit_error
          ? fmt::format("the fit checked on {} earlier unit{}{}: projected from unit {}, {} peak{} came within {} of "
                        "the real one{}; {}",
                        p.checked_units, p.checked_units == 1 ? "" : "s",
                        p.other_kind_units == 0
                            ? ""
                            : fmt::format(" of the failing unit's kind ({} of another kind left out: they begin "
                                          "holding other blocks, gradients or the optimizer's state)",
                                          p.other_kind_units),
                        p.reference_unit, p.checked_units == 1 ? "its" : "their", p.checked_units == 1 ? "" : "s",
                        pct(*p.fit_error), p.checked_units == 1 ? "" : "s", margins)
          : fmt::format("no other unit allocates like unit {}, so the fit cannot be checked on the trace's own "
                        "history; {}",
                        p.reference_unit, margins));
  if (p.over_bytes || p.under_bytes)
    d.add_evidence(
        "doubt", fmt::format("the projection may be up to {} high and {} low: allocations no unit tells how they scale "
                             "(constant to quadratic), frees without a counterpart, a reference of another kind",
                             format_bytes(p.over_bytes), format_bytes(p.under_bytes)));
  if (p.kind_difference_bytes)
    d.add_evidence(
        "reference_kind",
        fmt::format(
            "no earlier unit began holding what the failing one did (its blocks within 5%): "
            "the reference began {} {} (the optimizer's state or gradients): its rest may make "
            "{} than the failing unit's will",
            format_bytes(p.kind_difference_bytes), p.over_bytes >= p.kind_difference_bytes ? "lower" : "higher",
            p.over_bytes >= p.kind_difference_bytes ? "blocks the failing unit already holds, more" : "fewer blocks"));
  if (p.unmatched_free_bytes)
    d.add_evidence("unmatched",
                   fmt::format("{} that the reference freed has no counterpart in the failing unit: the projection "
                               "keeps it",
                               format_bytes(p.unmatched_free_bytes)));
  const std::string size =
      std::abs(p.scale - 1) >= 0.02
          ? fmt::format("its allocations ×{:.2f} those of unit {}, the most alike", p.scale, p.reference_unit)
          : fmt::format("the size of unit {}", p.reference_unit);
  d.trigger =
      p.eval_units
          ? fmt::format("unit {} of the trace's evaluation ({}), {}", p.earlier_units + 1, p.unit_statement, size)
      : p.smaller_units == p.aligned_units && p.aligned_units > 0
          ? fmt::format(
                "the longest batch of the trace so far: larger than the {} earlier step(s) it aligns with ({}), {}",
                p.aligned_units, p.unit_statement, size)
          : fmt::format("training step {} of the trace ({}), {}", p.earlier_units + 1, p.unit_statement, size);
  const double upper = static_cast<double>(cap) * (1 + p.margin_to_fail);
  const double lower = static_cast<double>(cap) * (1 - p.margin_to_fit);
  const auto peak = static_cast<double>(p.projected_peak_bytes);
  const double next = peak + static_cast<double>(p.next_unit_extra_bytes);
  const auto undecided = [&] {
    d.decide_with = {
        "one rerun with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True at the same memory: if it fails in the same "
        "step, the verdict is capacity",
        "a snapshot whose trace holds more steps like the failing one (a larger max_entries), so the fit can be "
        "checked on more of them",
        "or make room instead of deciding: activation checkpointing, or a smaller micro-batch with more accumulation"};
    // How much larger a batch must be to need more than the device (at the sizes asked for).
    const auto limit = [&](double margin) {
      return static_cast<std::uint64_t>(static_cast<double>(cap) * (1 + margin) * inflation);
    };
    const auto at_capacity = exceeding_batch_factor(step, limit(0));
    const auto beyond_margins = exceeding_batch_factor(step, limit(p.margin_to_fail));
    if (at_capacity && beyond_margins && !p.eval_units)
      d.decide_with.insert(
          d.decide_with.begin(),
          fmt::format("the sizes of the batches still to come (the log's or the dataset's sequence lengths, batch "
                      "or image sizes): the failing step projects to {} live with perfect packing of the {} the "
                      "device gives; a batch ×{:.2f} its size would need more, and one ×{:.2f} more beyond the "
                      "projection's margins: if the run meets one, the verdict is capacity",
                      format_bytes(p.projected_peak_bytes), format_bytes(cap), *at_capacity, *beyond_margins));
    return Verdict::kUndetermined;
  };
  if (p.fit_error && *p.fit_error > kMaxFitError) {
    d.add_evidence("fit_rejected",
                   fmt::format("the projection misses the trace's own earlier units by up to {} (more than {}): it "
                               "does not fit its own history, so it decides nothing",
                               pct(*p.fit_error), pct(kMaxFitError)));
    return undecided();
  }
  // Sizes recorded under roundup_power2_divisions are rounded up: what the step needs with
  // perfect packing at the sizes it asked for is less (the snapshot's live blocks tell by how much).
  const double asked = peak / inflation;
  if (inflation > 1.01)
    d.add_evidence(
        "rounding",
        fmt::format("the recorded setting rounds requests up: the snapshot's live blocks hold ×{:.3f} the bytes "
                    "they asked for, so at the sizes asked for the step needs about {}",
                    inflation, format_bytes(static_cast<std::uint64_t>(asked))));
  if (asked > upper) {
    const auto needed = static_cast<std::uint64_t>(asked);
    d.add_evidence("projection_vs_capacity",
                   fmt::format("the step needs {} of live memory even with perfect packing; the device gives "
                               "{} — short by {}, beyond the projection's margins",
                               format_bytes(needed), format_bytes(cap), format_bytes(needed - cap)));
    return Verdict::kCapacity;
  }

  const ProjectedRun* best = nullptr;
  for (const WhatIfLine& line : d.whatif)  // least reserved up to the OOM point first
    for (const ProjectedRun& run : p.runs)
      if (!best && run.conf == line.conf && run.runs_with_margin) best = &run;
  const bool all_fail =
      std::all_of(p.runs.begin(), p.runs.end(), [](const ProjectedRun& r) { return r.fails_with_margin; });
  if (best && next / inflation > lower) {
    d.add_evidence(
        "next_step",
        fmt::format("the failing step itself fits, but the unit after the reference began {} higher than it "
                    "did (what the steps after a zero_grad hold again): a batch as long as the failing one a "
                    "step later would need about {} of the {} the device gives. Whether a later batch is that "
                    "long is not in the trace",
                    format_bytes(p.next_unit_extra_bytes), format_bytes(static_cast<std::uint64_t>(next / inflation)),
                    format_bytes(cap)));
    const Verdict verdict = undecided();
    d.decide_with.insert(
        d.decide_with.begin(),
        fmt::format("the lengths of the batches still to come while the gradients are held (the rest "
                    "of this accumulation group, then every group): the failing step itself runs under "
                    "{}, and none as long means fragmentation; one as long needs about {} of the {} "
                    "the device gives: capacity",
                    best->conf.empty() ? "the recorded setting" : best->conf,
                    format_bytes(static_cast<std::uint64_t>(next / inflation)), format_bytes(cap)));
    return verdict;
  }
  if (best && p.longest_unit && static_cast<double>(p.longest_peak_bytes) / inflation > lower) {
    d.add_evidence(
        "longest_batch",
        fmt::format("the failing step itself fits, but unit {} of the trace was a longer batch; one that long "
                    "begun as the failing step began would need about {} live of the {} the device gives. "
                    "The job makes such batches; whether the run meets one again is not in the trace",
                    *p.longest_unit, format_bytes(p.longest_peak_bytes), format_bytes(cap)));
    return undecided();
  }
  if (best) {
    d.recommended_conf = best->conf;
    const auto needed = static_cast<std::uint64_t>(next / inflation);
    d.add_evidence("projection_vs_capacity",
                   fmt::format("the projected step fits: {} live at its peak with perfect packing, {} to spare of {}; "
                               "PYTORCH_CUDA_ALLOC_CONF={} runs it with {} less memory than that{}",
                               format_bytes(needed), format_bytes(cap - std::min(cap, needed)), format_bytes(cap),
                               best->conf.empty() ? "\"\"" : best->conf,
                               pct(p.margin_to_fit + (best->relaid_start ? p.relaid_start_margin : 0)),
                               best->relaid_start ? relaid_start_note(p) : ""));
    return Verdict::kFragmentation;
  }
  if (all_fail && !step.trace.starts_mid_run && !p.runs.empty() && inflation <= 1.01) {
    d.add_evidence(
        "projection_vs_capacity",
        fmt::format("the projected step needs {} live with perfect packing, but no allocator setting of the sweep runs "
                    "it even at {} more than the {} the device gives: what a real allocator needs above the live "
                    "bytes does not fit",
                    format_bytes(p.projected_peak_bytes), pct(p.margin_to_fail), format_bytes(cap)));
    return Verdict::kCapacity;
  }
  const bool any_relaid =
      std::any_of(p.runs.begin(), p.runs.end(), [](const ProjectedRun& r) { return r.relaid_start; });
  d.add_evidence(
      "too_close",
      fmt::format(
          "the projected step needs {} live with perfect packing against {}{}: within the "
          "margins the projection needs ({} below, {} above) of what decides it{}",
          format_bytes(static_cast<std::uint64_t>(next)), format_bytes(cap),
          best ? "" : fmt::format("; the settings that run it need more than {} less that margin", format_bytes(cap)),
          pct(p.margin_to_fit), pct(p.margin_to_fail),
          !step.trace.starts_mid_run ? ""
          : any_relaid
              ? fmt::format(" (the trace starts mid-run: settings with expandable segments start from its live "
                            "blocks re-laid as they hold them and must leave {} more; the others inherit the "
                            "pieces the trace starts with)",
                            pct(p.relaid_start_margin))
                       : " (the trace starts mid-run: a setting replayed from its "
                         "state inherits pieces the job's start would not have made)"));
  return undecided();
}

/// An eval batch the trace never ran before, projected from the training's call of the same
/// function (eval_projection.h): capacity when even the lower estimate exceeds the capacity by
/// the projection's floor, fragmentation when a setting runs the upper estimate with that floor
/// to spare, undetermined between.
Verdict judge_projected_eval(ProjectedStep& step, const std::vector<replay::WhatIfConfig>& configs,
                             const replay::Capacity& capacity, double inflation, const DoctorOptions& options,
                             Diagnosis& d) {
  TraceStepProjection& p = step.figures;
  const std::uint64_t cap = capacity.effective_bytes().value_or(0);
  p.fit_margin = kEvalFloor;
  p.relaid_start_margin = step.trace.starts_mid_run ? kRelaidEvalStart : 0;
  p.margin_to_fit = kEvalFloor;
  p.margin_to_fail = kEvalFloor;
  replay_projected_step(step, configs, capacity, options.threads);
  for (WhatIfLine& line : d.whatif)
    for (const ProjectedRun& run : p.runs)
      if (run.conf == line.conf) line.runs_projected_step = run.runs;
  d.add_evidence(
      "projection",
      fmt::format("the eval batch's allocations under {} up to the failing malloc match training call {} of {} ({}, "
                  "events {}–{}) frame for frame ({} of {}; the failing malloc is its event {}); their sizes are "
                  "×{:.3f} the training's. The rest of that call and of the step's statements after it up to its "
                  "backward pass, each block freed where the eval freed its like in an earlier layer ({} of them) "
                  "or where the training freed it, else kept: the eval batch peaks at {} live with perfect packing; "
                  "at least {} if every block whose lifetime the eval has not shown is freed at once and nothing "
                  "runs after the call",
                  p.shared_function, p.reference_unit, p.earlier_units, p.training_call, p.reference_first_event,
                  p.reference_end_event - 1, p.matched_allocations, p.prefix_allocations, p.aligned_event, p.scale,
                  p.learned_lifetimes, format_bytes(p.most_peak_bytes), format_bytes(p.least_peak_bytes)));
  d.trigger = fmt::format("an eval pass ({}) the trace never ran before, projected from the training's {} call",
                          p.unit_statement, p.shared_function);
  const double least = static_cast<double>(p.least_peak_bytes) / inflation;
  if (least > static_cast<double>(cap) * (1 + p.margin_to_fail)) {
    d.add_evidence("projection_vs_capacity",
                   fmt::format("the eval batch needs at least {} of live memory even with perfect packing; the "
                               "device gives {} — short by {}, beyond the projection's {} floor",
                               format_bytes(static_cast<std::uint64_t>(least)), format_bytes(cap),
                               format_bytes(static_cast<std::uint64_t>(least) - cap), pct(p.margin_to_fail)));
    return Verdict::kCapacity;
  }
  const ProjectedRun* best = nullptr;
  for (const WhatIfLine& line : d.whatif)  // least reserved up to the OOM point first
    for (const ProjectedRun& run : p.runs)
      if (!best && run.conf == line.conf && run.runs_with_margin) best = &run;
  const auto upper = static_cast<std::uint64_t>(static_cast<double>(p.most_peak_bytes) / inflation);
  if (best) {
    d.recommended_conf = best->conf;
    d.add_evidence("projection_vs_capacity",
                   fmt::format("the projected eval batch fits: at most {} live at its peak with perfect packing, {} "
                               "to spare of {}; PYTORCH_CUDA_ALLOC_CONF={} runs it with {} less memory than that{}",
                               format_bytes(upper), format_bytes(cap - std::min(cap, upper)), format_bytes(cap),
                               best->conf.empty() ? "\"\"" : best->conf,
                               pct(p.margin_to_fit + (best->relaid_start ? p.relaid_start_margin : 0)),
                               best->relaid_start ? relaid_start_note(p) : ""));
    return Verdict::kFragmentation;
  }
  d.add_evidence("too_close",
                 fmt::format("the eval batch needs between {} and {} live with perfect packing against {}, and no "
                             "allocator setting runs the upper estimate with {} to spare: what the eval frees in the "
                             "layers it has not reached, and what it runs after the call, decide it",
                             format_bytes(static_cast<std::uint64_t>(least)), format_bytes(upper), format_bytes(cap),
                             pct(p.margin_to_fit)));
  d.decide_with = {
      "one rerun of the eval pass with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True at the same memory: if it "
      "still fails, the verdict is capacity",
      "a snapshot whose trace holds a whole eval batch (history through an earlier eval, or the eval run alone with "
      "history on), so the pass can be projected from the eval itself",
      "or make room instead of deciding: a smaller eval batch (per_device_eval_batch_size), or "
      "eval_accumulation_steps"};
  return Verdict::kUndetermined;
}

}  // namespace

Verdict judge_traced_oom(const TraceChoice& trace, const TelemetryInput* telemetry, const RecordedCurve& curve,
                         const DoctorOptions& options, Diagnosis& d) {
  const snapshot::Snapshot& snap = trace.replay->snapshot;
  const std::size_t oom_index = *trace.oom_index;
  const replay::PreparedTrace prepared = replay::prepare_trace(snap, trace.device, trace.replay->path);
  replay::CapacityRequest capacity_request;
  capacity_request.allowed_from_message = d.oom_context->allowed_bytes;
  const replay::Capacity capacity = replay::resolve_capacity(prepared, capacity_request);
  d.capacity_bytes = capacity.effective_bytes();
  d.capacity_source = capacity.source;

  replay::WhatIfOptions whatif_options;
  whatif_options.threads = options.threads;
  whatif_options.progress = options.progress;
  const replay::WhatIfReport report = replay::sweep_at_capacity(prepared, capacity, whatif_options);
  fill_whatif(report, d);

  replay::ReplayOptions ideal_options = replay::replay_options_for(capacity);
  ideal_options.timeline_points = 0;
  const replay::ReplayResult ideal =
      replay::run_replay(prepared, replay::ModelKind::kIdeal, prepared.recorded_config, ideal_options);
  const std::uint64_t request = d.oom_context->request_bytes;
  const std::uint64_t cap = d.capacity_bytes.value_or(0);

  const replay::WhatIfRow* recorded = nullptr;
  const replay::WhatIfRow* best = nullptr;
  for (const replay::WhatIfRow& row : report.rows) {
    if (row.config.recorded) recorded = &row;
    if (!best && row.passes_oom_point()) best = &row;
  }
  if (d.recommended_conf.empty() && best) d.recommended_conf = best->config.conf;
  d.add_evidence("capacity", fmt::format("capacity {}: {}", format_bytes(cap), capacity.source));
  if (recorded)
    d.add_evidence(
        "replay_recorded",
        fmt::format("replaying the trace under the recorded config ({}) at {} {} at the recorded OOM (event {})",
                    recorded->config.conf.empty() ? "defaults" : recorded->config.conf, format_bytes(cap),
                    recorded->passes_oom_point() ? "does NOT fail" : "fails as the real run did", oom_index));

  const std::span<const inputs::StepRecord> steps =
      telemetry ? std::span<const inputs::StepRecord>(telemetry->records) : std::span<const inputs::StepRecord>();
  std::vector<double> step_ms;
  for (const auto& r : steps) step_ms.push_back(r.step_time_or_sum_ms());
  const OomCallPath call_path = analyze_oom_call_path(snap, trace.device, oom_index, quantile(step_ms, 0.5));
  OomPhase phase = decide_oom_phase(&snap, trace.device, oom_index, &call_path, steps);
  d.phase = phase.phase;
  d.phase_source = phase.source;
  d.add_evidence("phase", fmt::format("phase {}: {}", phase.phase, phase.source));
  if (const auto done = optimizer_steps_before(snap, trace.device, oom_index); done && !steps.empty()) {
    const auto recorded =
        std::count_if(steps.begin(), steps.end(), [](const auto& r) { return r.optimizer_step.value_or(true); });
    if (*done > static_cast<std::size_t>(recorded))
      d.add_evidence(
          "optimizer_steps",
          fmt::format("the trace holds {} completed optimizer steps, the telemetry records {}: the step after "
                      "the last record finished its training work before the OOM",
                      *done, recorded));
  }
  const TraceUnits units = find_trace_units(snap, trace.device, oom_index);
  d.memory_advice = memory_advice(snap, trace.device, oom_index, units, cap);
  // No statement of the loop ran twice: a run that failed in its first step, or a history that
  // began mid-run after the step before had run its forward pass (a ring, a late start).
  const bool no_earlier_step = !units.repeats() && !units.eval && !phase.repeats_step &&
                               d.in_phase(JobPhase::kUnknown) && !units.program_frame.empty();
  // What a history needs to hold two whole steps and the failing one's head, when this one holds
  // the end of one step and the head of the next: three times its events, if its steps are alike.
  const std::size_t longer_history = (3 * (oom_index + 1) + 999) / 1000 * 1000;
  if (no_earlier_step) {
    d.phase_source =
        prepared.starts_mid_run
            ? fmt::format("no statement of the program's loop ran more than once in the trace, which starts "
                          "mid-run (a ring of max_entries, or history started late): it holds the failing step's "
                          "head (at {}) and none of an earlier step's, so there is no earlier step to compare with",
                          units.program_frame)
            : fmt::format("no statement of the program's loop ran more than once before the OOM: the run failed "
                          "in its first step (at {}), so there is no earlier step to compare with",
                          units.program_frame);
    std::erase_if(d.evidence, [](const Evidence& e) { return e.key == "phase"; });
    d.add_evidence("phase", fmt::format("phase {}: {}", d.phase, d.phase_source));
  }
  if (units.eval && !units.repeats() && !d.in_phase(JobPhase::kEval)) {
    // The statement that repeated (a trainer's train(), holding its steps and its evals) is not
    // the pass that failed: the evaluation inside it ran for the first time in the trace.
    d.phase = phase_name(JobPhase::kEval);
    d.phase_source = fmt::format("the failing malloc is in an evaluation ({}) that did not run before in the trace{}",
                                 units.eval_statement,
                                 phase.repeats_step ? fmt::format(", below {}, which did", call_path.statement) : "");
    phase.repeats_step = false;
    std::erase_if(d.evidence, [](const Evidence& e) { return e.key == "phase"; });
    d.add_evidence("phase", fmt::format("phase {}: {}", d.phase, d.phase_source));
  }
  if (units.repeats() && !units.eval && phase.repeats_step && d.in_phase(JobPhase::kTrain) &&
      units.statement != call_path.statement) {
    // The unit names the program's own statement where the call path's outermost divergence
    // may not: a C++ frame that repeats per op (the failing malloc on autograd's thread has no
    // Python frames), or a launcher's frame (runpy, for `python -m`).
    d.phase_source = fmt::format(
        "the failing unit's statement ({}) ran {} time(s) before in the trace: the training "
        "step repeating{}",
        units.statement, units.starts.size() - 1,
        units.anchor_is_oom ? "" : " (the failing malloc, on autograd's thread, has no Python frames)");
    std::erase_if(d.evidence, [](const Evidence& e) { return e.key == "phase"; });
    d.add_evidence("phase", fmt::format("phase {}: {}", d.phase, d.phase_source));
  }
  if (units.repeats() && !phase.repeats_step && (d.in_phase(JobPhase::kUnknown) || units.eval)) {
    // The program's own loop repeats where the statement-level view saw none (a trainer's
    // loop below one top-level call): the failing unit ran before.
    d.phase = phase_name(units.eval ? JobPhase::kEval : call_path.optimizer ? JobPhase::kOptimizer : JobPhase::kTrain);
    d.phase_source =
        fmt::format("the failing unit's statement ({}) ran {} time(s) before in the trace: {} repeating",
                    units.statement, units.starts.size() - 1, units.eval ? "evaluation" : "the training step");
    std::erase_if(d.evidence, [](const Evidence& e) { return e.key == "phase"; });
    d.add_evidence("phase", fmt::format("phase {}: {}", d.phase, d.phase_source));
  }
  if (call_path.has_stack)
    d.add_evidence("call_site", fmt::format("the failing malloc was called from {} (statement {})", call_path.innermost,
                                            units.repeats() ? units.statement : call_path.statement));

  // The projection also tells the phase apart (a failing pass unlike the recorded steps), which
  // the report names even when the ideal packer alone decides.
  d.projection = telemetry && phase.repeats_step ? project_failing_step(snap, trace.device, curve, oom_index, request,
                                                                        telemetry->records, call_path.episode_starts)
                                                 : StepProjection{};
  if (phase.repeats_step && d.projection.different_pass) {
    const bool forward = (call_path.model_forward || call_path.episode_forward) && !call_path.optimizer;
    d.phase = phase_name(forward ? JobPhase::kEval : JobPhase::kUnknown);
    d.phase_source = "the failing pass shares no call stack with the recorded training steps";
    d.add_evidence("phase", fmt::format("phase {}: {}", d.phase, d.phase_source));
  }

  if (ideal.oom && ideal.oom_matches_recorded) {
    d.add_evidence(
        "ideal_packer",
        fmt::format("even the ideal packer (live bytes packed with no gaps) cannot serve the {} request at event {}: "
                    "live bytes + request exceed {}",
                    format_bytes(request), oom_index, format_bytes(cap)));
    d.projection = StepProjection{};
    d.projection.unavailable_reason = "not needed: the failing malloc alone does not fit";
    return Verdict::kCapacity;
  }
  d.add_evidence("ideal_packer",
                 fmt::format("the ideal packer serves the failing {} request at {}: {} live + the request = {}",
                             format_bytes(request), format_bytes(cap), format_bytes(curve.allocated[oom_index]),
                             format_bytes(curve.allocated[oom_index] + request)));
  if (best)
    d.add_evidence(
        "replay_best",
        fmt::format(
            "PYTORCH_CUDA_ALLOC_CONF={} passes the recorded OOM point at the same {}, reserving at most {} up to it",
            best->config.conf.empty() ? "\"\"" : best->config.conf, format_bytes(cap),
            format_bytes(best->at_capacity ? best->at_capacity->stats.peak_reserved_bytes
                                           : best->unlimited.stats.peak_reserved_bytes)));
  else
    d.add_evidence("replay_best",
                   fmt::format("no allocator config of the sweep ({} configs) passes the recorded OOM point at {}",
                               report.rows.size(), format_bytes(cap)));

  // Without telemetry that projects the step, the trace's own repeating units may.
  const bool telemetry_projects =
      telemetry && phase.repeats_step && !d.projection.different_pass && d.projection.available;
  if (!telemetry_projects) {
    if (units.repeats()) {
      ProjectedStep step = project_step_from_trace(prepared, snap, trace.device, curve, oom_index, units);
      if (step.figures.available) {
        std::erase_if(d.evidence, [](const Evidence& e) { return e.key == "phase"; });
        const double inflation = rounds_up(prepared.recorded_config) ? rounding_inflation(snap, trace.device) : 1.0;
        std::vector<replay::WhatIfConfig> configs;
        for (const replay::WhatIfRow& row : report.rows) configs.push_back(row.config);
        const Verdict verdict = judge_projected_step(step, configs, capacity, inflation, options, call_path, d);
        d.trace_projection = std::move(step.figures);
        return verdict;
      }
      d.trace_projection = std::move(step.figures);
    } else {
      d.trace_projection.unavailable_reason = "no statement of the program's loop ran more than once before the OOM";
    }
  }
  // A first eval pass runs the training's code at another size: projected from the training call.
  const bool eval_batch_known = (units.eval && units.eval_batch_start) || !call_path.episode_starts.empty();
  if ((!phase.repeats_step || d.projection.different_pass) && d.phase == "eval" && !units.repeats() &&
      eval_batch_known) {
    const std::size_t eval_start = units.eval && units.eval_batch_start ? *units.eval_batch_start
                                                                        : call_path.episode_starts.back();
    const std::string statement =
        units.eval && !units.eval_statement.empty() ? units.eval_statement : call_path.statement;
    ProjectedStep step =
        project_eval_from_training(prepared, snap, trace.device, curve, oom_index, eval_start, statement);
    if (step.figures.available) {
      const double inflation = rounds_up(prepared.recorded_config) ? rounding_inflation(snap, trace.device) : 1.0;
      std::vector<replay::WhatIfConfig> configs;
      for (const replay::WhatIfRow& row : report.rows) configs.push_back(row.config);
      const Verdict verdict = judge_projected_eval(step, configs, capacity, inflation, options, d);
      d.trace_projection = std::move(step.figures);
      return verdict;
    }
    d.trace_projection = std::move(step.figures);
  }
  if (!phase.repeats_step || d.projection.different_pass) {
    const Verdict verdict = judge_unrecorded_pass(
        snap, trace.device, curve, oom_index, cap,
        units.eval && !units.eval_statement.empty() ? units.eval_statement : call_path.statement, steps, d);
    if (verdict == Verdict::kUndetermined && no_earlier_step && prepared.starts_mid_run)
      d.decide_with.insert(
          d.decide_with.begin(),
          fmt::format("a snapshot whose history holds two whole steps before the failing one (one to project "
                      "from, one to check the fit on): this trace holds {} events, the end of the step before "
                      "and the failing step's head, so a step takes about that many or more if its steps are "
                      "alike; _record_memory_history(max_entries={}) at least, or history from the run's start",
                      oom_index + 1, longer_history));
    return verdict;
  }
  const Verdict verdict =
      judge_training_step(snap, trace.device, prepared.recorded_config, best, cap, telemetry, steps, d);
  if (verdict == Verdict::kUndetermined && prepared.starts_mid_run && !d.trace_projection.available) {
    if (const auto& events = d.trace_projection.cut_unit_events)  // two whole steps, the failing one's start
      d.decide_with.insert(
          d.decide_with.begin(),
          fmt::format("a snapshot whose history holds two whole steps before the failing one (one to project "
                      "from, one to check the fit on): {}; _record_memory_history(max_entries={}) at least, or "
                      "history from the run's start",
                      d.trace_projection.unavailable_reason, (3 * *events + 999) / 1000 * 1000));
    else
      d.decide_with.insert(
          d.decide_with.begin(),
          fmt::format("a snapshot whose history holds a whole step like the failing one before it: this trace "
                      "starts mid-run (a ring of max_entries, or history started late) and no earlier step in it "
                      "can be projected from; max_entries={} at least (this trace holds {} events), or history "
                      "from the run's start",
                      longer_history, oom_index + 1));
  }
  return verdict;
}

}  // namespace fragscope::diagnose
