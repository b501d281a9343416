#include "report/traced_oom_words.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "diagnose/projected_runs.h"
#include "util/bytes.h"
#include "util/counted.h"
#include "util/job_phase.h"

namespace fragscope::report {
namespace {

using diagnose::PhaseReason;
using diagnose::TracedOomFindings;
using diagnose::TracedOomRule;
using diagnose::TracedOomWords;
using diagnose::TraceStepProjection;

/// Why CUDA graphs' idle pool memory counts as held: said wherever the doctor counts it.
constexpr std::string_view kWhyPoolsHold = "the most they had live: no setting gives it back while their graphs live";

std::string pct(double fraction) { return fmt::format("{:.1f}%", 100.0 * fraction); }

/// A setting as PYTORCH_CUDA_ALLOC_CONF's value: "" for the defaults.
std::string quoted_conf(const std::string& conf) { return conf.empty() ? "\"\"" : conf; }

bool is_phase(const TracedOomFindings& f, JobPhase phase) { return f.phase == phase_name(phase); }

/// How a trace that starts mid-run began, as the blocks older than it tell (snapshot/history_start.h).
std::string_view mid_run_start(snapshot::HistoryStart start) {
  switch (start) {
    case snapshot::HistoryStart::kStartedLate:
      return "history began after the run had allocated the blocks it starts with: they carry no frames";
    case snapshot::HistoryStart::kRingWrapped:
      return "a ring of max_entries that wrapped: blocks older than it carry frames";
    case snapshot::HistoryStart::kAllocatorStart:
    case snapshot::HistoryStart::kUnknown:
      break;
  }
  return "a ring of max_entries, or history started late";
}

/// The history that would hold what this one lacks, `entries` long if a ring: a ring's max_entries, or, history
/// having begun late, an earlier start.
std::string longer_history(snapshot::HistoryStart start, std::size_t entries) {
  if (start == snapshot::HistoryStart::kStartedLate)
    return "_record_memory_history two steps before the failing one at least, or at the run's start (an OOM in the "
           "run's first step no history decides)";
  return fmt::format("_record_memory_history(max_entries={}) at least, or history from the run's start", entries);
}

/// How the phase was told, for `reason`.
std::string phase_source(const TracedOomFindings& f, PhaseReason reason) {
  const diagnose::PhaseClues& c = f.clues;
  switch (reason) {
    case PhaseReason::kCallPath:
      return c.source;
    case PhaseReason::kFirstStep:
    {
      const std::string_view backward = c.backward ? ", in its backward pass on autograd's thread" : "";
      if (!c.later_statement.empty())
        return fmt::format(
            "the failing pass ({}, at {}{}) did not run before in the trace{}, but {}, which comes after it, ran and "
            "finished: the loop came back around, and the failing pass is one it had not run before (a refresh, an "
            "evaluation, a save), so there is no earlier one to compare with",
            c.later_than, c.program_frame, backward,
            c.starts_mid_run ? fmt::format(", which starts mid-run ({})", mid_run_start(f.history_start)) : "",
            c.later_statement);
      if (c.starts_mid_run)
        return fmt::format(
            "no statement of the program's loop ran more than once in the trace, which starts mid-run ({}): it "
            "holds the failing step's head (at {}{}) and of the steps before it at most the last one's end, so "
            "there is no earlier step to compare with",
            mid_run_start(f.history_start), c.program_frame, backward);
      return fmt::format(
          "no statement of the program's loop ran more than once before the OOM: the run failed in "
          "its first step (at {}{}), so there is no earlier step to compare with",
          c.program_frame, backward);
    }
    case PhaseReason::kFirstEval:
      return fmt::format("the failing malloc is in an evaluation ({}) that did not run before in the trace{}",
                         c.eval_statement,
                         c.eval_below_repeating ? fmt::format(", below {}, which did", c.call_statement) : "");
    case PhaseReason::kStepRepeats:
      return fmt::format(
          "the failing unit's statement ({}) ran {} before in the trace: the training "
          "step repeating{}",
          c.unit_statement, counted(c.earlier_units, "time", "times"),
          c.anchor_is_oom ? "" : " (the failing malloc, on autograd's thread, has no Python frames)");
    case PhaseReason::kUnitRepeats:
      return fmt::format("the failing unit's statement ({}) ran {} before in the trace: {} repeating", c.unit_statement,
                         counted(c.earlier_units, "time", "times"), c.eval_units ? "evaluation" : "the training step");
    case PhaseReason::kOtherPass:
      return "the failing pass shares no call stack with the recorded training steps";
    case PhaseReason::kProjectedUnit:
      return fmt::format("the failing unit's statement ({}) ran {} before in the trace: {} repeating",
                         f.trace.unit_statement, counted(f.trace.earlier_units, "time", "times"),
                         f.trace.eval_units ? "evaluation" : "the training step");
  }
  return c.source;
}

/// Why the step projected from telemetry has no figures.
std::string step_unavailable_reason(const TracedOomFindings& f) {
  switch (f.step_gap) {
    case diagnose::StepProjectionGap::kNone:
      return f.step.unavailable_reason;
    case diagnose::StepProjectionGap::kNoTelemetry:
      return "no step telemetry: the failing step's tokens and static memory are unknown";
    case diagnose::StepProjectionGap::kPassNotInTrace:
      return fmt::format("the {} phase's peak is not in the trace: the recorded training steps say nothing about it",
                         f.phase);
    case diagnose::StepProjectionGap::kNotNeeded:
      return f.rule == TracedOomRule::kExpandableFailsAtOom
                 ? "not needed: from the job's start, expandable segments cannot serve the failing malloc"
                 : "not needed: the failing malloc alone does not fit";
  }
  return f.step.unavailable_reason;
}

/// How a setting of expandable segments was replayed from a mid-run trace, and why its margin is larger.
std::string relaid_start_note(const TraceStepProjection& p) {
  return fmt::format(
      " (the trace starts mid-run: it was replayed from the live blocks the trace starts with, laid back to back as "
      "expandable segments hold them, so it must leave {} more than the fit's margin)",
      pct(p.relaid_start_margin));
}

/// A projected pass that a setting runs with its margin: "<subject> N live at its peak ..., M to spare of C;
/// PYTORCH_CUDA_ALLOC_CONF=X runs it with K less memory than that".
std::string projected_pass_fits(std::string_view subject, std::uint64_t peak, const TracedOomFindings& f) {
  const TraceStepProjection& p = f.trace;
  const std::uint64_t cap = f.capacity_bytes;
  return fmt::format("{} {} live at its peak with perfect packing, {} to spare of {}; PYTORCH_CUDA_ALLOC_CONF={} "
                     "runs it with {} less memory than that{}",
                     subject, format_bytes(peak), format_bytes(cap - std::min(cap, peak)), format_bytes(cap),
                     quoted_conf(f.best_run->conf),
                     pct(p.margin_to_fit + (f.best_run->relaid_start ? p.relaid_start_margin : 0)),
                     f.best_run->relaid_start ? relaid_start_note(p) : "");
}

/// How the reference's rest was scaled to the failing unit: by each allocation's exponent, or, at the reference's
/// own scale (×1.000), not at all (no exponent changes a size).
std::string describe_scaling(const TraceStepProjection& p) {
  if (p.scale == 1.0)
    return "at its own sizes: the failing unit's are the reference's, so how a size follows the scale changes none";
  std::string parts =
      fmt::format("{} constant, {} linear", format_bytes(p.constant_bytes), format_bytes(p.linear_bytes));
  if (p.quadratic_bytes) parts += fmt::format(", {} quadratic", format_bytes(p.quadratic_bytes));
  if (p.other_bytes) parts += fmt::format(", {} another power", format_bytes(p.other_bytes));
  if (p.unfitted_bytes)
    parts += fmt::format(", {} that no earlier unit tells (taken as linear)", format_bytes(p.unfitted_bytes));
  return "scaled by how each allocation's size follows the scale over the other units (" + parts + ")";
}

std::string describe_projection(const TraceStepProjection& p) {
  return fmt::format(
      "the failing unit's allocations up to the failing malloc match unit {} of {} (events {}–{}) call stack by "
      "call stack ({} of {}; the failing malloc is its event {}); their sizes are ×{:.3f} its own. Its rest, {}, "
      "makes the failing step peak at {} live with perfect packing",
      p.reference_unit, p.earlier_units + 1, p.reference_first_event, p.reference_end_event - 1, p.matched_allocations,
      p.prefix_allocations, p.aligned_event, p.scale, describe_scaling(p), format_bytes(p.projected_peak_bytes));
}

/// Appends one line of evidence: the words keep the order in which the verdict found its facts.
void add(TracedOomWords& w, std::string key, std::string text) {
  w.evidence.push_back({std::move(key), std::move(text)});
}

/// The failing step runs a graph torch.compile generated for it (diagnose/compiled_graph.h).
std::string compiled_anew_text(const diagnose::CompiledAnew& c) {
  return fmt::format("the failing malloc ran in {}, code no allocation before that step ran (its first at event {}): "
                     "a graph compiled for it, as torch.compile does when a shape or another guard changes, so the "
                     "earlier steps do not show what it allocates",
                     c.module, c.first_event);
}

std::string compiled_anew_trigger(const diagnose::CompiledAnew& c) {
  return fmt::format("a graph torch.compile generated for the failing step ({})", c.module);
}

void word_unrecorded_pass(const TracedOomFindings& f, TracedOomWords& w) {
  const std::uint64_t cap = f.capacity_bytes;
  if (const auto& op = f.list_op) {
    add(w, "list_op",
        fmt::format("the failing malloc ({}) is result {} of {} of a list op, one tensor per parameter in the "
                    "order {} allocated them: the {} left need {}, so the op needs at least {}{}",
                    op->site, op->done + 1, op->total, op->list_site, op->total - op->done,
                    format_bytes(op->remaining_bytes), format_bytes(op->projected_peak_bytes),
                    op->private_pool_idle_bytes == 0
                        ? std::string(" live")
                        : fmt::format(", {} of it held idle by CUDA graphs' private pools ({})",
                                      format_bytes(op->private_pool_idle_bytes), kWhyPoolsHold)));
    if (f.rule == TracedOomRule::kListOpExceeds) {
      add(w, "projection_vs_capacity",
          fmt::format("the optimizer step needs at least {} of live memory even with perfect packing; "
                      "the device gives {} — short by {}",
                      format_bytes(op->projected_peak_bytes), format_bytes(cap),
                      format_bytes(op->projected_peak_bytes - cap)));
      w.trigger = "an optimizer step: its state and its foreach temporaries";
      return;
    }
  }
  const std::int64_t after = f.last_recorded_step.value_or(-1);
  // A step of the training, not a pass of its own kind, that runs a graph no earlier step ran.
  const bool compiled_anew = f.compiled_anew && !is_phase(f, JobPhase::kOptimizer) &&
                             !is_phase(f, JobPhase::kCheckpoint) && !is_phase(f, JobPhase::kEval);
  w.trigger = is_phase(f, JobPhase::kOptimizer)    ? "an optimizer step allocating its state"
              : is_phase(f, JobPhase::kCheckpoint) ? "a checkpoint save"
              : is_phase(f, JobPhase::kEval)
                  ? fmt::format("an eval pass ({}){}", f.pass_statement,
                                after >= 0 ? fmt::format(" after the last recorded step ({})", after) : "")
              : compiled_anew ? compiled_anew_trigger(*f.compiled_anew)
                              : fmt::format("a pass the recorded steps never ran ({})", f.pass_statement);
  if (compiled_anew)
    add(w, "undecidable",
        compiled_anew_text(*f.compiled_anew) +
            ". The trace ends at its failing malloc, so its peak is unknown; that the failing malloc would fit proves "
            "nothing about the rest of the step");
  else
    add(w, "undecidable",
        fmt::format("the OOM is in {}; the trace ends at its failing malloc, so its peak is unknown. "
                    "That the failing malloc would fit proves nothing about the rest of the pass",
                    w.trigger));
  const std::string rerun =
      fmt::format("one rerun of the {} phase with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True at the same memory: "
                  "if it still fails, the verdict is capacity",
                  f.phase);
  const std::string plan = "the job spec (model, batch, sequence length) for `fragscope plan`, which computes the "
                           "phase's peak";
  // A pass the run never ran before, its history from the start (or from before an earlier run of the failing
  // unit's statement: sb0_lo, history from the first step, the model loaded before it): the trace already holds
  // all of it that ran, and no snapshot at this memory holds more; its peak can come only from a run that
  // completes it.
  if (!f.starts_mid_run || f.clues.earlier_units > 0) {
    const std::string_view pass = f.found_reason == PhaseReason::kFirstStep ? "first step"
                                  : is_phase(f, JobPhase::kOptimizer)      ? "optimizer step"
                                  : is_phase(f, JobPhase::kEval)           ? "eval pass"
                                                                           : "failing pass";
    w.decide_with = {
        rerun,
        fmt::format("the {0}'s peak from a run that completes it (the same {0} on a GPU with more memory, history "
                    "on, or `torch.cuda.max_memory_allocated()` after it): a peak allocated above the {1} this device "
                    "gives means capacity",
                    pass, format_bytes(f.capacity_bytes)),
        plan};
    return;
  }
  // A mid-run trace that holds only the failing step's head is asked for two whole steps before it (see the
  // caller), which says more than a snapshot across the phase.
  if (f.mid_run_first_pass) {
    w.decide_with = {plan, rerun};
    return;
  }
  w.decide_with = {
      fmt::format("a snapshot across the whole {} phase: record history through it and dump from the OOM observer "
                  "(torch._C._cuda_attach_out_of_memory_observer), or run the phase alone with history on",
                  f.phase),
      plan, rerun};
}

/// The experiment that labels an OOM, as what would decide a step: the job rerun under `conf` at the
/// same memory.
std::string rerun_decides(std::string_view conf) {
  return fmt::format("one rerun with PYTORCH_CUDA_ALLOC_CONF={} at the same memory: if it fails, in this step or at "
                     "a later batch, the verdict is capacity; if the run completes, fragmentation",
                     conf);
}

void word_training_step(const TracedOomFindings& f, TracedOomWords& w) {
  const diagnose::StepProjection& p = f.step;
  const std::uint64_t cap = f.capacity_bytes;
  if (f.rule == TracedOomRule::kNoStepProjection) {
    add(w, "projection", "no projection of the failing step's peak: " + step_unavailable_reason(f));
    if (!f.trace.unavailable_reason.empty())
      add(w, "trace_projection", "nor from the trace alone: " + f.trace.unavailable_reason);
    if (f.compiled_anew) add(w, "compiled_anew", compiled_anew_text(*f.compiled_anew));
    w.trigger = f.compiled_anew ? compiled_anew_trigger(*f.compiled_anew) : "a training step";
    w.decide_with = {
        "step telemetry (steps.jsonl from the fragscope hook) of the failing rank, so the failing step's peak "
        "can be projected from the recorded steps",
        "one rerun with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True at the same memory"};
    return;
  }
  if (f.longest_batch)
    w.trigger = fmt::format(
        "the longest batch of the run so far: step {} has {} tokens, {:.2f}× the largest recorded step ({} tokens)",
        p.failing_step.value_or(0), *p.failing_tokens,
        static_cast<double>(*p.failing_tokens) / static_cast<double>(f.max_recorded_tokens), f.max_recorded_tokens);
  else
    w.trigger = fmt::format("training step {}", p.failing_step.value_or(0));
  add(w, "projection",
      fmt::format("projected peak of step {}: {} = {} static + {} activations of reference step {} scaled ×{:.3f}{} + "
                  "{} that do not scale",
                  p.failing_step.value_or(0), format_bytes(p.projected_peak_bytes), format_bytes(p.static_bytes),
                  format_bytes(p.reference_transient_bytes - p.reference_constant_bytes), p.reference_step.value_or(0),
                  p.token_ratio,
                  p.failing_tokens && p.reference_tokens
                      ? fmt::format(" ({} → {} tokens)", *p.reference_tokens, *p.failing_tokens)
                      : "",
                  format_bytes(p.reference_constant_bytes)));
  const std::uint64_t peak = f.needed_bytes;
  const std::uint64_t next = f.next_needed_bytes;
  if (f.inflation > 1.01)
    add(w, "rounding",
        fmt::format("the recorded setting rounds requests up (roundup_power2_divisions): the snapshot's live "
                    "blocks hold ×{:.3f} the bytes they asked for; {} does not round, and at requested sizes the "
                    "step projects to about {}",
                    f.inflation, f.unrounded_conf, format_bytes(next)));
  if (f.rule == TracedOomRule::kStepExceeds) {
    add(w, "projection_vs_capacity",
        fmt::format("the step needs about {} of live memory even with perfect packing; the device gives {} — "
                    "short by {}",
                    format_bytes(peak), format_bytes(cap), format_bytes(peak - cap)));
    return;
  }
  add(w, "projection_vs_capacity",
      fmt::format("the step's projected peak {} fits in {} ({} to spare with perfect packing)", format_bytes(peak),
                  format_bytes(cap), format_bytes(cap - peak)));
  if (f.rule == TracedOomRule::kNextStepExceeds) {
    add(w, "next_step",
        fmt::format("but step {} runs without {} that the steps before it kept from one step to the next "
                    "(gradients dropped after the optimizer step); the next steps hold them again, and a batch "
                    "like step {}'s then needs about {}: short by {} even with perfect packing",
                    p.failing_step.value_or(0), format_bytes(p.returning_bytes), p.failing_step.value_or(0),
                    format_bytes(next), format_bytes(next - cap)));
    return;
  }
  if (f.rule == TracedOomRule::kStepTooClose) {
    const std::uint64_t spare = cap - next;
    add(w, "too_close",
        fmt::format("the step would leave {} ({:.1f}% of {}) with perfect packing: closer than the projection's "
                    "accuracy ({:.0f}%: on held-out recordings it came within 1% of the real peaks), and every "
                    "allocator needs some room above the live bytes, so whether a setting runs the step cannot be "
                    "told from the trace",
                    format_bytes(spare), 100.0 * static_cast<double>(spare) / static_cast<double>(cap),
                    format_bytes(cap), 100.0 * f.too_close_fraction));
    w.trigger = fmt::format("training step {}, within {:.0f}% of the capacity", p.failing_step.value_or(0),
                            100.0 * f.too_close_fraction);
    w.decide_with = {
        rerun_decides(f.best && !f.best->conf.empty() ? f.best->conf : "expandable_segments:True"),
        "or make room instead of deciding: activation checkpointing, or a smaller micro-batch with more accumulation"};
    return;
  }
  if (!f.best)
    add(w, "stranded",
        "the ideal packer fits the step but no setting of the sweep does: the trace starts with the memory "
        "already in pieces (live blocks pinning split segments), and a setting changed from that state "
        "inherits them");
}

/// What decides a pass whose cuDNN workspaces the snapshot's stacks cannot show (TracedOomRule::kWorkspacesHidden).
constexpr std::string_view kRecordCppFrames =
    "a snapshot recorded with C++ frames (_record_memory_history(stacks=\"all\"), the default), whose stacks show "
    "the cuDNN workspaces";

/// What would decide a step projected from the trace that the margins leave open: first, when the
/// batches vary, how much larger one must be to need more than the device.
std::vector<std::string> undecided_projected_step(const TracedOomFindings& f) {
  std::vector<std::string> decide_with = {
      rerun_decides("expandable_segments:True"),
      "a snapshot whose trace holds more steps like the failing one (a larger max_entries), so the fit can be "
      "checked on more of them",
      "or make room instead of deciding: activation checkpointing, or a smaller micro-batch with more accumulation"};
  if (f.batch_factor_at_capacity && f.batch_factor_beyond_margins && !f.trace.eval_units)
    decide_with.insert(
        decide_with.begin(),
        fmt::format("the sizes of the batches still to come (the log's or the dataset's sequence lengths, batch "
                    "or image sizes): the failing step projects to {} live with perfect packing of the {} the "
                    "device gives; a batch ×{:.2f} its size would need more, and one ×{:.2f} more beyond the "
                    "projection's margins: if the run meets one, the verdict is capacity",
                    format_bytes(f.trace.projected_peak_bytes), format_bytes(f.capacity_bytes),
                    *f.batch_factor_at_capacity, *f.batch_factor_beyond_margins));
  return decide_with;
}

/// The entries of a history that holds two whole steps and the failing one's head, when this one
/// holds the end of one step and the head of the next: three times its events, if steps are alike.
std::size_t longer_history_entries(const TracedOomFindings& f) {
  return diagnose::history_entries_for(f.oom_index + 1);
}

/// What would decide a mid-run trace, first: a history of two whole steps before the failing one,
/// `entries` long if a ring, for the reason `how_long` gives.
std::string two_whole_steps_history(std::string_view how_long, snapshot::HistoryStart start, std::size_t entries) {
  return fmt::format("a snapshot whose history holds two whole steps before the failing one (one to project from, "
                     "one to check the fit on): {}; {}",
                     how_long, longer_history(start, entries));
}

/// The fit's evidence: on how many earlier units it was checked, and the margins that follow.
std::string describe_fit(const TraceStepProjection& p) {
  const std::string margins = fmt::format(
      "a setting must run it with {} of the capacity to spare, and perfect packing must "
      "miss it by {}, to decide",
      pct(p.margin_to_fit), pct(p.margin_to_fail));
  if (!p.fit_error) {
    const std::string first_step =
        !p.reference_is_first_step ? ""
        : p.first_step_unlike
            ? fmt::format(" (unit 1 is the job's first step, and {} of what it allocated up to the aligned allocation "
                          "the failing unit did not: first-time work such as cudnn.benchmark's trials, which its "
                          "rest may hold too)",
                          format_bytes(p.reference_unmatched_bytes))
            : fmt::format(" (unit 1 is the job's first step, alike the failing unit up to the aligned allocation "
                          "but for {})",
                          format_bytes(p.reference_unmatched_bytes));
    return fmt::format(
        "no other unit allocates like unit {}{}, so the fit cannot be checked on the trace's own "
        "history; {}",
        p.reference_unit, first_step, margins);
  }
  const std::string sides = p.checked_units == 1 ? ""
                            : fmt::format(" (at most {} below, {} above)", pct(p.fit_error_below),
                                          pct(p.fit_error_above));
  return fmt::format(
      "the fit checked on {} earlier unit{}{}: projected from unit {}, {} peak{} came within {} of "
      "the real one{}{}; {}",
      p.checked_units, p.checked_units == 1 ? "" : "s",
      p.other_kind_units == 0 ? ""
                              : fmt::format(" of the failing unit's kind ({} of another kind left out: they begin "
                                            "holding other blocks, gradients or the optimizer's state)",
                                            p.other_kind_units),
      p.reference_unit, p.checked_units == 1 ? "its" : "their", p.checked_units == 1 ? "" : "s", pct(*p.fit_error),
      p.checked_units == 1 ? "" : "s", sides, margins);
}

/// What a growing run keeps, for its rule's words.
std::string growth_words(const diagnose::RunGrowth& g) {
  const std::string made_at = g.frame.empty() ? "a call stack without Python frames" : g.frame;
  if (g.regrown)
    return fmt::format("the memory live at the start of each of its last {} {} rose by {} or more ({} over them){}, "
                       "what grows remade larger each time and the one before freed (made at {})",
                       g.steps, g.eval_batches ? "eval batches" : "steps", format_bytes(g.per_step_bytes),
                       format_bytes(g.kept_bytes),
                       g.peak_per_step_bytes ? fmt::format(" and their peaks by {} or more, the old and the larger "
                                                           "copy live at once",
                                                           format_bytes(g.peak_per_step_bytes))
                                             : std::string(),
                       made_at);
  return fmt::format("each of its last {} {} left {} or more live that no later one freed ({} in all at the "
                     "OOM, made at {})",
                     g.steps, g.eval_batches ? "eval batches" : "steps", format_bytes(g.per_step_bytes),
                     format_bytes(g.kept_bytes), made_at);
}

void word_projected_step(const TracedOomFindings& f, TracedOomWords& w) {
  const TraceStepProjection& p = f.trace;
  const std::uint64_t cap = f.capacity_bytes;
  add(w, "phase", fmt::format("phase {}: {}", f.phase, w.phase_source));
  if (f.telemetry_too_close_bytes)
    add(w, "too_close",
        fmt::format("the step projected from the telemetry needs {} of the {} the device gives, within {} of it: "
                    "too close to decide; the trace's own projection below decides",
                    format_bytes(*f.telemetry_too_close_bytes), format_bytes(cap), pct(f.too_close_fraction)));
  add(w, "projection", describe_projection(p));
  add(w, "fit", describe_fit(p));
  if (p.over_bytes || p.under_bytes)
    add(w, "doubt",
        fmt::format("the projection may be up to {} high and {} low: allocations no unit tells how they "
                    "scale (constant to quadratic), frees without a counterpart, a reference of another "
                    "kind",
                    format_bytes(p.over_bytes), format_bytes(p.under_bytes)));
  if (p.kind_difference_bytes)
    add(w, "reference_kind",
        fmt::format("no earlier unit began holding what the failing one did (its blocks within 5%): the reference "
                    "began {} {} (the optimizer's state or gradients): its rest may make {} than the failing "
                    "unit's will{}",
                    format_bytes(p.kind_difference_bytes), p.reference_began_lower ? "lower" : "higher",
                    p.reference_began_lower ? "blocks the failing unit already holds, more" : "fewer blocks",
                    p.reference_began_lower && p.kept_before_peak_bytes < p.kind_difference_bytes
                        ? fmt::format("; such blocks are long-lived, and of those its rest made, {} came before "
                                      "the projected peak: only they can raise it{}",
                                      format_bytes(p.kept_before_peak_bytes),
                                      p.held_freeable_bytes == 0
                                          ? std::string()
                                          : fmt::format("; and the failing unit holds {} that the step before left "
                                                        "it outside an optimizer's code (gradients, outputs), which "
                                                        "it may free where the reference had nothing to free{}",
                                                        format_bytes(p.held_freeable_bytes),
                                                        p.held_freed_saving_bytes == 0
                                                            ? std::string()
                                                            : fmt::format(" (freed where the backward begins, as "
                                                                          "`zero_grad()` between the forward and "
                                                                          "the backward frees it, the projected "
                                                                          "peak would be {} lower)",
                                                                          format_bytes(p.held_freed_saving_bytes))))
                        : ""));
  if (p.unmatched_free_bytes)
    add(w, "unmatched",
        fmt::format("{} that the reference freed has no counterpart in the failing unit: the "
                    "projection keeps it",
                    format_bytes(p.unmatched_free_bytes)));
  const std::string size =
      std::abs(p.scale - 1) >= 0.02
          ? fmt::format("its allocations ×{:.2f} those of unit {}, the most alike", p.scale, p.reference_unit)
          : fmt::format("the size of unit {}", p.reference_unit);
  w.trigger = p.eval_units ? fmt::format("unit {} of the trace's evaluation ({}), {}", p.earlier_units + 1,
                                         p.unit_statement, size)
              : p.smaller_units == p.aligned_units && p.aligned_units > 0
                  ? fmt::format("the longest batch of the trace so far: larger than the {} it aligns with ({}), {}",
                                counted(p.aligned_units, "earlier step", "earlier steps"), p.unit_statement, size)
                  : fmt::format("training step {} of the trace ({}), {}", p.earlier_units + 1, p.unit_statement, size);
  if (f.rule == TracedOomRule::kUncheckedSeveralScales) {
    add(w, "several_scales",
        p.follows_one_scale
            ? fmt::format("the batches vary, and no other unit allocates like unit {} to show how each allocation "
                          "follows their size: the rest of the step may follow a dimension its first part does not "
                          "show (a translation's target beside its source), so the projection decides nothing",
                          p.reference_unit)
            : fmt::format("its sizes do not follow unit {}'s by one scale: {} of the paired bytes are at none of ×1, "
                          "×{:.2f} and its square (two dimensions that vary apart, such as a translation's source and "
                          "target lengths, or a part of fixed size beside one that follows the batch), and no other "
                          "unit allocates like it to show how each allocation follows; a projection by one scale "
                          "decides nothing",
                          p.reference_unit, pct(p.reference_off_scale_share), p.scale));
    w.decide_with = undecided_projected_step(f);
    return;
  }
  if (f.rule == TracedOomRule::kPrefixMisfit) {
    add(w, "prefix_misfit",
        fmt::format("the fit that projects the earlier units does not give the failing step's own allocations so "
                    "far: at ×{:.2f}, {} of their paired bytes come out more than 2% off their real sizes (a "
                    "dimension the earlier steps did not vary), so the projection decides nothing",
                    p.scale, pct(p.prefix_misfit_share)));
    w.decide_with = undecided_projected_step(f);
    return;
  }
  if (f.rule == TracedOomRule::kProjectionMissesHistory) {
    add(w, "fit_rejected",
        f.missed_side.empty()
            ? fmt::format("the projection misses the trace's own earlier units by up to {} (more than {}): it "
                          "does not fit its own history, so it decides nothing",
                          pct(f.missed_by), pct(f.max_fit_error))
            : fmt::format("the projection came out {} the trace's own earlier units by up to {} (more than {}), the "
                          "side that would decide: it cannot show that the step {}",
                          f.missed_side, pct(f.missed_by), pct(f.max_fit_error),
                          f.missed_side == "below" ? "fits" : "needs more than the device"));
    w.decide_with = undecided_projected_step(f);
    return;
  }
  if (f.inflation > 1.01)
    add(w, "rounding",
        fmt::format("the recorded setting rounds requests up: the snapshot's live blocks hold ×{:.3f} the bytes "
                    "they asked for, so at the sizes asked for the step needs about {}",
                    f.inflation, format_bytes(f.needed_bytes)));
  const bool weighs_capacity = f.rule == TracedOomRule::kProjectedStepExceeds ||
                               f.rule == TracedOomRule::kNoSettingRunsProjected ||
                               f.rule == TracedOomRule::kNoSettingRunsAtCapacity ||
                               f.rule == TracedOomRule::kProjectedStepTooClose;
  if (const std::uint64_t workspaces = p.projected_peak_bytes - std::min(p.projected_peak_bytes,
                                                                          p.inelastic_peak_bytes);
      weighs_capacity && workspaces > 0)
    add(w, "workspaces",
        fmt::format("{} of the projected peak are cuDNN workspaces, which ATen replaces by a plan that asks for "
                    "less when one is refused: the step needs at least {} live, and a setting fails it only if it "
                    "fails with the workspaces that do not fit refused",
                    format_bytes(workspaces), format_bytes(p.inelastic_peak_bytes)));
  const std::uint64_t next = f.next_needed_bytes;
  switch (f.rule) {
    case TracedOomRule::kProjectedStepExceeds:
      add(w, "projection_vs_capacity",
          fmt::format("the step needs {} of live memory even with perfect packing; the device gives "
                      "{} — short by {}, beyond the projection's margins",
                      format_bytes(f.needed_bytes), format_bytes(cap), format_bytes(f.needed_bytes - cap)));
      return;
    case TracedOomRule::kRunGrows: {
      const diagnose::RunGrowth& g = f.growth;
      const char* unit = g.eval_batches ? "eval batch" : "step";
      const char* units = g.eval_batches ? "eval batches" : "steps";
      add(w, "run_grows",
          fmt::format("the failing {} itself fits, and {} runs it; but the run grows: {}. {}. How many {} the run "
                      "still has before it frees what it keeps is not in the trace",
                      unit, f.best_run->conf.empty() ? "the recorded setting" : f.best_run->conf, growth_words(g),
                      f.grown_needed_bytes > cap
                          ? fmt::format("The {} after it needs at least {} live, more than the {} the device gives",
                                        unit, format_bytes(f.grown_needed_bytes), format_bytes(cap))
                          : fmt::format("At that rate what the failing {} leaves under the capacity, less the fit's "
                                        "margin, holds about {} more",
                                        unit, f.growing_steps_that_fit),
                      units));
      w.decide_with = undecided_projected_step(f);
      w.decide_with.insert(
          w.decide_with.begin(),
          f.growing_steps_that_fit == 0
              ? fmt::format("whether the run has another {} before it frees what it keeps (the epoch's or the "
                            "validation's end): one more {} about {} where the device gives {}, none means "
                            "fragmentation; or keep those tensors off the GPU and the question goes away",
                            unit, f.grown_needed_bytes > cap ? "means capacity: it needs" : "needs",
                            format_bytes(f.grown_needed_bytes), format_bytes(cap))
              : fmt::format("how many more {} the run has before it frees what it keeps (the epoch's or the "
                            "validation's end): more than {} means capacity, {} or fewer fragmentation; or keep "
                            "those tensors off the GPU and the question goes away",
                            units, f.growing_steps_that_fit, f.growing_steps_that_fit));
      return;
    }
    case TracedOomRule::kNextUnitMayNotFit:
      add(w, "next_step",
          fmt::format("the failing step itself fits, but the unit after the reference began {} higher than it "
                      "did (what the steps after a zero_grad hold again): a batch as long as the failing one a "
                      "step later would need about {} of the {} the device gives. Whether a later batch is that "
                      "long is not in the trace",
                      format_bytes(p.next_unit_extra_bytes), format_bytes(next), format_bytes(cap)));
      w.decide_with = undecided_projected_step(f);
      w.decide_with.insert(
          w.decide_with.begin(),
          fmt::format("the lengths of the batches still to come while the gradients are held (the rest "
                      "of this accumulation group, then every group): the failing step itself runs under "
                      "{}, and none as long means fragmentation; one as long needs about {} of the {} "
                      "the device gives: capacity",
                      f.best_run->conf.empty() ? "the recorded setting" : f.best_run->conf, format_bytes(next),
                      format_bytes(cap)));
      return;
    case TracedOomRule::kLongerBatchMayNotFit: {
      add(w, "longest_batch",
          fmt::format("the failing step itself fits, but unit {} of the trace was a longer batch; one that long "
                      "begun as the failing step began would need about {} live of the {} the device gives{}: "
                      "more than the {} a setting runs with the margins the failing step's run kept ({:.1f}%). "
                      "The job makes such batches; whether the run meets one again is not in the trace",
                      *p.longest_unit, format_bytes(p.longest_peak_bytes), format_bytes(cap),
                      f.setting_room_bytes > 0
                          ? fmt::format(", and {} more for the setting's own room (what it reserved above "
                                        "perfect packing in the failing step)",
                                        format_bytes(f.setting_room_bytes))
                          : std::string(),
                      format_bytes(f.longest_batch_limit_bytes),
                      100 * (1 - static_cast<double>(f.longest_batch_limit_bytes) / static_cast<double>(cap))));
      w.decide_with = undecided_projected_step(f);
      return;
    }
    case TracedOomRule::kBatchesGrow: {
      add(w, "batches_grow",
          fmt::format("the failing step itself fits, but the batches grew step after step: the {} before it in the "
                      "trace each smaller than the one after it, the failing one ×{:.2f} the last: a warm-up of the "
                      "batch size or the sequence length. One more step grown as much would need about {} live of "
                      "the {} the device gives{}: more than the {} a setting runs with the margins the failing step's "
                      "run kept. Where the warm-up stops is not in the trace",
                      p.growing_units, p.last_growth, format_bytes(f.grown_batch_needed_bytes), format_bytes(cap),
                      f.setting_room_bytes > 0
                          ? fmt::format(", and {} more for the setting's own room", format_bytes(f.setting_room_bytes))
                          : std::string(),
                      format_bytes(f.longest_batch_limit_bytes)));
      w.decide_with = undecided_projected_step(f);
      w.decide_with.insert(
          w.decide_with.begin(),
          "where the warm-up stops (the batch-size or sequence-length schedule in the job's config): if it stops "
          "at the failing step's size, the verdict is fragmentation");
      return;
    }
    case TracedOomRule::kFewBatchesSeen: {
      const bool one = p.aligned_units == 1;
      // Sizes that differ in a part only (a fixed-size input beside one that follows the batch) leave the scale at 1.
      const std::string part = std::abs(p.scale - 1) < 0.02 && p.off_scale_share > 0
                                   ? fmt::format(" in most of its bytes, {} of them at other sizes (a part of fixed "
                                                 "size beside one that follows the batch)",
                                                 pct(p.off_scale_share))
                                   : "";
      add(w, "unseen_batches",
          fmt::format("{} But the trace holds {}, and the failing one is ×{:.2f} {}{}: the job's batches vary, and "
                      "{} not tell how large they get (in random order, the next batch would beat the largest of {} "
                      "one time in {}). A larger batch later in the run would fail "
                      "under any setting once it needs more than the device",
                      projected_pass_fits("the failing step itself fits:", next, f) + ".",
                      one ? "one earlier batch" : fmt::format("{} earlier batches", p.aligned_units), p.scale,
                      one ? "its size" : "the size of the most alike", part, one ? "one batch does" : "so few do",
                      p.aligned_units + 1, p.aligned_units + 2));
      w.decide_with = undecided_projected_step(f);
      return;
    }
    case TracedOomRule::kProjectedStepFits:
      add(w, "projection_vs_capacity", projected_pass_fits("the projected step fits:", next, f));
      return;
    case TracedOomRule::kWorkspacesHidden:
      add(w, "workspaces_hidden",
          fmt::format("the projected step needs {} live with perfect packing against {}, but the snapshot's "
                      "stacks hold no C++ frames and the job may run convolutions: cuDNN workspaces, which ATen "
                      "replaces by plans that ask for less when one is refused, cannot be told from the step's "
                      "other allocations, so how much less it can do with is unknown",
                      format_bytes(p.projected_peak_bytes), format_bytes(cap)));
      w.decide_with = undecided_projected_step(f);
      w.decide_with.insert(w.decide_with.begin(), std::string(kRecordCppFrames));
      return;
    case TracedOomRule::kNoSettingRunsProjected:
      add(w, "projection_vs_capacity",
          fmt::format("the projected step needs {} live with perfect packing, but no allocator setting of the "
                      "sweep runs it even at {} more than the {} the device gives: what a real allocator needs "
                      "above the live bytes does not fit",
                      format_bytes(p.projected_peak_bytes), pct(p.margin_to_fail), format_bytes(cap)));
      return;
    case TracedOomRule::kNoSettingRunsAtCapacity:
      add(w, "projection_vs_capacity",
          fmt::format("the projected step needs {} live with perfect packing, and no allocator setting of the sweep "
                      "runs it at the {} the device gives, nor with {} more. The projection may be up to {} high, "
                      "and a step that much smaller might run; but fragmentation needs it and every later step to run "
                      "where no setting runs the projection, capacity one step that fails",
                      format_bytes(p.projected_peak_bytes), format_bytes(cap), pct(diagnose::kProjectionFloor),
                      pct(p.margin_to_fail)));
      return;
    default:
      break;
  }
  add(w, "too_close",
      fmt::format("the projected step needs {} live with perfect packing against {}: no setting runs it with "
                  "{} of that to spare, and perfect packing does not miss it by {}, the margins the projection "
                  "needs to decide{}{}",
                  format_bytes(p.projected_peak_bytes + p.next_unit_extra_bytes), format_bytes(cap),
                  pct(p.margin_to_fit), pct(p.margin_to_fail),
                  !f.held_freed_needed_bytes
                      ? std::string()
                      : fmt::format("; no setting runs it as projected, but with the step before's gradients freed "
                                    "where its backward begins (`zero_grad()` between the forward and the backward) "
                                    "it needs {}, which a setting may run",
                                    format_bytes(*f.held_freed_needed_bytes)),
                  !f.starts_mid_run ? ""
                  : f.any_relaid_start
                      ? fmt::format(" (the trace starts mid-run: settings with expandable segments start from "
                                    "its live blocks re-laid as they hold them and must leave {} more; the "
                                    "others inherit the pieces the trace starts with)",
                                    pct(p.relaid_start_margin))
                      : " (the trace starts mid-run: a setting replayed from its "
                        "state inherits pieces the job's start would not have made)"));
  w.decide_with = undecided_projected_step(f);
  if (f.held_freed_needed_bytes)
    w.decide_with.insert(
        w.decide_with.begin(),
        fmt::format("where the loop calls `zero_grad()` (set_to_none, the default): between the forward and the "
                    "backward, the step needs {} with perfect packing and a setting may run it; at the loop's start "
                    "or after the optimizer's step, it needs the {} projected, which no setting runs at {}: capacity",
                    format_bytes(*f.held_freed_needed_bytes), format_bytes(p.projected_peak_bytes),
                    format_bytes(cap)));
}

void word_projected_eval(const TracedOomFindings& f, TracedOomWords& w) {
  const TraceStepProjection& p = f.trace;
  const std::uint64_t cap = f.capacity_bytes;
  add(w, "projection",
      fmt::format("the eval batch's allocations under {} up to the failing malloc match training call {} of {} "
                  "({}, events {}–{}) frame for frame ({} of {}; the failing malloc is its event {}); their sizes "
                  "are ×{:.3f} the training's. The rest of that call and of the step's statements after it up to "
                  "its backward pass, each block freed where the eval freed its like in an earlier layer ({} of "
                  "them) or where the training freed it, else kept: the eval batch peaks at {} live with perfect "
                  "packing; at least {} if every block whose lifetime the eval has not shown is freed at once, no "
                  "cuDNN workspace is asked for and nothing runs after the call",
                  p.shared_function, p.reference_unit, p.earlier_units, p.training_call, p.reference_first_event,
                  p.reference_end_event - 1, p.matched_allocations, p.prefix_allocations, p.aligned_event, p.scale,
                  p.learned_lifetimes, format_bytes(p.most_peak_bytes), format_bytes(p.least_peak_bytes)));
  w.trigger = fmt::format("an eval pass ({}) the trace never ran before, projected from the training's {} call",
                          p.unit_statement, p.shared_function);
  const std::uint64_t least = f.needed_bytes;
  const std::uint64_t upper = f.most_needed_bytes;
  if (f.rule == TracedOomRule::kEvalExceeds) {
    add(w, "projection_vs_capacity",
        fmt::format("the eval batch needs at least {} of live memory even with perfect packing; the "
                    "device gives {} — short by {}, beyond the projection's {} floor",
                    format_bytes(least), format_bytes(cap), format_bytes(least - cap), pct(p.margin_to_fail)));
    return;
  }
  if (f.rule == TracedOomRule::kEvalFits) {
    add(w, "projection_vs_capacity", projected_pass_fits("the projected eval batch fits: at most", upper, f));
    return;
  }
  if (f.rule == TracedOomRule::kWorkspacesHidden) {
    add(w, "workspaces_hidden",
        fmt::format("the eval batch needs at least {} live against {}, but the snapshot's stacks hold no C++ frames "
                    "and the job may run convolutions: cuDNN workspaces, which ATen replaces by plans that ask for "
                    "less when one is refused, cannot be told from the eval's other allocations",
                    format_bytes(least), format_bytes(cap)));
    w.decide_with = {std::string(kRecordCppFrames),
                     "one rerun of the eval pass with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True at the same "
                     "memory: if it still fails, the verdict is capacity"};
    return;
  }
  add(w, "too_close",
      fmt::format("the eval batch needs between {} and {} live with perfect packing against {}, and no "
                  "allocator setting runs the upper estimate with {} to spare{}: what the eval frees in the "
                  "layers it has not reached, and what it runs after the call, decide it",
                  format_bytes(least), format_bytes(upper), format_bytes(cap), pct(p.margin_to_fit),
                  f.any_relaid_start
                      ? fmt::format(" ({} more for settings with expandable segments: the trace starts mid-run, "
                                    "and they start from its live blocks re-laid as they hold them)",
                                    pct(p.relaid_start_margin))
                      : ""));
  w.decide_with = {
      "one rerun of the eval pass with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True at the same memory: if it "
      "still fails, the verdict is capacity",
      "a snapshot whose trace holds a whole eval batch (history through an earlier eval, or the eval run alone with "
      "history on), so the pass can be projected from the eval itself",
      "or make room instead of deciding: a smaller eval batch (per_device_eval_batch_size), or "
      "eval_accumulation_steps"};
}

bool is_eval_rule(TracedOomRule rule) {
  return rule == TracedOomRule::kEvalExceeds || rule == TracedOomRule::kEvalFits ||
         rule == TracedOomRule::kEvalTooClose;
}

bool is_unrecorded_pass_rule(TracedOomRule rule) {
  return rule == TracedOomRule::kListOpExceeds || rule == TracedOomRule::kUnrecordedPass;
}

}  // namespace

TracedOomWords traced_oom_words(const TracedOomFindings& f) {
  TracedOomWords w;
  const std::uint64_t cap = f.capacity_bytes;
  add(w, "capacity", fmt::format("capacity {}: {}", format_bytes(cap), f.capacity_source));
  if (f.recorded)
    add(w, "replay_recorded",
        fmt::format("replaying the trace under the recorded config ({}) at {} {} at the recorded OOM (event {})",
                    f.recorded->conf.empty() ? "defaults" : f.recorded->conf, format_bytes(cap),
                    f.recorded->passes_oom_point ? "does NOT fail" : "fails as the real run did", f.oom_index));
  // The phase as the call path told it sits before the optimizer steps; told again from the
  // trace's units, after them.
  const std::string found = fmt::format("phase {}: {}", f.found_phase, phase_source(f, f.found_reason));
  const bool revised = f.found_reason != PhaseReason::kCallPath;
  if (!f.projected_unit && !revised) add(w, "phase", found);
  if (f.optimizer_steps_done)
    add(w, "optimizer_steps",
        fmt::format("the trace holds {} completed optimizer steps, the telemetry records {}: the step after "
                    "the last record finished its training work before the OOM",
                    *f.optimizer_steps_done, f.optimizer_steps_recorded));
  if (!f.projected_unit && revised) add(w, "phase", found);
  if (f.call_site)
    add(w, "call_site",
        fmt::format("the failing malloc was called from {} (statement {})", *f.call_site, f.call_site_statement));
  if (!f.projected_unit && f.other_pass)
    add(w, "phase", fmt::format("phase {}: {}", f.phase, phase_source(f, PhaseReason::kOtherPass)));
  w.phase_source = f.projected_unit ? phase_source(f, PhaseReason::kProjectedUnit)
                   : f.other_pass   ? phase_source(f, PhaseReason::kOtherPass)
                                    : phase_source(f, f.found_reason);

  const std::string pools_idle =
      f.private_pool_idle_bytes == 0
          ? std::string()
          : fmt::format(" + {} CUDA graphs' private pools hold idle ({})", format_bytes(f.private_pool_idle_bytes),
                        kWhyPoolsHold);
  if (f.rule == TracedOomRule::kIdealPackerFails) {
    add(w, "ideal_packer",
        fmt::format("even the ideal packer (live bytes packed with no gaps) cannot serve the {} request at event "
                    "{}: live bytes{} + request exceed {}",
                    format_bytes(f.request_bytes), f.oom_index, pools_idle, format_bytes(cap)));
    w.step_unavailable_reason = step_unavailable_reason(f);
    return w;
  }
  add(w, "ideal_packer",
      fmt::format("the ideal packer serves the failing {} request at {}: {} live{} + the request = {}",
                  format_bytes(f.request_bytes), format_bytes(cap), format_bytes(f.live_at_oom_bytes), pools_idle,
                  format_bytes(f.live_at_oom_bytes + f.private_pool_idle_bytes + f.request_bytes)));
  if (f.best)
    add(w, "replay_best",
        fmt::format("PYTORCH_CUDA_ALLOC_CONF={} passes the recorded OOM point at the same {}, reserving at most {} "
                    "up to it",
                    quoted_conf(f.best->conf), format_bytes(cap), format_bytes(f.best->peak_reserved_bytes)));
  else
    add(w, "replay_best",
        fmt::format("no allocator config of the sweep ({} configs) passes the recorded OOM point at {}",
                    f.sweep_settings, format_bytes(cap)));

  if (f.rule == TracedOomRule::kExpandableFailsAtOom) {
    add(w, "expandable_fails",
        fmt::format("replayed from the job's start under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True at the same "
                    "{}, the job fails too, at or before the failing malloc ({} reserved): a rerun under it fails "
                    "where this run did, and no other setting is shown to run the rest of the pass",
                    format_bytes(cap), format_bytes(f.expandable_reserved_bytes)));
    w.step_unavailable_reason = step_unavailable_reason(f);
    return w;
  }
  if (f.projected_unit)
    word_projected_step(f, w);
  else if (is_eval_rule(f.rule))
    word_projected_eval(f, w);
  else if (is_unrecorded_pass_rule(f.rule))
    word_unrecorded_pass(f, w);
  else
    word_training_step(f, w);

  if (f.step_gap != diagnose::StepProjectionGap::kNone) w.step_unavailable_reason = step_unavailable_reason(f);
  if (f.trace_has_no_repeating_unit)
    w.trace_unavailable_reason = "no statement of the program's loop ran more than once before the OOM";
  if (f.max_entries_for_two_steps)
    w.decide_with.insert(w.decide_with.begin(),
                         two_whole_steps_history(f.trace.unavailable_reason, f.history_start,
                                                 *f.max_entries_for_two_steps));
  else if (f.mid_run_without_projection)
    w.decide_with.insert(
        w.decide_with.begin(),
        fmt::format("a snapshot whose history holds a whole step like the failing one before it: this trace "
                    "starts mid-run ({}) and no earlier step in it can be projected from (it holds {} events); {}",
                    mid_run_start(f.history_start), f.oom_index + 1,
                    longer_history(f.history_start, longer_history_entries(f))));
  else if (f.mid_run_first_pass && !f.clues.later_statement.empty())
    w.decide_with.insert(
        w.decide_with.begin(),
        fmt::format("a snapshot whose history holds an earlier run of the failing pass ({}), which comes less often "
                    "than the loop's steps: history from the run's start, or from before that pass's previous run "
                    "(more steps of {} alone hold none)",
                    f.clues.later_than, f.clues.later_statement));
  else if (f.mid_run_first_pass)
    w.decide_with.insert(w.decide_with.begin(),
                         two_whole_steps_history(
                             f.history_start == snapshot::HistoryStart::kStartedLate
                                 ? fmt::format("this trace holds {} events, from where history began to the "
                                               "failing step's head",
                                               f.oom_index + 1)
                                 : fmt::format("this trace holds {} events, the end of the step before and the "
                                               "failing step's head, so a step takes about that many or more if its "
                                               "steps are alike",
                                               f.oom_index + 1),
                             f.history_start, longer_history_entries(f)));
  return w;
}

}  // namespace fragscope::report
