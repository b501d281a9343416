#include "diagnose/traced_oom_verdict.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "diagnose/batch_headroom.h"
#include "diagnose/cache_empties.h"
#include "diagnose/compiled_graph.h"
#include "diagnose/eval_projection.h"
#include "diagnose/list_op_projection.h"
#include "diagnose/live_blocks.h"
#include "diagnose/memory_advice.h"
#include "diagnose/oom_call_path.h"
#include "diagnose/oom_phase.h"
#include "diagnose/projected_runs.h"
#include "diagnose/run_growth.h"
#include "diagnose/step_projection.h"
#include "diagnose/trace_projection.h"
#include "diagnose/trace_units.h"
#include "diagnose/whatif_lines.h"
#include "metrics/memory_totals.h"
#include "replay/capacity.h"
#include "replay/prepared_trace.h"
#include "replay/replay_engine.h"
#include "replay/whatif.h"
#include "snapshot/history_start.h"
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
/// 0.43%) came to it to the byte; unchecked near their reference they missed by at most 3.62%
/// beyond their under_bytes (below). Unchecked, every unit of the complete recordings projected
/// from the unit before it alone (tests/diagnose/trace_projection_test.cpp) came out at most 5.1%
/// above its real peak beyond its over_bytes, and at most 7.9% below it beyond its under_bytes at
/// 3× its reference and more; from the job's first step, up to 11.7% above (field rx_lo's second
/// step: the first ran cudnn.benchmark's trials, which the later steps never repeat), and 8.06%
/// above from a first step alike the second (field slin_*: 256 tokens projecting 448, ×1.75). The floor itself is
/// kProjectionFloor (projected_runs.h): a capacity verdict needs every setting to fail beyond it too.
constexpr double kUncheckedProjection = 0.09;
constexpr double kUncheckedFromFirstStep = 0.12;

/// A first step whose allocations up to the aligned one that the failing prefix lacks
/// (TraceStepProjection::reference_unmatched_bytes) are at most this share of the capacity did
/// nothing the later steps skip, so far: it keeps kUncheckedProjection. In the cuts above, first
/// steps that far alike came out at most 8.06% above their real peak (slin_*); those above
/// 5.1% had 8.7% (fcn_edge, 6.3%) to 61% (rx_lo's cudnn.benchmark trials, 11.7%) unmatched.
constexpr double kFirstStepAlikeShare = 0.05;

/// A failing unit of a job whose batches vary decides fragmentation only when at least this many
/// earlier units align with it: with fewer, the trace shows that its batches vary, not how large they
/// get; in random order, the next batch would beat the largest of n + 1 one time in n + 2. So whether
/// the failing batch is the largest seen or not: a larger one seen ran under the recorded setting, but
/// says nothing of those to come. Field det_lo (the larger of two, ×1.28, fit with 4% to spare) and
/// fcn_lo (the largest of three, ×1.17 of the most alike, 2.3% to spare; of four when recorded with
/// Python frames only): the reruns under expandable segments ran the failing step and failed later at
/// a larger batch; whs_edge (Whisper, the smallest of three transcripts, 284 tokens against 316 and
/// 362, 11.6% to spare) failed later at 441.
constexpr std::size_t kMinBatchesSeen = 4;

/// Batches that grew at each of at least this many steps before the failing one, which grew too, are taken for a
/// warm-up (of the batch size or the sequence length) that goes on: in random order five batches come sorted one
/// time in 120. Field mrm_lo (a Muon GPT's batch warm-up, batches 4 to 9 in the trace, then 10) was called
/// fragmentation with 1.21 GiB to spare; its rerun under expandable segments ran batch 10 and failed at 11.
constexpr std::size_t kMinGrowingUnits = 4;

/// The least error assumed, on both sides, when the fit was checked on at least kCheckedUnits
/// earlier units: checked projections met the failing steps' real peaks to the byte on all five
/// held-out recordings whose reruns recorded it, and on field tut2_edge (38471977984 bytes, its
/// rerun's peak allocated); what is left is the replay's own rounding. Batches larger than the
/// failing one are another matter, left to the rules on the batches seen (kMinBatchesSeen,
/// kLongerBatchMayNotFit): a margin of tenths of a percent would not cover them either.
constexpr double kCheckedProjectionFloor = 0.001;
constexpr std::size_t kCheckedUnits = 3;

/// A projection no other unit checks keeps only kUncheckedNearReference on the side that decides
/// fragmentation when the failing unit is within this factor of its reference (|log scale|):
/// projected from the unit before it alone, every unit of the complete recordings within it
/// (tests/diagnose/trace_projection_test.cpp) peaked at most 3.62% above the projection and its
/// under_bytes (field cnxe_*, ConvNeXt with an EMA of its weights, the same size as the step before:
/// a cut two thirds in; up to that recording, 0.48%); beyond it (3× and more) up to 7.9%.
constexpr double kUncheckedMaxLogScale = 1.0;
constexpr double kUncheckedNearReference = 0.04;

/// What an eval projected from the training call (eval_projection.h) keeps from the capacity
/// each way: its two estimates bracketed the real peak at every cut of the complete eval
/// batches (docs/VALIDATION.md), so no fit error is added; this is for what those cuts did not show.
constexpr double kEvalFloor = 0.005;

/// A projection whose own history it misses by more than this (a fraction of the real peaks)
/// decides nothing.
constexpr double kMaxFitError = 0.05;
// The share of the failing prefix's paired bytes a checked fit may miss (trace_projection.h). Images whose height
// and width vary apart leave some (field ret_edge 7.2%, decided right), two lengths that vary apart more (bart_lo
// 18%, capacity by 7%, right); a scale in other terms than the fit's misses nearly all (field blm_edge by bytes:
// 95%, the linear and quadratic allocations both).
constexpr double kMaxPrefixMisfit = 0.25;

