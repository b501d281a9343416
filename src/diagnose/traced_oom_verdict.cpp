#include "diagnose/traced_oom_verdict.h"

#include <algorithm>
#include <span>
#include <string>

#include <fmt/format.h>

#include "diagnose/list_op_projection.h"
#include "diagnose/oom_call_path.h"
#include "diagnose/oom_phase.h"
#include "diagnose/step_projection.h"
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
                              std::size_t oom_index, std::uint64_t cap, const OomCallPath& call_path,
                              std::span<const inputs::StepRecord> steps, Diagnosis& d) {
  if (d.phase == "optimizer") {
    const ListOpProjection op = project_failing_list_op(snap, device, curve, oom_index);
    if (op.available) {
      d.add_evidence("list_op", fmt::format("the failing malloc ({}) is result {} of {} of a list op, one tensor per parameter in the order "
                                            "{} allocated them: the {} left need {}, so the op needs at least {} live",
                                            op.site, op.done + 1, op.total, op.list_site, op.total - op.done,
                                            format_bytes(op.remaining_bytes), format_bytes(op.projected_peak_bytes)));
      if (op.projected_peak_bytes > cap) {
        d.add_evidence("projection_vs_capacity", fmt::format("the optimizer step needs at least {} of live memory even with perfect packing; "
                                                             "the device gives {} — short by {}", format_bytes(op.projected_peak_bytes),
                                                             format_bytes(cap), format_bytes(op.projected_peak_bytes - cap)));
        d.trigger = "an optimizer step: its state and its foreach temporaries";
        return Verdict::kCapacity;
      }
    }
  }
  const std::int64_t after = steps.empty() ? -1 : steps.back().step;
  d.trigger = d.phase == "optimizer" ? "an optimizer step allocating its state"
              : d.phase == "checkpoint" ? "a checkpoint save"
              : d.phase == "eval" ? fmt::format("an eval pass ({}){}", call_path.statement,
                                                after >= 0 ? fmt::format(" after the last recorded step ({})", after) : "")
                                  : fmt::format("a pass the recorded steps never ran ({})", call_path.statement);
  d.projection.available = false;
  d.projection.unavailable_reason = fmt::format("the {} phase's peak is not in the trace: the recorded training steps "
                                                "say nothing about it", d.phase);
  d.add_evidence("undecidable", fmt::format("the OOM is in {}; the trace ends at its failing malloc, so its peak is unknown. "
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
  if (!telemetry) d.projection.unavailable_reason = "no step telemetry: the failing step's tokens and static memory are unknown";
  const StepProjection& p = d.projection;
  if (!p.available) {
    d.add_evidence("projection", "no projection of the failing step's peak: " + p.unavailable_reason);
    d.trigger = "a training step";
    d.decide_with = {"step telemetry (steps.jsonl from the fragscope hook) of the failing rank, so the failing step's peak "
                     "can be projected from the recorded steps",
                     "one rerun with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True at the same memory"};
    return Verdict::kUndetermined;
  }
  std::int64_t max_tokens = 0;
  for (const auto& r : steps)
    if (const auto t = record_tokens(r)) max_tokens = std::max(max_tokens, *t);
  if (p.failing_tokens && max_tokens > 0 && *p.failing_tokens > max_tokens)
    d.trigger = fmt::format("the longest batch of the run so far: step {} has {} tokens, {:.2f}× the largest recorded step ({} tokens)",
                            p.failing_step.value_or(0), *p.failing_tokens,
                            static_cast<double>(*p.failing_tokens) / static_cast<double>(max_tokens), max_tokens);
  else
    d.trigger = fmt::format("training step {}", p.failing_step.value_or(0));
  d.add_evidence("projection",
              fmt::format("projected peak of step {}: {} = {} static + {} activations of reference step {} scaled ×{:.3f}{} + {} that do not scale",
                          p.failing_step.value_or(0), format_bytes(p.projected_peak_bytes), format_bytes(p.static_bytes),
                          format_bytes(p.reference_transient_bytes - p.reference_constant_bytes), p.reference_step.value_or(0),
                          p.token_ratio,
                          p.failing_tokens && p.reference_tokens ? fmt::format(" ({} → {} tokens)", *p.reference_tokens, *p.failing_tokens) : "",
                          format_bytes(p.reference_constant_bytes)));
  // Sizes in the trace are the recorded setting's: one that rounds requests up
  // (roundup_power2_divisions) inflates every live byte, and the best setting may not round.
  std::uint64_t peak = p.projected_peak_bytes;
  std::uint64_t next = p.next_step_peak_bytes;
  if (const double inflation = rounding_inflation(snap, device);
      rounds_up(recorded_config) && best && !rounds_up(best->config.config) && inflation > 1.01) {
    peak = static_cast<std::uint64_t>(static_cast<double>(peak) / inflation);
    next = static_cast<std::uint64_t>(static_cast<double>(next) / inflation);
    d.add_evidence("rounding", fmt::format("the recorded setting rounds requests up (roundup_power2_divisions): the snapshot's live blocks "
                                           "hold ×{:.3f} the bytes they asked for; {} does not round, and at requested sizes the step "
                                           "projects to about {}", inflation, best->config.conf, format_bytes(next)));
  }
  if (peak > cap) {
    d.add_evidence("projection_vs_capacity", fmt::format("the step needs about {} of live memory even with perfect packing; the device gives {} — "
                                                         "short by {}", format_bytes(peak), format_bytes(cap), format_bytes(peak - cap)));
    return Verdict::kCapacity;
  }
  d.add_evidence("projection_vs_capacity", fmt::format("the step's projected peak {} fits in {} ({} to spare with perfect packing)",
                                                       format_bytes(peak), format_bytes(cap), format_bytes(cap - peak)));
  if (next > cap) {
    d.add_evidence("next_step", fmt::format("but step {} runs without {} that the steps before it kept from one step to the next "
                                            "(gradients dropped after the optimizer step); the next steps hold them again, and a batch "
                                            "like step {}'s then needs about {}: short by {} even with perfect packing",
                                            p.failing_step.value_or(0), format_bytes(p.returning_bytes), p.failing_step.value_or(0),
                                            format_bytes(next), format_bytes(next - cap)));
    return Verdict::kCapacity;
  }
  if (const std::uint64_t spare = cap - next; spare < kTooClose * static_cast<double>(cap)) {
    d.add_evidence("too_close", fmt::format("the step would leave {} ({:.1f}% of {}) with perfect packing: closer than the projection's "
                                            "accuracy ({:.0f}%: on held-out recordings it came within 1% of the real peaks), and every "
                                            "allocator needs some room above the live bytes, so whether a setting runs the step cannot be "
                                            "told from the trace", format_bytes(spare), 100.0 * static_cast<double>(spare) / static_cast<double>(cap),
                                            format_bytes(cap), 100.0 * kTooClose));
    d.trigger = fmt::format("training step {}, within {:.0f}% of the capacity", p.failing_step.value_or(0), 100.0 * kTooClose);
    d.decide_with = {fmt::format("one rerun with PYTORCH_CUDA_ALLOC_CONF={} at the same memory: if it fails in the same step, "
                                 "the verdict is capacity", d.recommended_conf.empty() ? "expandable_segments:True" : d.recommended_conf),
                     "or make room instead of deciding: activation checkpointing, or a smaller micro-batch with more accumulation"};
    return Verdict::kUndetermined;
  }
  if (!best) {
    d.setting_fixes_it = false;
    d.add_evidence("stranded", "the ideal packer fits the step but no setting of the sweep does: the trace starts with the memory "
                               "already in pieces (live blocks pinning split segments), and a setting changed from that state "
                               "inherits them");
  }
  return Verdict::kFragmentation;
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
  const replay::WhatIfReport report = replay::sweep_at_capacity(prepared, capacity, whatif_options);
  fill_whatif(report, d);

  replay::ReplayOptions ideal_options = replay::replay_options_for(capacity);
  ideal_options.timeline_points = 0;
  const replay::ReplayResult ideal = replay::run_replay(prepared, replay::ModelKind::kIdeal, prepared.recorded_config, ideal_options);
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
    d.add_evidence("replay_recorded", fmt::format("replaying the trace under the recorded config ({}) at {} {} at the recorded OOM (event {})",
                                                  recorded->config.conf.empty() ? "defaults" : recorded->config.conf, format_bytes(cap),
                                                  recorded->passes_oom_point() ? "does NOT fail" : "fails as the real run did", oom_index));

  const std::span<const inputs::StepRecord> steps =
      telemetry ? std::span<const inputs::StepRecord>(telemetry->records) : std::span<const inputs::StepRecord>();
  std::vector<double> step_ms;
  for (const auto& r : steps) step_ms.push_back(r.step_time_or_sum_ms());
  const OomCallPath call_path = analyze_oom_call_path(snap, trace.device, oom_index, quantile(step_ms, 0.5));
  const OomPhase phase = decide_oom_phase(&snap, trace.device, oom_index, &call_path, steps);
  d.phase = phase.phase;
  d.phase_source = phase.source;
  d.add_evidence("phase", fmt::format("phase {}: {}", phase.phase, phase.source));
  if (const auto done = optimizer_steps_before(snap, trace.device, oom_index); done && !steps.empty()) {
    const auto recorded = std::count_if(steps.begin(), steps.end(), [](const auto& r) { return r.optimizer_step.value_or(true); });
    if (*done > static_cast<std::size_t>(recorded))
      d.add_evidence("optimizer_steps", fmt::format("the trace holds {} completed optimizer steps, the telemetry records {}: the step after "
                                                    "the last record finished its training work before the OOM", *done, recorded));
  }
  if (call_path.has_stack) d.add_evidence("call_site", fmt::format("the failing malloc was called from {} (statement {})", call_path.innermost, call_path.statement));

  // The projection also tells the phase apart (a failing pass unlike the recorded steps), which
  // the report names even when the ideal packer alone decides.
  d.projection = telemetry && phase.repeats_step
                     ? project_failing_step(snap, trace.device, curve, oom_index, request, telemetry->records, call_path.episode_starts)
                     : StepProjection{};
  if (phase.repeats_step && d.projection.different_pass) {
    d.phase = (call_path.model_forward || call_path.episode_forward) && !call_path.optimizer ? "eval" : "unknown";
    d.phase_source = "the failing pass shares no call stack with the recorded training steps";
    d.add_evidence("phase", fmt::format("phase {}: {}", d.phase, d.phase_source));
  }

  if (ideal.oom && ideal.oom_matches_recorded) {
    d.add_evidence("ideal_packer", fmt::format("even the ideal packer (live bytes packed with no gaps) cannot serve the {} request at event {}: "
                                               "live bytes + request exceed {}", format_bytes(request), oom_index, format_bytes(cap)));
    d.projection = StepProjection{};
    d.projection.unavailable_reason = "not needed: the failing malloc alone does not fit";
    return Verdict::kCapacity;
  }
  d.add_evidence("ideal_packer", fmt::format("the ideal packer serves the failing {} request at {}: {} live + the request = {}",
                                             format_bytes(request), format_bytes(cap), format_bytes(curve.allocated[oom_index]),
                                             format_bytes(curve.allocated[oom_index] + request)));
  if (best)
    d.add_evidence("replay_best", fmt::format("PYTORCH_CUDA_ALLOC_CONF={} passes the recorded OOM point at the same {} (peak reserved {} without a limit)",
                                              best->config.conf.empty() ? "\"\"" : best->config.conf, format_bytes(cap),
                                              format_bytes(best->unlimited.stats.peak_reserved_bytes)));
  else
    d.add_evidence("replay_best", fmt::format("no allocator config of the sweep ({} configs) passes the recorded OOM point at {}", report.rows.size(), format_bytes(cap)));

  if (!phase.repeats_step || d.projection.different_pass)
    return judge_unrecorded_pass(snap, trace.device, curve, oom_index, cap, call_path, steps, d);
  return judge_training_step(snap, trace.device, prepared.recorded_config, best, cap, telemetry, steps, d);
}

}  // namespace fragscope::diagnose
