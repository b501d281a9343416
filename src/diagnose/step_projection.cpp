#include "diagnose/step_projection.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <vector>

#include "diagnose/optimizer_code.h"
#include "diagnose/trace_size.h"
#include "util/bytes.h"

namespace fragscope::diagnose {
namespace {

using snapshot::TraceAction;

std::uint64_t tolerance(std::uint64_t level) { return std::max<std::uint64_t>(16 * kMiB, level / 500); }

bool holds_size(const std::vector<std::uint64_t>& sizes, std::uint64_t size) {
  return std::any_of(sizes.begin(), sizes.end(), [&](std::uint64_t s) { return same_trace_size(s, size); });
}

using SizesByStack = std::unordered_map<snapshot::StackId, std::vector<std::uint64_t>>;

SizesByStack alloc_sizes(std::span<const snapshot::TraceEvent> trace, std::size_t first, std::size_t last) {
  SizesByStack sizes;
  for (std::size_t i = first; i <= last && i < trace.size(); ++i)
    if (trace[i].action == TraceAction::kAlloc && trace[i].stack != 0)
      sizes[trace[i].stack].push_back(trace[i].size);
  return sizes;
}

/// Size-weighted median of the failing/reference size ratio over stacks both windows used.
double size_ratio(const SizesByStack& failing, const SizesByStack& reference) {
  std::vector<std::pair<double, double>> ratios;  // (ratio, weight)
  for (const auto& [stack, sizes] : failing) {
    const auto ref = reference.find(stack);
    if (ref == reference.end()) continue;
    const std::uint64_t fail_max = *std::max_element(sizes.begin(), sizes.end());
    const std::uint64_t ref_max = *std::max_element(ref->second.begin(), ref->second.end());
    if (same_trace_size(fail_max, ref_max) || ref_max == 0) continue;
    ratios.emplace_back(static_cast<double>(fail_max) / static_cast<double>(ref_max),
                        static_cast<double>(fail_max));
  }
  if (ratios.empty()) return 1.0;
  std::sort(ratios.begin(), ratios.end());
  double total = 0;
  for (const auto& r : ratios) total += r.second;
  double seen = 0;
  for (const auto& [ratio, weight] : ratios) {
    seen += weight;
    if (seen >= total / 2) return ratio;
  }
  return ratios.back().first;
}

struct LiveBlock {
  std::uint64_t size = 0;
  snapshot::StackId stack = 0;
  std::size_t since = 0;  ///< the event that allocated it
};

/// A step window in the trace: its highest point, where it began and ended, and its telemetry
/// record when one can be told.
struct ReferenceWindow {
  std::size_t peak = 0;
  std::size_t start = 0;
  std::size_t end = 0;
  std::optional<std::size_t> record;
};

/// Steps tried as the reference, highest first, before deciding the failing pass is another one.
constexpr std::size_t kMaxReferenceCandidates = 8;

/// Tells allocations made by torch/optim code, one look per call stack.
class OptimizerStacks {
 public:
  explicit OptimizerStacks(const snapshot::Snapshot& snapshot) : snapshot_(snapshot) {}
  bool contains(snapshot::StackId stack) {
    const auto [it, added] = known_.try_emplace(stack, false);
    if (added) it->second = made_by_optimizer(snapshot_, stack);
    return it->second;
  }