/// What a setting replayed from a mid-run trace's re-laid start must leave on top of the fit's
/// margin: on the complete recordings that end in an OOM, cut at 10%…90% (tests/replay/field_test.cpp,
/// docs/replay.md), such a replay needed up to 3.43% of the capacity less than the same setting
/// replayed from the job's start when the OOM was in a training step (field vmae_edge cut at 80%: one
/// 117 MiB block of a 3.42 GiB capacity, batch 87; dpo_edge cut at 90%, 1.80%, before it; gan_lo cut at
/// 50%, 1.04%, before batch 36), up to 0.99% in an eval pass (held-out eval cut at 80%). The worst grew
/// with new jobs (0.81%, 0.93%, 1.04%, 1.80%, 3.43%): a quarter on top of each.
constexpr double kRelaidStartStep = 0.043;
constexpr double kRelaidStartEval = 0.013;

/// A projected step that no setting runs at the capacity is capacity still when, with the step before's gradients
/// freed where its backward begins (TraceStepProjection::held_freed_saving_bytes), it leaves less than this share of
/// the capacity above its live peak: less than expandable segments reserved above the live bytes in the reruns that
/// measured it (field hfp_edge 0.71%, mae_edge 1.03%, bt_edge 0.86%). So freed, field fno_edge, hfg_edge, timm_edge,
/// vit_edge and vit192_edge left 0.04% to 0.69% (capacity, all); bt_edge left 1.04% (fragmentation).
constexpr double kHeldFreedRoom = 0.01;

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
    if (a.device != device || !snap.strings.view(a.name).starts_with("Optimizer.step")) continue;
    any = true;
    if (a.stage == snapshot::AnnotationStage::kEnd && a.time_us <= time) ++ends;
  }
  if (!any) return std::nullopt;
  return ends;
}

/// The sweep's row for expandable segments alone (the setting an OOM's label is rerun under).
const replay::WhatIfRow* expandable_row(const replay::WhatIfReport& report) {
  for (const replay::WhatIfRow& row : report.rows)
    if (row.config.conf == "expandable_segments:True" && row.at_capacity) return &row;
  return nullptr;
}

/// Whether expandable segments, replayed from the start at the capacity, fail at or before the failing malloc even
/// when the cuDNN workspaces that do not fit are refused (replay::ElasticAllocs::kRefuseWhenFull): ATen survives
/// those, and a rerun would go on with plans that ask for less. REQUIRES: expandable.at_capacity.
bool expandable_fails_without_workspaces(const replay::PreparedTrace& prepared, const replay::WhatIfRow& expandable,
                                         const replay::Capacity& capacity) {
  // Stacks that cannot show the workspaces: only a failure at the failing malloc itself, which no earlier
  // workspace's plan changes (they are freed before it), is the rerun's.
  if (prepared.elastic_hidden) return expandable.at_capacity->oom_matches_recorded;
  if (!replay::has_elastic_allocs(prepared)) return true;
  replay::ReplayOptions options = replay::replay_options_for(capacity);
  options.timeline_points = 0;
  options.elastic = replay::ElasticAllocs::kRefuseWhenFull;
  const replay::ReplayResult r =
      replay::run_replay(prepared, replay::ModelKind::kCaching, expandable.config.config, options);
  return !r.passed_recorded_oom && r.oom;
}

/// The first setting (least reserved up to the OOM point first) that runs the projected pass with its margin.
std::optional<ProjectedRun> best_projected_run(const std::vector<WhatIfLine>& whatif,
                                               const std::vector<ProjectedRun>& runs) {
  for (const WhatIfLine& line : whatif)
    for (const ProjectedRun& run : runs)
      if (run.conf == line.conf && run.runs_with_margin) return run;
  return std::nullopt;
}

/// A pass the recorded steps never ran (eval, checkpoint, an optimizer step): its peak is not
/// in the trace, so only a list op that provably needs more than the device decides it.
Verdict judge_unrecorded_pass(const snapshot::Snapshot& snap, int device, const RecordedCurve& curve,
                              std::size_t oom_index, std::span<const inputs::StepRecord> steps, bool optimizer,
                              TracedOomFindings& f) {
  if (optimizer) {
    const ListOpProjection op = project_failing_list_op(snap, device, curve, oom_index, f.private_pool_idle_bytes);
    if (op.available) {
      f.list_op = op;
      if (op.projected_peak_bytes > f.capacity_bytes) {
        f.rule = TracedOomRule::kListOpExceeds;
        return Verdict::kCapacity;
      }
    }
  }
  if (!steps.empty()) f.last_recorded_step = steps.back().step;
  f.step.available = false;
  f.step_gap = StepProjectionGap::kPassNotInTrace;
  f.rule = TracedOomRule::kUnrecordedPass;
  return Verdict::kUndetermined;
}

/// A training step like the recorded ones: its projected peak (step_projection.h) against the capacity.
Verdict judge_training_step(const snapshot::Snapshot& snap, int device, const alloc::AllocConfig& recorded_config,
                            const replay::WhatIfRow* best, const TelemetryInput* telemetry,
                            std::span<const inputs::StepRecord> steps, TracedOomFindings& f) {
  if (!telemetry) f.step_gap = StepProjectionGap::kNoTelemetry;
  const StepProjection& p = f.step;
  if (!p.available) {
    f.rule = TracedOomRule::kNoStepProjection;
    return Verdict::kUndetermined;
  }
  for (const auto& r : steps)
    if (const auto t = record_tokens(r)) f.max_recorded_tokens = std::max(f.max_recorded_tokens, *t);
  f.longest_batch = p.failing_tokens && f.max_recorded_tokens > 0 && *p.failing_tokens > f.max_recorded_tokens;
  // Sizes in the trace are the recorded setting's: one that rounds requests up
  // (roundup_power2_divisions) inflates every live byte, and the best setting may not round.
  std::uint64_t peak = p.projected_peak_bytes;
  std::uint64_t next = p.next_step_peak_bytes;
  if (const double inflation = rounding_inflation(snap, device);
      rounds_up(recorded_config) && best && !rounds_up(best->config.config) && inflation > 1.01) {
    peak = static_cast<std::uint64_t>(static_cast<double>(peak) / inflation);
    next = static_cast<std::uint64_t>(static_cast<double>(next) / inflation);
    f.inflation = inflation;
    f.unrounded_conf = best->config.conf;
  }
  f.needed_bytes = peak;
  f.next_needed_bytes = next;
  const std::uint64_t cap = f.capacity_bytes;
  if (peak > cap) {
    f.rule = TracedOomRule::kStepExceeds;
    return Verdict::kCapacity;
  }
  if (next > cap) {
    f.rule = TracedOomRule::kNextStepExceeds;
    return Verdict::kCapacity;
  }
  if (const std::uint64_t spare = cap - next; spare < kTooClose * static_cast<double>(cap)) {
    f.rule = TracedOomRule::kStepTooClose;
    f.too_close_fraction = kTooClose;
    return Verdict::kUndetermined;
  }
  f.rule = TracedOomRule::kStepFits;
  return Verdict::kFragmentation;
}

/// The fit's error on earlier units as a fraction (at least kProjectionFloor; when no unit could
/// check it, kUncheckedProjection, or kUncheckedFromFirstStep when the reference is the job's first
/// step and unlike the failing one, kFirstStepAlikeShare), and the margins the verdict keeps from
/// the capacity each way (a fit checked on kCheckedUnits or more keeps its own error, at least
/// kCheckedProjectionFloor; an unchecked fit within kUncheckedMaxLogScale of its reference keeps
/// the floor to fit).
void set_margins(TraceStepProjection& p, std::uint64_t cap, bool starts_mid_run) {
  const auto share = [&](std::uint64_t bytes) {
    return static_cast<double>(bytes) / static_cast<double>(std::max<std::uint64_t>(cap, 1));
  };
  p.reference_is_first_step = p.reference_unit == 1 && !starts_mid_run;
  p.first_step_unlike = p.reference_is_first_step && share(p.reference_unmatched_bytes) > kFirstStepAlikeShare;
  const double unchecked = p.first_step_unlike ? kUncheckedFromFirstStep : kUncheckedProjection;
  p.fit_margin = p.fit_error ? std::max(kProjectionFloor, *p.fit_error) : unchecked;
  p.relaid_start_margin = starts_mid_run ? kRelaidStartStep : 0;
  const bool near_its_reference = std::abs(std::log(p.scale)) < kUncheckedMaxLogScale;
  // Checked on kCheckedUnits or more, the residuals keep their sign: a projection never below an earlier unit's
  // real peak bounds the truth from above, whatever it missed above it (field s2g_edge: 4 of 6 units to the byte,
  // 2 over by 1.9% and 6.9% — their peaks came early, freed sooner —, and the rerun's peak was the projection's).
  const bool checked = p.fit_error && p.checked_units >= kCheckedUnits;
  p.margin_to_fit =
      (checked ? std::max(kCheckedProjectionFloor, p.fit_error_below)
               : p.fit_error || !near_its_reference ? p.fit_margin : kUncheckedNearReference) +
      share(p.under_bytes);
  p.margin_to_fail =
      (checked ? std::max(kCheckedProjectionFloor, p.fit_error_above) : p.fit_margin) + share(p.over_bytes);
}

/// A fit's miss of its own history on the side that would decide a verdict: by how much, and which side ("below"
/// the real peaks for fragmentation, "above" them for capacity; "" when not checked on kCheckedUnits units, whose
/// residuals' signs tell little, so that the miss is the larger one either way).
struct HistoryMiss {
  double by = 0;
  std::string side;
};

/// The fit's miss on the side that would decide `verdict`, when by more than kMaxFitError: then the projection
/// decides nothing on that side.
std::optional<HistoryMiss> missed_history(const TraceStepProjection& p, Verdict verdict) {
  if (!p.fit_error) return std::nullopt;
  HistoryMiss miss{*p.fit_error, ""};
  if (p.checked_units >= kCheckedUnits)
    miss = verdict == Verdict::kCapacity ? HistoryMiss{p.fit_error_above, "above"}
                                         : HistoryMiss{p.fit_error_below, "below"};
  if (miss.by <= kMaxFitError) return std::nullopt;
  return miss;
}

/// Undetermined for a fit that missed its history by `miss`.
Verdict fit_rejected(HistoryMiss miss, TracedOomFindings& f) {
  f.rule = TracedOomRule::kProjectionMissesHistory;
  f.max_fit_error = kMaxFitError;
  f.missed_by = miss.by;
  f.missed_side = std::move(miss.side);
  return Verdict::kUndetermined;
}

/// Undetermined for a projection that needs more than the device, from stacks that cannot show its cuDNN workspaces
/// (replay::PreparedTrace::elastic_hidden): ATen would replace those by plans that ask for less.
Verdict workspaces_hidden(TracedOomFindings& f) {
  f.rule = TracedOomRule::kWorkspacesHidden;
  return Verdict::kUndetermined;
}