 private:
  const snapshot::Snapshot& snapshot_;
  std::unordered_map<snapshot::StackId, bool> known_;
};

/// The highest allocation of each step before the failing one, oldest first: the highest one
/// not made by torch/optim code (with one micro-step per optimizer step, AdamW's foreach
/// temporaries top every step). Steps begin at `step_starts` (where the failing statement's
/// episodes began, the failing one last). Without two of them, steps are the stretches of
/// the trace between returns to the failing step's starting level (`static_bytes`) that rose
/// more than a sixteenth of it higher; a stretch that only the optimizer took above that level
/// (making its state) is no step.
std::vector<std::size_t> step_peaks(const snapshot::Snapshot& snapshot, std::span<const snapshot::TraceEvent> trace,
                                    const RecordedCurve& curve, std::size_t failing_start, std::uint64_t static_bytes,
                                    std::span<const std::size_t> step_starts) {
  OptimizerStacks optimizer(snapshot);
  constexpr std::size_t kNone = ~std::size_t{0};
  const auto higher = [&](std::size_t i, std::size_t peak) {
    return trace[i].action == TraceAction::kAlloc && (peak == kNone || curve.allocated[i] > curve.allocated[peak]) &&
           !optimizer.contains(trace[i].stack);
  };
  std::vector<std::size_t> peaks;
  if (step_starts.size() >= 2) {
    for (std::size_t k = 0; k + 1 < step_starts.size(); ++k) {
      std::size_t peak = kNone;
      for (std::size_t i = step_starts[k]; i < step_starts[k + 1] && i <= failing_start && i < trace.size(); ++i)
        if (higher(i, peak)) peak = i;
      peaks.push_back(peak != kNone ? peak : step_starts[k]);  // one per step: they map to records
    }
    return peaks;
  }
  // A stretch is a step when it rose well above the level: the backward pass hovers around it,
  // and its small excursions (tens of MiB) are not steps.
  const std::uint64_t level = static_bytes + tolerance(static_bytes);
  const std::uint64_t step_height = level + static_bytes / 16;
  std::size_t peak = kNone;  // of the stretch under way
  for (std::size_t i = 0; i <= failing_start && i < trace.size(); ++i) {
    if (curve.allocated[i] > level && higher(i, peak)) peak = i;
    if (curve.allocated[i] <= level && peak != kNone) {
      if (curve.allocated[peak] > step_height) peaks.push_back(peak);
      peak = kNone;
    }
  }
  return peaks;
}

/// The step around `peak`, telemetry record `record` (when known): it starts where allocated was
/// back at the previous record's level and ends where it is back at its own record's (without
/// a record: the trace's start, and `static_bytes`).
ReferenceWindow reference_window(const RecordedCurve& curve, std::size_t peak, std::size_t failing_start,
                                 std::span<const inputs::StepRecord> steps, std::uint64_t static_bytes,
                                 std::optional<std::size_t> record) {
  ReferenceWindow w;
  w.peak = peak;
  w.record = record;
  std::uint64_t end_level = static_bytes;
  std::optional<std::uint64_t> start_level;
  if (w.record) {
    end_level = static_cast<std::uint64_t>(steps[*w.record].memory_stat("allocated_bytes.all.current").value_or(
        static_cast<std::int64_t>(static_bytes)));
    if (*w.record > 0) {
      if (const auto before = steps[*w.record - 1].memory_stat("allocated_bytes.all.current")) {
        start_level = static_cast<std::uint64_t>(*before);
        w.start = find_step_start(curve, peak, *start_level).value_or(0);
      }
    }
  }
  // The step's own work ends where allocated is back at the lower of its start and end levels:
  // a step that ran the optimizer ends higher (its state), reached halfway down the backward
  // pass; a step that made the gradients ends higher than it began and never gets back down.
  const auto back_at = [&](std::uint64_t level) -> std::optional<std::size_t> {
    for (std::size_t i = peak + 1; i < failing_start; ++i)
      if (curve.allocated[i] <= level + tolerance(level)) return i;
    return std::nullopt;
  };
  const std::uint64_t low = start_level ? std::min(*start_level, end_level) : end_level;
  w.end = back_at(low).value_or(back_at(end_level).value_or(failing_start));
  return w;
}

/// Blocks live when the reference step began (kept across steps: parameters, gradients,
/// optimizer state) and freed after it ended, less those made again at the same call stack and
/// size and still live when the failing step began. What remains is what the failing step runs
/// without: gradients that zero_grad(set_to_none=True) dropped after the optimizer step, which
/// the next backward pass makes again and keeps.
std::uint64_t returning_bytes(std::span<const snapshot::TraceEvent> trace, std::size_t reference_start,
                              std::size_t reference_end, std::size_t failing_start) {
  struct Held {
    std::uint64_t size;
    snapshot::StackId stack;
    std::size_t since;
  };
  std::unordered_map<std::uint64_t, Held> live;
  std::vector<Held> dropped;
  for (std::size_t i = 0; i < failing_start && i < trace.size(); ++i) {
    const snapshot::TraceEvent& e = trace[i];
    if (e.action == TraceAction::kAlloc) {
      live[e.addr] = {e.size, e.stack, i};
    } else if (e.action == TraceAction::kFreeCompleted) {
      const auto it = live.find(e.addr);
      if (it == live.end()) continue;
      if (i > reference_end && it->second.since < reference_start) dropped.push_back(it->second);
      live.erase(it);
    }
  }
  std::unordered_map<snapshot::StackId, std::vector<std::uint64_t>> made_again;
  for (const auto& [addr, held] : live)
    if (held.since > reference_end) made_again[held.stack].push_back(held.size);
  std::uint64_t missing = 0;
  for (const Held& d : dropped) {
    auto it = made_again.find(d.stack);
    if (it != made_again.end()) {
      auto& sizes = it->second;
      if (const auto same = std::find(sizes.begin(), sizes.end(), d.size); same != sizes.end()) {
        sizes.erase(same);
        continue;
      }
    }
    missing += d.size;
  }
  return missing;
}

}  // namespace

std::optional<std::int64_t> record_tokens(const inputs::StepRecord& record) {
  if (record.tokens) return record.tokens;
  if (record.seq_len && record.mbs) return *record.seq_len * *record.mbs;
  return record.seq_len;
}

std::optional<std::size_t> find_step_start(const RecordedCurve& curve, std::size_t oom_index,
                                           std::uint64_t static_bytes) {
  const std::uint64_t limit = static_bytes + tolerance(static_bytes);
  for (std::size_t i = std::min(oom_index, curve.allocated.size()); i-- > 0;)
    if (curve.allocated[i] <= limit) return i;
  return std::nullopt;
}

StepProjection project_failing_step(const snapshot::Snapshot& snapshot, int device,
                                    const RecordedCurve& curve, std::size_t oom_index,
                                    std::uint64_t request_bytes,
                                    std::span<const inputs::StepRecord> steps,
                                    std::span<const std::size_t> step_starts) {
  StepProjection p;
  const auto trace = snapshot.trace(device);
  if (oom_index >= trace.size() || curve.allocated.size() != trace.size()) {
    p.unavailable_reason = "the snapshot's trace does not hold the OOM";
    return p;
  }
  p.live_at_oom_bytes = curve.allocated[oom_index] + request_bytes;

  // Records before the failure; a record that counts the OOM is the failing step itself.
  std::size_t recorded = steps.size();
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].memory_stat("num_ooms").value_or(0) > 0) {
      recorded = i;
      p.failing_step = steps[i].step;
      p.failing_tokens = record_tokens(steps[i]);
      break;
    }
  }
  if (recorded == 0) {
    p.unavailable_reason = "no telemetry record of a step before the failing one";
    return p;
  }
  const inputs::StepRecord& last = steps[recorded - 1];
  const auto static_bytes = last.memory_stat("allocated_bytes.all.current");
  if (!static_bytes) {
    p.unavailable_reason = "the telemetry has no allocated_bytes.all.current";
    return p;
  }
  p.static_bytes = static_cast<std::uint64_t>(*static_bytes);
  if (!p.failing_step) p.failing_step = last.step + 1;

  const auto failing_start = find_step_start(curve, oom_index, p.static_bytes);
  if (!failing_start) {
    p.unavailable_reason = "the trace never shows the failing step's start (allocated back at " +
                           format_bytes(p.static_bytes) + ")";
    return p;
  }

  SizesByStack failing = alloc_sizes(trace, *failing_start, oom_index);
  if (trace[oom_index].stack != 0) failing[trace[oom_index].stack].push_back(trace[oom_index].size);

  // The reference step: of the steps before the failing one, the highest that shares a call
  // stack with it. Steps map to the telemetry records newest first: the last one ended where
  // the failing step began.
  const std::vector<std::size_t> peaks =
      step_peaks(snapshot, trace, curve, *failing_start, p.static_bytes, step_starts);
  if (peaks.empty()) {
    p.unavailable_reason = "the trace shows no complete step before the failing one";
    return p;
  }
  std::vector<std::size_t> by_height(peaks.size());
  for (std::size_t k = 0; k < peaks.size(); ++k) by_height[k] = k;
  std::stable_sort(by_height.begin(), by_height.end(),
                   [&](std::size_t a, std::size_t b) { return curve.allocated[peaks[a]] > curve.allocated[peaks[b]]; });
  std::optional<ReferenceWindow> chosen;
  SizesByStack reference;  // the chosen step's allocation sizes by call stack
  for (std::size_t n = 0; n < by_height.size() && n < kMaxReferenceCandidates && !chosen; ++n) {
    const std::size_t k = by_height[n];
    const std::size_t from_newest = peaks.size() - 1 - k;
    const std::optional<std::size_t> record =
        from_newest < recorded ? std::optional<std::size_t>(recorded - 1 - from_newest) : std::nullopt;
    const ReferenceWindow window =
        reference_window(curve, peaks[k], *failing_start, steps.first(recorded), p.static_bytes, record);
    reference = alloc_sizes(trace, window.start, window.end);
    const bool shares_a_stack = std::any_of(failing.begin(), failing.end(),
                                            [&](const auto& entry) { return reference.contains(entry.first); });
    if (failing.empty() || reference.empty() || shares_a_stack) chosen = window;
  }
  if (!chosen) {
    p.unavailable_reason = "the failing pass shares no call stack with any step before it: it is not the same step";
    p.different_pass = true;
    return p;
  }
  const std::size_t peak_index = chosen->peak;
  const std::size_t ref_end = chosen->end;
  p.reference_peak_bytes = curve.allocated[peak_index];
  if (chosen->record) {
    p.reference_step = steps[*chosen->record].step;
    p.reference_tokens = record_tokens(steps[*chosen->record]);
  }

  // Blocks the reference step allocated, live at its peak; those freed before its work ended
  // are its activations (gradients made by an earlier step and dropped by zero_grad are not).
  std::unordered_map<std::uint64_t, LiveBlock> live;
  for (std::size_t i = 0; i <= peak_index; ++i) {
    const snapshot::TraceEvent& e = trace[i];
    if (e.action == TraceAction::kAlloc) live[e.addr] = {e.size, e.stack, i};
    else if (e.action == TraceAction::kFreeCompleted) live.erase(e.addr);
  }

  std::uint64_t constant = 0;
  std::uint64_t scaled = 0;
  for (std::size_t i = peak_index + 1; i <= ref_end; ++i) {
    const snapshot::TraceEvent& e = trace[i];
    if (e.action != TraceAction::kFreeRequested && e.action != TraceAction::kFreeCompleted) continue;
    const auto it = live.find(e.addr);
    if (it == live.end()) continue;
    if (it->second.since < chosen->start) {  // kept from before the step
      live.erase(it);
      continue;
    }
    const auto same_stack = failing.find(it->second.stack);
    if (same_stack != failing.end() && holds_size(same_stack->second, it->second.size)) {
      constant += it->second.size;
    } else {
      scaled += it->second.size;
    }
    live.erase(it);
  }
  p.reference_constant_bytes = constant;
  p.reference_transient_bytes = constant + scaled;
  const bool failing_tokens_recorded = p.failing_tokens.has_value();
  p.token_ratio = size_ratio(failing, reference);
  if (failing_tokens_recorded && p.reference_tokens && *p.reference_tokens > 0)
    p.token_ratio = static_cast<double>(*p.failing_tokens) / static_cast<double>(*p.reference_tokens);
  if (p.reference_tokens && *p.reference_tokens > 0) {
    p.activation_bytes_per_token = static_cast<double>(scaled) / static_cast<double>(*p.reference_tokens);
    if (!p.failing_tokens)
      p.failing_tokens = std::llround(p.token_ratio * static_cast<double>(*p.reference_tokens));
  }
  const double projected = static_cast<double>(p.static_bytes) + static_cast<double>(constant) +
                           p.token_ratio * static_cast<double>(scaled);
  p.projected_peak_bytes = std::max(static_cast<std::uint64_t>(projected), p.live_at_oom_bytes);
  if (chosen->start > 0) p.returning_bytes = returning_bytes(trace, chosen->start, ref_end, *failing_start);
  p.next_step_peak_bytes = p.projected_peak_bytes + p.returning_bytes;
  p.available = true;
  return p;
}

}  // namespace fragscope::diagnose