/// Capacity by `rule` for a projected step, unless its fit missed its history on capacity's side (fit_rejected)
/// or its stacks hide the cuDNN workspaces a refusal would shrink (workspaces_hidden).
Verdict projected_capacity(const ProjectedStep& step, TracedOomRule rule, TracedOomFindings& f) {
  if (auto miss = missed_history(step.figures, Verdict::kCapacity)) return fit_rejected(std::move(*miss), f);
  if (step.trace.elastic_hidden) return workspaces_hidden(f);
  f.rule = rule;
  return Verdict::kCapacity;
}

/// Marks which settings of the what-if table run the projected pass.
void mark_projected_runs(const std::vector<ProjectedRun>& runs, std::vector<WhatIfLine>& whatif) {
  for (WhatIfLine& line : whatif)
    for (const ProjectedRun& run : runs)
      if (run.conf == line.conf) line.runs_projected_step = run.runs;
}

/// How much larger a batch must be than the projected step's to need more than the device (at the
/// sizes asked for), at the capacity and beyond the projection's margins: what would decide a step
/// the margins leave open.
void note_batch_headroom(const ProjectedStep& step, std::uint64_t cap, double inflation, TracedOomFindings& f) {
  const auto limit = [&](double margin) {
    return static_cast<std::uint64_t>(static_cast<double>(cap) * (1 + margin) * inflation);
  };
  f.batch_factor_at_capacity = exceeding_batch_factor(step, limit(0));
  f.batch_factor_beyond_margins = exceeding_batch_factor(step, limit(step.figures.margin_to_fail));
}

/// The failing step projected from the trace alone (trace_projection.h), replayed at the
/// capacity: capacity when even perfect packing exceeds it by more than the projection's
/// margins (set_margins), fragmentation when a setting runs it with its margin, undetermined
/// between.
Verdict judge_projected_step(ProjectedStep& step, const std::vector<replay::WhatIfConfig>& configs,
                             const replay::Capacity& capacity, double inflation, const DoctorOptions& options,
                             const OomCallPath& call_path, Diagnosis& d, TracedOomFindings& f) {
  TraceStepProjection& p = step.figures;
  const std::uint64_t cap = capacity.effective_bytes().value_or(0);
  set_margins(p, cap, step.trace.starts_mid_run);
  replay_projected_step(step, configs, capacity, options.threads);
  mark_projected_runs(p.runs, d.whatif);
  d.phase = phase_name(p.eval_units ? JobPhase::kEval : call_path.optimizer ? JobPhase::kOptimizer : JobPhase::kTrain);
  f.projected_unit = true;
  f.starts_mid_run = step.trace.starts_mid_run;
  f.inflation = inflation;
  const double upper = static_cast<double>(cap) * (1 + p.margin_to_fail);
  const double lower = static_cast<double>(cap) * (1 - p.margin_to_fit);
  const auto peak = static_cast<double>(p.projected_peak_bytes);
  const double next = peak + static_cast<double>(p.next_unit_extra_bytes);
  if (missed_history(p, Verdict::kCapacity) && missed_history(p, Verdict::kFragmentation))
    return fit_rejected({*p.fit_error, ""}, f);
  // A fit checked on the earlier units must also give the sizes the failing step allocated so far.
  if (p.fit_error && p.prefix_misfit_share > kMaxPrefixMisfit) {
    f.rule = TracedOomRule::kPrefixMisfit;
    return Verdict::kUndetermined;
  }
  // One scale carries the reference to the failing unit only when its sizes follow it: with two that vary apart
  // (a translation's source and target lengths), projected from the step before it alone, steps of the
  // translation tutorial (field trn_*) peaked up to 74% above the projection, or 2× below it. Only a fit checked
  // on other units shows how each allocation follows.
  if (!p.fit_error && !p.follows_one_scale) {
    f.rule = TracedOomRule::kUncheckedSeveralScales;
    return Verdict::kUndetermined;
  }
  // Sizes recorded under roundup_power2_divisions are rounded up: what the step needs with
  // perfect packing at the sizes it asked for is less (the snapshot's live blocks tell by how much).
  const double asked = peak / inflation;
  f.needed_bytes = static_cast<std::uint64_t>(asked);
  f.next_needed_bytes = static_cast<std::uint64_t>(next / inflation);
  // A capacity verdict weighs the step without its cuDNN workspaces: refused, ATen runs a plan that asks for less
  // (field mrc2_edge: Mask R-CNN's projected peak held 600 MiB of them; the rerun went on with smaller plans).
  const double least = static_cast<double>(p.inelastic_peak_bytes) / inflation;
  if (least > upper) {
    const Verdict verdict = projected_capacity(step, TracedOomRule::kProjectedStepExceeds, f);
    if (verdict == Verdict::kCapacity) f.needed_bytes = static_cast<std::uint64_t>(least);
    return verdict;
  }
  f.best_run = best_projected_run(d.whatif, p.runs);
  // A run that grows needs one step's growth more at each step after the failing one, whatever the setting: when a
  // setting runs the failing step, the steps the run still has before it frees what it keeps decide. Field leak_*
  // (a loop keeping each step's 500 MiB of logits) failed under expandable segments a step later, or at the same
  // step; vng_edge (validate() without no_grad, 2.56 GiB a batch) failed in the validation's last batch, and under
  // expandable segments the job ran it and ended: the same trace either way.
  if (f.best_run && f.growth.grows()) {
    const double grown = asked + static_cast<double>(f.growth.peak_growth_bytes()) / inflation;
    f.grown_needed_bytes = static_cast<std::uint64_t>(grown);
    f.growing_steps_that_fit = static_cast<std::size_t>(
        std::max(0.0, (lower - asked) / static_cast<double>(f.growth.peak_growth_bytes())));
    f.rule = TracedOomRule::kRunGrows;
    return Verdict::kUndetermined;
  }
  if (f.best_run && next / inflation > lower) {
    f.rule = TracedOomRule::kNextUnitMayNotFit;
    return Verdict::kUndetermined;
  }
  // The longest batch seen keeps the margins the failing step's run kept, the re-laid start's too, and needs the
  // room above perfect packing that the setting took for the failing step: with the fit's margin alone, field
  // batch 61's Fabric job (×1.034 the failing batch, 27.47 GiB of 27.80 with perfect packing, the re-laid start's
  // 2.25% not kept) was called fragmentation; its seeded rerun (batch 62) failed at that run's longest batch under
  // expandable segments, with 458 MiB in holes.
  if (f.best_run) {
    const double kept = p.margin_to_fit + (f.best_run->relaid_start ? p.relaid_start_margin : 0.0);
    f.longest_batch_limit_bytes = static_cast<std::uint64_t>(static_cast<double>(cap) * (1 - kept));
    f.setting_room_bytes = f.best_run->peak_reserved_bytes > p.projected_peak_bytes
                               ? f.best_run->peak_reserved_bytes - p.projected_peak_bytes
                               : 0;
  }
  if (f.best_run && p.longest_unit &&
      static_cast<double>(p.longest_peak_bytes) / inflation + static_cast<double>(f.setting_room_bytes) >
          static_cast<double>(f.longest_batch_limit_bytes)) {
    f.rule = TracedOomRule::kLongerBatchMayNotFit;
    return Verdict::kUndetermined;
  }
  if (f.best_run && p.varying_units > 0 && p.aligned_units < kMinBatchesSeen) {
    f.rule = TracedOomRule::kFewBatchesSeen;
    return Verdict::kUndetermined;
  }
  // Batches that vary, with no unit to check the fit: the rest of the step may follow a dimension the prefix does
  // not show (field trn_edge, step 9 cut a quarter in: the source's encoder alone, one scale; the target's decoder
  // then peaked 74% above the projection).
  if (f.best_run && p.varying_units > 0 && !p.fit_error) {
    f.rule = TracedOomRule::kUncheckedSeveralScales;
    return Verdict::kUndetermined;
  }
  if (f.best_run) {
    if (auto miss = missed_history(p, Verdict::kFragmentation)) return fit_rejected(std::move(*miss), f);
    // Where a warm-up stops is not in the trace: one more step grown as the last one was must fit as the longest
    // batch seen must (mrm_edge, the same warm-up at its last batch, 12, completed under expandable segments: a
    // step that does not fit leaves the verdict open, it does not decide capacity). Tried last, so that the warm-up
    // is all that stands between the step and fragmentation.
    if (p.growing_units >= kMinGrowingUnits && step.peak_at_factor) {
      const double growth = static_cast<double>(step.peak_at_factor(p.last_growth)) -
                            static_cast<double>(step.peak_at_factor(1.0));
      f.grown_batch_needed_bytes = static_cast<std::uint64_t>((peak + std::max(0.0, growth)) / inflation);
      if (static_cast<double>(f.grown_batch_needed_bytes + f.setting_room_bytes) >
          static_cast<double>(f.longest_batch_limit_bytes)) {
        f.rule = TracedOomRule::kBatchesGrow;
        return Verdict::kUndetermined;
      }
    }
    d.recommended_conf = f.best_run->conf;
    f.rule = TracedOomRule::kProjectedStepFits;
    return Verdict::kFragmentation;
  }
  const bool all_fail =
      std::all_of(p.runs.begin(), p.runs.end(), [](const ProjectedRun& r) { return r.fails_with_margin; });
  if (all_fail && !step.trace.starts_mid_run && !p.runs.empty() && inflation <= 1.01)
    return projected_capacity(step, TracedOomRule::kNoSettingRunsProjected, f);
  // Within the margin to fail, a projection that no setting runs at the capacity is capacity still: fragmentation
  // needs the failing step to run under a setting and every later step too, capacity one step that fails. Of the
  // field recordings' projected steps that no setting ran (docs/doctor.md), none belonged to a run that completed
  // under expandable segments at the same memory; of those some setting ran, short of the margin to fit, half did.
  // It takes the central estimate: cuDNN workspaces unable to make the difference, doubts (over_bytes) within the
  // largest error measured of unchecked projections, and a trace from the job's start or a step that perfect packing
  // cannot hold either: cut mid-run, recordings whose reruns completed had no setting run the re-laid start of a step
  // that fit with perfect packing (field fsdp_edge, fcn_edge).
  // No setting runs it, nor at the capacity plus the projection's floor (kProjectionFloor, workspaces refused).
  const bool none_runs = std::none_of(p.runs.begin(), p.runs.end(),
                                      [](const ProjectedRun& r) { return r.runs || r.runs_above_capacity; });
  const bool beyond_packing = least > static_cast<double>(cap);
  const bool workspaces_cannot_fit_it = p.inelastic_peak_bytes == p.projected_peak_bytes || beyond_packing;
  const bool doubts_measured =
      static_cast<double>(p.over_bytes) <= kUncheckedFromFirstStep * static_cast<double>(cap);
  // Unless the step before's gradients, freed where the backward begins, leave it room a setting can run it in:
  // field bt_edge (Barlow Twins, `zero_grad()` between the forward and the backward) projected 19.12 GiB from its
  // first step against 18.70; so freed, 18.50, its rerun's peak under expandable segments, which completed.
  const double held_freed = static_cast<double>(p.projected_peak_bytes -
                                                std::min(p.projected_peak_bytes, p.held_freed_saving_bytes)) /
                            inflation;
  const bool held_cannot_fit_it =
      p.held_freed_saving_bytes == 0 || held_freed > static_cast<double>(cap) * (1 - kHeldFreedRoom);
  if (none_runs && !p.runs.empty() && workspaces_cannot_fit_it && doubts_measured &&
      (!step.trace.starts_mid_run || beyond_packing) && inflation <= 1.01) {
    if (held_cannot_fit_it) return projected_capacity(step, TracedOomRule::kNoSettingRunsAtCapacity, f);
    f.held_freed_needed_bytes = static_cast<std::uint64_t>(held_freed);
  }
  f.any_relaid_start = std::any_of(p.runs.begin(), p.runs.end(), [](const ProjectedRun& r) { return r.relaid_start; });
  f.rule = TracedOomRule::kProjectedStepTooClose;
  return Verdict::kUndetermined;
}

/// An eval batch the trace never ran before, projected from the training's call of the same
/// function (eval_projection.h): capacity when even the lower estimate exceeds the capacity by
/// the projection's floor, fragmentation when a setting runs the upper estimate with that floor
/// to spare, undetermined between.
Verdict judge_projected_eval(ProjectedStep& step, const std::vector<replay::WhatIfConfig>& configs,
                             const replay::Capacity& capacity, double inflation, const DoctorOptions& options,
                             Diagnosis& d, TracedOomFindings& f) {
  TraceStepProjection& p = step.figures;
  const std::uint64_t cap = capacity.effective_bytes().value_or(0);
  p.fit_margin = kEvalFloor;
  p.relaid_start_margin = step.trace.starts_mid_run ? kRelaidStartEval : 0;
  p.margin_to_fit = kEvalFloor;
  p.margin_to_fail = kEvalFloor;
  replay_projected_step(step, configs, capacity, options.threads);
  mark_projected_runs(p.runs, d.whatif);
  f.inflation = inflation;
  const double least = static_cast<double>(p.least_peak_bytes) / inflation;
  f.needed_bytes = static_cast<std::uint64_t>(least);
  if (least > static_cast<double>(cap) * (1 + p.margin_to_fail)) {
    if (step.trace.elastic_hidden) return workspaces_hidden(f);
    f.rule = TracedOomRule::kEvalExceeds;
    return Verdict::kCapacity;
  }
  f.best_run = best_projected_run(d.whatif, p.runs);
  f.most_needed_bytes = static_cast<std::uint64_t>(static_cast<double>(p.most_peak_bytes) / inflation);
  if (f.best_run) {
    d.recommended_conf = f.best_run->conf;
    f.rule = TracedOomRule::kEvalFits;
    return Verdict::kFragmentation;
  }
  f.rule = TracedOomRule::kEvalTooClose;
  return Verdict::kUndetermined;
}

/// The phase, told again from the trace's units where the call path saw less: at most one
/// revision applies (their conditions exclude each other).
void revise_phase(const TraceUnits& units, const OomCallPath& call_path, bool starts_mid_run, OomPhase& phase,
                  Diagnosis& d, TracedOomFindings& f) {
  PhaseClues& c = f.clues;
  if (!units.repeats() && !units.eval && !phase.repeats_step &&
      (d.in_phase(JobPhase::kUnknown) || call_path.backward) && !units.program_frame.empty()) {
    f.found_reason = PhaseReason::kFirstStep;
    c.program_frame = units.program_frame;
    c.starts_mid_run = starts_mid_run;
    c.backward = call_path.backward;
    c.later_statement = units.later_statement;
    c.later_than = units.later_than;
  }
  if (units.eval && !units.repeats() && !d.in_phase(JobPhase::kEval)) {
    // The statement that repeated (a trainer's train(), holding its steps and its evals) is not
    // the pass that failed: the evaluation inside it ran for the first time in the trace.
    d.phase = phase_name(JobPhase::kEval);
    f.found_reason = PhaseReason::kFirstEval;
    c.eval_below_repeating = phase.repeats_step;
    phase.repeats_step = false;
  }
  if (units.repeats() && !units.eval && phase.repeats_step && d.in_phase(JobPhase::kTrain) &&
      units.statement != call_path.statement) {
    // The unit names the program's own statement where the call path's outermost divergence
    // may not: a C++ frame that repeats per op (the failing malloc on autograd's thread has no
    // Python frames), or a launcher's frame (runpy, for `python -m`).
    f.found_reason = PhaseReason::kStepRepeats;
    c.anchor_is_oom = units.anchor_is_oom;
  }
  if (units.repeats() && !phase.repeats_step && (d.in_phase(JobPhase::kUnknown) || units.eval)) {
    // The program's own loop repeats where the statement-level view saw none (a trainer's
    // loop below one top-level call): the failing unit ran before.
    d.phase = phase_name(units.eval ? JobPhase::kEval : call_path.optimizer ? JobPhase::kOptimizer : JobPhase::kTrain);
    f.found_reason = PhaseReason::kUnitRepeats;
    c.eval_units = units.eval;
  }
  f.found_phase = d.phase;
}

/// The verdict, with what decided it in `f`; d gets the data (capacity, what-if, phase, setting).
Verdict decide_traced_oom(const TraceChoice& trace, const TelemetryInput* telemetry, const RecordedCurve& curve,
                          const DoctorOptions& options, Diagnosis& d, TracedOomFindings& f) {
  const snapshot::Snapshot& snap = trace.replay->snapshot;
  const std::size_t oom_index = *trace.oom_index;
  const replay::PreparedTrace prepared =
      replay::prepare_trace(snap, trace.device, trace.replay->path, trace.replay->run_end());
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
  f.oom_index = oom_index;
  f.request_bytes = d.oom_context->request_bytes;
  f.capacity_bytes = d.capacity_bytes.value_or(0);
  f.capacity_source = capacity.source;
  f.live_at_oom_bytes = curve.allocated[oom_index];
  // Where the ideal packer stopped at the OOM point (serving it, or failing there), all it holds beyond the live
  // blocks is private pools' idle memory.
  if (ideal.passed_recorded_oom || (ideal.oom && ideal.oom_matches_recorded))
    f.private_pool_idle_bytes = ideal.stats.reserved_bytes - ideal.stats.allocated_bytes;
  f.sweep_settings = report.rows.size();

  const replay::WhatIfRow* best = nullptr;
  for (const replay::WhatIfRow& row : report.rows) {
    if (row.config.recorded) f.recorded = SweepSetting{row.config.conf, row.passes_oom_point(), 0};
    if (!best && row.passes_oom_point()) best = &row;
  }
  if (best)
    f.best = SweepSetting{
        best->config.conf, true,
        best->at_capacity ? best->at_capacity->stats.peak_reserved_bytes : best->unlimited.stats.peak_reserved_bytes};
  if (d.recommended_conf.empty() && best) d.recommended_conf = best->config.conf;

  const std::span<const inputs::StepRecord> steps =
      telemetry ? std::span<const inputs::StepRecord>(telemetry->records) : std::span<const inputs::StepRecord>();
  std::vector<double> step_ms;
  for (const auto& r : steps) step_ms.push_back(r.step_time_or_sum_ms());
  const OomCallPath call_path = analyze_oom_call_path(snap, trace.device, oom_index, quantile(step_ms, 0.5));
  OomPhase phase = decide_oom_phase(&snap, trace.device, oom_index, &call_path, steps);
  d.phase = phase.phase;
  f.clues.source = phase.source;
  if (const auto done = optimizer_steps_before(snap, trace.device, oom_index); done && !steps.empty()) {
    const auto recorded =
        std::count_if(steps.begin(), steps.end(), [](const auto& r) { return r.optimizer_step.value_or(true); });
    if (*done > static_cast<std::size_t>(recorded)) {
      f.optimizer_steps_done = *done;
      f.optimizer_steps_recorded = static_cast<std::size_t>(recorded);
    }
  }
  const TraceUnits units = find_trace_units(snap, trace.device, oom_index);
  const auto live = live_blocks_before(snap.trace(trace.device), oom_index);
  f.growth = d.run_growth = find_run_growth(snap, trace.device, live, units);
  d.cache_empties = find_cache_empties(snap, trace.device, oom_index);
  d.memory_advice = memory_advice(snap, trace.device, oom_index, live, units, f.growth, f.capacity_bytes);
  f.clues.eval_statement = units.eval_statement;
  f.clues.call_statement = call_path.statement;
  f.clues.unit_statement = units.statement;
  f.clues.earlier_units = units.starts.empty() ? 0 : units.starts.size() - 1;
  revise_phase(units, call_path, prepared.starts_mid_run, phase, d, f);
  if (call_path.has_stack) {
    f.call_site = call_path.innermost;
    f.call_site_statement = units.repeats() ? units.statement : call_path.statement;
  }

  // The projection also tells the phase apart (a failing pass unlike the recorded steps), which
  // the report names even when the ideal packer alone decides.
  f.step = telemetry && phase.repeats_step ? project_failing_step(snap, trace.device, curve, oom_index, f.request_bytes,
                                                                  telemetry->records, call_path.episode_starts)
                                           : StepProjection{};
  if (phase.repeats_step && f.step.different_pass) {
    const bool forward = (call_path.model_forward || call_path.episode_forward) && !call_path.optimizer;
    d.phase = phase_name(forward ? JobPhase::kEval : JobPhase::kUnknown);
    f.other_pass = true;
  }
  f.phase = d.phase;

  if (ideal.oom && ideal.oom_matches_recorded) {
    f.step = StepProjection{};
    f.step_gap = StepProjectionGap::kNotNeeded;
    f.rule = TracedOomRule::kIdealPackerFails;
    return Verdict::kCapacity;
  }

  const double inflation = rounds_up(prepared.recorded_config) ? rounding_inflation(snap, trace.device) : 1.0;
  // The experiment that labels an OOM, replayed: the same job from its start under expandable
  // segments at the same memory. When that cannot serve the failing malloc either, the rerun
  // fails where the run did, whatever the rest of the pass needs. Sizes rounded up by the
  // recorded setting would overstate what it asks for, and a trace that starts mid-run keeps
  // the pieces the run had before it.
  if (const replay::WhatIfRow* expandable = expandable_row(report);
      expandable && !expandable->passes_oom_point() && !prepared.starts_mid_run && inflation <= 1.01 &&
      expandable_fails_without_workspaces(prepared, *expandable, capacity)) {
    f.expandable_reserved_bytes = expandable->at_capacity->stats.peak_reserved_bytes;
    f.step = StepProjection{};
    f.step_gap = StepProjectionGap::kNotNeeded;
    f.rule = TracedOomRule::kExpandableFailsAtOom;
    d.expandable_fails_at_oom = true;
    return Verdict::kCapacity;
  }

  // Without telemetry that projects the step, the trace's own repeating units may.
  const bool telemetry_projects = telemetry && phase.repeats_step && !f.step.different_pass && f.step.available;
  std::vector<replay::WhatIfConfig> configs;
  for (const replay::WhatIfRow& row : report.rows) configs.push_back(row.config);
  // The failing step projected from the trace's units and judged into dd and ff (with the batch
  // headroom when undetermined and asked for); nullopt (ff.trace saying why) when it cannot be projected.
  const auto judge_trace_projection = [&](Diagnosis& dd, TracedOomFindings& ff,
                                          bool headroom) -> std::optional<Verdict> {
    ProjectedStep step = project_step_from_trace(prepared, snap, trace.device, curve, oom_index, units);
    if (!step.figures.available) {
      ff.trace = std::move(step.figures);
      return std::nullopt;
    }
    const Verdict verdict = judge_projected_step(step, configs, capacity, inflation, options, call_path, dd, ff);
    if (verdict == Verdict::kUndetermined && headroom)
      note_batch_headroom(step, capacity.effective_bytes().value_or(0), inflation, ff);
    ff.phase = dd.phase;
    ff.trace = std::move(step.figures);
    return verdict;
  };
  if (!telemetry_projects) {
    if (units.repeats()) {
      if (const std::optional<Verdict> verdict = judge_trace_projection(d, f, true)) return *verdict;
    } else {
      f.trace_has_no_repeating_unit = true;
    }
  }
  // A step the trace cannot project may run a graph torch.compile generated for it.
  if (!f.trace.available && units.repeats() && !units.eval)
    f.compiled_anew = compiled_anew(snap, trace.device, oom_index, units.starts.back());
  // A first eval pass runs the training's code at another size: projected from the training call.
  const bool eval_batch_known = (units.eval && units.eval_batch_start) || !call_path.episode_starts.empty();
  if ((!phase.repeats_step || f.step.different_pass) && d.phase == "eval" && !units.repeats() && eval_batch_known) {
    const std::size_t eval_start = units.eval && units.eval_batch_start ? *units.eval_batch_start
                                                                        : call_path.episode_starts.back();
    const std::string statement =
        units.eval && !units.eval_statement.empty() ? units.eval_statement : call_path.statement;
    ProjectedStep step =
        project_eval_from_training(prepared, snap, trace.device, curve, oom_index, eval_start, statement);
    f.trace_has_no_repeating_unit = false;
    if (step.figures.available) {
      const Verdict verdict = judge_projected_eval(step, configs, capacity, inflation, options, d, f);
      f.trace = std::move(step.figures);
      return verdict;
    }
    f.trace = std::move(step.figures);
  }
  if (!phase.repeats_step || f.step.different_pass) {
    f.pass_statement = units.eval && !units.eval_statement.empty() ? units.eval_statement : call_path.statement;
    f.starts_mid_run = prepared.starts_mid_run;
    const Verdict verdict =
        judge_unrecorded_pass(snap, trace.device, curve, oom_index, steps, d.in_phase(JobPhase::kOptimizer), f);
    f.mid_run_first_pass = verdict == Verdict::kUndetermined && f.found_reason == PhaseReason::kFirstStep &&
                           prepared.starts_mid_run;
    return verdict;
  }
  const Verdict verdict = judge_training_step(snap, trace.device, prepared.recorded_config, best, telemetry, steps, f);
  // The telemetry's projection too close to the capacity to decide: the trace's own, which keeps
  // narrower margins when its fit is checked, may.
  if (verdict == Verdict::kUndetermined && f.rule == TracedOomRule::kStepTooClose && units.repeats()) {
    Diagnosis by_trace = d;
    TracedOomFindings trace_findings = f;
    if (const std::optional<Verdict> decided = judge_trace_projection(by_trace, trace_findings, false);
        decided && *decided != Verdict::kUndetermined) {
      const std::uint64_t telemetry_needed = f.next_needed_bytes;
      d = std::move(by_trace);
      f = std::move(trace_findings);
      f.telemetry_too_close_bytes = telemetry_needed;
      return *decided;
    }
  }
  if (verdict == Verdict::kFragmentation && !best) d.setting_fixes_it = false;
  f.mid_run_without_projection = verdict == Verdict::kUndetermined && prepared.starts_mid_run && !f.trace.available;
  // Two whole steps before the failing one (one to project from, one to check the fit on) and
  // the failing one's start.
  if (f.mid_run_without_projection && f.trace.cut_unit_events)
    f.max_entries_for_two_steps = history_entries_for(*f.trace.cut_unit_events);
  return verdict;
}

}  // namespace

Verdict judge_traced_oom(const TraceChoice& trace, const TelemetryInput* telemetry, const RecordedCurve& curve,
                         const DoctorOptions& options, Diagnosis& d) {
  if (!options.word_traced_oom)
    throw std::logic_error("doctor: DoctorOptions::word_traced_oom is not set (report::traced_oom_words)");
  TracedOomFindings f;
  const Verdict verdict = decide_traced_oom(trace, telemetry, curve, options, d, f);
  // Only the words of a mid-run trace that decided nothing read how its history began (a pass over the trace).
  if (f.clues.starts_mid_run || f.mid_run_first_pass || f.mid_run_without_projection)
    f.history_start = snapshot::history_start(trace.replay->snapshot, trace.device);
  TracedOomWords words = options.word_traced_oom(f);
  if (words.step_unavailable_reason) f.step.unavailable_reason = std::move(*words.step_unavailable_reason);
  if (words.trace_unavailable_reason) f.trace.unavailable_reason = std::move(*words.trace_unavailable_reason);
  d.projection = std::move(f.step);
  d.trace_projection = std::move(f.trace);
  d.phase_source = std::move(words.phase_source);
  d.trigger = std::move(words.trigger);
  for (Evidence& e : words.evidence) d.evidence.push_back(std::move(e));
  d.decide_with = std::move(words.decide_with);
  return verdict;
}

}  // namespace fragscope::diagnose
