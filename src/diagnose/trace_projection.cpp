#include "diagnose/trace_projection.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "diagnose/optimizer_code.h"
#include "diagnose/python_frames.h"
#include "diagnose/size_scale.h"
#include "diagnose/unit_alignment.h"
#include "util/bytes.h"

namespace fragscope::diagnose {
namespace {

using replay::Op;
using replay::OpKind;
using snapshot::TraceAction;
using Pairs = AlignedPairs;

constexpr std::size_t kMaxUnits = 24;                 // earlier units looked at, newest first
constexpr double kMinMatchedShare = 0.9;              // of the prefix's bytes, to align
constexpr std::size_t kMinOverlapShare = 4;           // a cut unit's tail: 1/4 of the prefix's allocations at least
constexpr double kLeast = 0.02;                       // |log scale| below this: the same scale
constexpr double kMaxExponent = 2.0;                  // sizes grow at most with the scale squared
// A unit whose paired bytes are, for more than this share, none of 1, the scale and its square against the failing
// unit's (size_scale.h, share_off_scale) follows it by more than one scale: Whisper's fixed 30 s of audio against
// its transcripts (field whs_edge: 26%, the scale by bytes 1), CLIP's fixed images against its captions (15%), the
// translation tutorial's source against its target (trn_lo: 36%), images whose height and width vary apart
// (ret_lo: 9.5%). Fixed shapes pair at one size (0 on field mlm, ngpt, vit, mae); cuDNN's workspaces and rounding
// in jobs of one dimension stayed below (field det_lo 2.9%, rn_edge's units up to 4.6%).
constexpr double kVaryingPartShare = 0.05;
constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
constexpr std::size_t kBackwardsLookedAt = 4;         // earlier units whose backward tells if gradients outlive it

struct Unit {
  std::size_t first = 0;              ///< first event
  std::size_t end = 0;                ///< one past the last event (the next unit's first)
  std::vector<std::size_t> allocs;    ///< alloc events, in order
  std::vector<std::uint32_t> stacks;  ///< their call stacks
  std::int64_t blocks_at_start = 0;   ///< live blocks before `first` (offset by the trace's start)
  std::uint64_t start_level = 0;      ///< allocated bytes before `first`
  std::uint64_t peak = 0;             ///< highest allocated bytes within the unit
  /// Blocks live when it began, allocated in the trace: per call stack, sizes newest first,
  /// and each one's (stack, rank) by address.
  std::unordered_map<snapshot::StackId, std::vector<std::uint64_t>> older;
  std::unordered_map<std::uint64_t, std::pair<snapshot::StackId, std::size_t>> older_rank;
  /// Of `older`, the blocks its own iteration of the loop made before it began (a backward unit's forward
  /// activations), in the same order: they follow the batch as the unit's own allocations do.
  std::unordered_map<snapshot::StackId, std::vector<bool>> older_in_head;
  std::uint64_t head_bytes = 0;  ///< of start_level, those blocks' bytes
};

/// Fills u.older from the blocks live at its start (address → allocating event); those allocated at `head_start`
/// or later are its iteration's head.
void note_older_blocks(Unit& u, std::span<const snapshot::TraceEvent> trace,
                       const std::unordered_map<std::uint64_t, std::size_t>& live, std::size_t head_start) {
  std::vector<std::pair<std::size_t, std::uint64_t>> blocks(live.size());  // (event, address)
  std::size_t n = 0;
  for (const auto& [address, event] : live) blocks[n++] = {event, address};
  std::sort(blocks.rbegin(), blocks.rend());
  for (const auto& [event, address] : blocks) {
    std::vector<std::uint64_t>& sizes = u.older[trace[event].stack];
    u.older_rank[address] = {trace[event].stack, sizes.size()};
    sizes.push_back(trace[event].size);
    const bool in_head = event >= head_start;
    u.older_in_head[trace[event].stack].push_back(in_head);
    if (in_head) u.head_bytes += trace[event].size;
  }
}

/// Allocated bytes before the trace's first event (a mid-run trace starts with live blocks).
std::uint64_t level_before_trace(std::span<const snapshot::TraceEvent> trace, const RecordedCurve& curve) {
  if (trace.empty() || curve.allocated.empty()) return 0;
  const snapshot::TraceEvent& first = trace.front();
  if (first.action == TraceAction::kAlloc) return curve.allocated[0] - std::min(curve.allocated[0], first.size);
  if (first.action == TraceAction::kFreeCompleted) return curve.allocated[0] + first.size;
  return curve.allocated[0];
}

std::uint64_t bytes_of(std::span<const snapshot::TraceEvent> trace, const std::vector<std::size_t>& events) {
  std::uint64_t sum = 0;
  for (const std::size_t i : events) sum += trace[i].size;
  return sum;
}

/// A failing prefix that an earlier unit's allocations align with, all but further runs of that unit's own call
/// stacks: the same statements, looped over more items (field clstm_edge: a ConvLSTM over 12 context frames where
/// the step before had 9, its prefix 15% unmatched).
struct LongerLoop {
  std::size_t unit = 0;         ///< the earlier unit, counted from 1
  std::size_t allocations = 0;  ///< the failing prefix's allocations it has no counterpart for
  std::uint64_t bytes = 0;      ///< ... and their bytes
};

/// The LongerLoop of the failing prefix against `candidate` (its first `window` allocations, aligned as `pairs`),
/// or nullopt when an unmatched allocation of the prefix has a call stack the candidate did not run.
std::optional<LongerLoop> runs_more_often(std::span<const snapshot::TraceEvent> trace, const Unit& candidate,
                                          std::size_t window, const Unit& failing, const AlignedPairs& pairs,
                                          std::size_t unit_number) {
  const std::unordered_set<std::uint32_t> ran(candidate.stacks.begin(),
                                              candidate.stacks.begin() + static_cast<std::ptrdiff_t>(window));
  std::vector<bool> paired(failing.allocs.size(), false);
  for (const auto& pair : pairs) paired[pair.second] = true;
  LongerLoop longer{unit_number};
  for (std::size_t j = 0; j < failing.allocs.size(); ++j) {
    // Small blocks come and go with libraries' own bookkeeping (clstm_edge: one of 3,492 bytes); they tell no loop.
    if (paired[j] || failing.stacks[j] == 0 || trace[failing.allocs[j]].size < kScaleMinBytes) continue;
    if (!ran.contains(failing.stacks[j])) return std::nullopt;
    ++longer.allocations;
    longer.bytes += trace[failing.allocs[j]].size;
  }
  if (longer.allocations == 0) return std::nullopt;
  return longer;
}

/// One exponent estimate per (allocation of the reference, unit that told it).
struct Vote {
  std::size_t unit;
  double exponent;
};

class ExponentFit {
 public:
  explicit ExponentFit(std::size_t reference_allocs) : votes_(reference_allocs) {}

  void add(std::size_t position, std::uint32_t stack, std::size_t unit, double exponent) {
    votes_[position].push_back({unit, exponent});
    if (stack != 0) by_stack_[stack].push_back({unit, exponent});  // frame-less ones share nothing
  }
  /// The median exponent for `position` without unit `left_out` (its own stack's votes when
  /// it has none); nullopt when nothing tells.
  std::optional<double> exponent(std::size_t position, std::uint32_t stack, std::size_t left_out) const {
    if (auto e = median(votes_[position], left_out)) return e;
    if (const auto it = by_stack_.find(stack); it != by_stack_.end()) return median(it->second, left_out);
    return std::nullopt;
  }

 private:
  static std::optional<double> median(const std::vector<Vote>& votes, std::size_t left_out) {
    std::vector<double> values;
    for (const Vote& v : votes)
      if (v.unit != left_out) values.push_back(v.exponent);
    if (values.empty()) return std::nullopt;
    std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2), values.end());
    return std::clamp(values[values.size() / 2], 0.0, kMaxExponent);
  }
  std::vector<std::vector<Vote>> votes_;
  std::unordered_map<std::uint32_t, std::vector<Vote>> by_stack_;
};

/// The failing unit's scale against the reference in the fit's terms, and the share of the paired bytes it leaves
/// unexplained (scale^exponent off the real ratio by more than 2%). nullopt when no paired allocation of 1 MiB or
/// more has an exponent of 0.25 or more that the other units tell. cuDNN's workspaces (`elastic`) are left out: their
/// size is the plan's, which cuDNN picks per shape, not a power of the batch's (field msd_edge, multi-scale
/// training: one workspace pair, 71 and 36 MiB, was 28% of a backward prefix's paired bytes).
struct FitScale {
  double scale = 1.0;
  double misfit_share = 0.0;
};
std::optional<FitScale> scale_in_fit_terms(std::span<const snapshot::TraceEvent> trace, const Unit& reference,
                                           const Unit& failing, const Pairs& pairs, const ExponentFit& fit,
                                           std::size_t failing_unit, const std::function<bool(std::size_t)>& elastic) {
  std::vector<std::pair<double, double>> votes;  // (log scale, bytes)
  std::vector<std::tuple<double, double, double>> paired;  // (log ratio, exponent, bytes)
  double total = 0;
  for (const auto& [i, j] : pairs) {
    const std::uint64_t a = trace[reference.allocs[i]].size, b = trace[failing.allocs[j]].size;
    if (a < kScaleMinBytes || b < kScaleMinBytes || j + 1 == failing.allocs.size()) continue;
    if (elastic(failing.allocs[j])) continue;
    const auto e = fit.exponent(i, reference.stacks[i], failing_unit);
    if (!e) continue;
    const double ratio = std::log(static_cast<double>(b) / static_cast<double>(a));
    const auto bytes = static_cast<double>(a + b);
    paired.emplace_back(ratio, *e, bytes);
    total += bytes;
    if (*e >= 0.25) votes.emplace_back(ratio / *e, bytes);
  }
  if (votes.empty()) return std::nullopt;
  std::sort(votes.begin(), votes.end());
  double half = 0;
  for (const auto& [_, bytes] : votes) half += bytes;
  half /= 2;
  double log_scale = votes.back().first;
  for (const auto& [value, bytes] : votes) {
    if ((half -= bytes) <= 0) {
      log_scale = value;
      break;
    }
  }
  double misfit = 0;
  for (const auto& [ratio, e, bytes] : paired)
    if (std::abs(ratio - e * log_scale) > std::log(1.02)) misfit += bytes;
  return FitScale{std::exp(log_scale), misfit / total};
}

/// Unit `target`'s highest allocated level, projected as `reference`'s allocations scaled by
/// `scale` (the exponents leave `left_out` out of the fit). A block the reference had before
/// it began and frees is the target's counterpart (same call stack and recency), or nothing.
/// `head_factor`: for a batch of another size than the target's, how much larger the blocks of its
/// iteration's head are (Unit::older_in_head: a backward unit's forward activations).
std::uint64_t projected_peak(std::span<const snapshot::TraceEvent> trace, const Unit& reference, const ExponentFit& fit,
                             std::size_t left_out, double scale, const Unit& target, double head_factor = 1.0) {
  std::unordered_map<std::uint64_t, std::uint64_t> scaled;  // address → size
  double level = static_cast<double>(target.start_level) +
                 (head_factor - 1) * static_cast<double>(target.head_bytes);
  double peak = level;
  std::size_t position = 0;
  for (std::size_t i = reference.first; i < reference.end; ++i) {
    const snapshot::TraceEvent& e = trace[i];
    if (e.action == TraceAction::kAlloc) {
      const double exponent = fit.exponent(position, reference.stacks[position], left_out).value_or(1.0);
      const auto size = static_cast<std::uint64_t>(static_cast<double>(e.size) * std::pow(scale, exponent));
      scaled[e.addr] = size;
      level += static_cast<double>(size);
      peak = std::max(peak, level);
      ++position;
    } else if (e.action == TraceAction::kFreeCompleted) {
      if (const auto it = scaled.find(e.addr); it != scaled.end()) {
        level -= static_cast<double>(it->second);
        scaled.erase(it);
      } else if (const auto older = reference.older_rank.find(e.addr); older != reference.older_rank.end()) {
        const auto [stack, rank] = older->second;
        const auto counterpart = target.older.find(stack);
        if (counterpart != target.older.end() && rank < counterpart->second.size())
          level -= static_cast<double>(counterpart->second[rank]) *
                   (target.older_in_head.at(stack)[rank] ? head_factor : 1.0);
      }
    }
  }
  return static_cast<std::uint64_t>(std::max(0.0, peak));
}

/// What each slot held just before op `until`: the event that allocated it (kNone for blocks
/// the trace started with) and its size.
struct SlotState {
  std::vector<std::uint32_t> event;
  std::vector<std::uint64_t> size;
  std::vector<bool> live;
};

SlotState slots_before(const replay::PreparedTrace& prepared, std::size_t until) {
  SlotState s;
  s.event.assign(prepared.slot_count, kNone);
  s.size.assign(prepared.slot_count, 0);
  s.live.assign(prepared.slot_count, false);
  std::size_t n = 0;
  for (const alloc::InitialSegment& segment : prepared.initial_segments)
    for (const alloc::InitialBlock& block : segment.live_blocks) {
      const std::uint32_t slot = prepared.initial_slots[n++];
      s.live[slot] = !block.pending_free;
      s.size[slot] = block.requested_size;
    }
  for (std::size_t k = 0; k < until; ++k) {
    const Op& op = prepared.ops[k];
    if (op.kind == OpKind::kAlloc) {
      s.event[op.slot] = op.trace_index;
      s.size[op.slot] = op.size;
      s.live[op.slot] = true;
    } else if (op.kind == OpKind::kFree || op.kind == OpKind::kFreeCompleted) {
      s.live[op.slot] = false;
    }
  }
  return s;
}

/// Live blocks allocated before `unit_first`, per call stack, newest first.
std::unordered_map<snapshot::StackId, std::vector<std::uint32_t>> older_blocks_by_stack(
    const SlotState& s, std::span<const snapshot::TraceEvent> trace, std::size_t unit_first) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> older;  // (event, slot)
  for (std::uint32_t slot = 0; slot < s.live.size(); ++slot)
    if (s.live[slot] && s.event[slot] != kNone && s.event[slot] < unit_first) older.emplace_back(s.event[slot], slot);
  std::sort(older.rbegin(), older.rend());
  std::unordered_map<snapshot::StackId, std::vector<std::uint32_t>> by_stack;
  for (const auto& [event, slot] : older) by_stack[trace[event].stack].push_back(slot);
  return by_stack;
}

/// A block made without Python frames (on autograd's engine thread) outside an optimizer's code: a gradient, or the
/// backward's own workspace.
bool made_by_backward(const snapshot::Snapshot& snapshot, snapshot::StackId stack) {
  return python_frames(snapshot, stack).empty() && !made_by_optimizer(snapshot, stack);
}

/// Bytes live at the failing malloc that the units from the reference's start to the failing unit's made outside
/// an optimizer's code (made_by_optimizer: its state lives on) and that no block of the reference's rest stands for:
/// the step before's gradients and outputs, which the failing unit may free where the reference had nothing to free
/// (`zero_grad()` before the backward; a name such as `logits` rebound to this step's).
/// With `backward_only`, of those the blocks made without Python frames (on autograd's engine thread: gradients,
/// and the backward's own workspaces).
std::uint64_t held_freeable_bytes(const snapshot::Snapshot& snapshot, std::span<const snapshot::TraceEvent> trace,
                                  const SlotState& at_oom, std::size_t reference_first, std::size_t failing_first,
                                  const std::unordered_map<std::uint32_t, std::uint32_t>& slot_for,
                                  bool backward_only = false) {
  std::unordered_set<std::uint32_t> stood_for;
  for (const auto& [reference_slot, slot] : slot_for) stood_for.insert(slot);
  std::uint64_t bytes = 0;
  for (std::uint32_t slot = 0; slot < at_oom.live.size(); ++slot) {
    const std::uint32_t event = at_oom.event[slot];
    if (!at_oom.live[slot] || event == kNone || event < reference_first || event >= failing_first ||
        stood_for.contains(slot))
      continue;
    const snapshot::StackId stack = trace[event].stack;
    if (backward_only ? made_by_backward(snapshot, stack) : !made_by_optimizer(snapshot, stack))
      bytes += at_oom.size[slot];
  }
  return bytes;
}

/// The first allocation of events [first, end) made without Python frames (on autograd's engine thread: where a
/// backward begins); `end` when none.
std::size_t first_backward_alloc(const snapshot::Snapshot& snapshot, std::span<const snapshot::TraceEvent> trace,
                                 std::size_t first, std::size_t end) {
  for (std::size_t i = first; i < end && i < trace.size(); ++i)
    if (trace[i].action == snapshot::TraceAction::kAlloc && python_frames(snapshot, trace[i].stack).empty()) return i;
  return end;
}

/// Whether one of the newest kBackwardsLookedAt units before the failing one began its backward still holding at
/// least half of `bytes` in blocks made without Python frames before it began, outside an optimizer's code: the loop
/// keeps the step before's gradients through the backward (accumulation; `zero_grad()` after the optimizer's step).
bool backward_kept_earlier_gradients(const replay::PreparedTrace& prepared, const snapshot::Snapshot& snapshot,
                                     std::span<const snapshot::TraceEvent> trace,
                                     const std::vector<std::uint32_t>& op_of_event, const std::vector<Unit>& units,
                                     std::uint64_t bytes) {
  const std::size_t failing = units.size() - 1;
  const std::size_t oldest = failing > kBackwardsLookedAt ? failing - kBackwardsLookedAt : 0;
  for (std::size_t u = failing; u-- > oldest;) {
    const std::size_t backward = first_backward_alloc(snapshot, trace, units[u].first, units[u].end);
    if (backward == units[u].end || op_of_event[backward] == kNone) continue;
    const SlotState s = slots_before(prepared, op_of_event[backward]);
    std::uint64_t held = 0;
    for (std::uint32_t slot = 0; slot < s.live.size(); ++slot) {
      const std::uint32_t event = s.event[slot];
      if (!s.live[slot] || event == kNone || event >= units[u].first) continue;
      if (made_by_backward(snapshot, trace[event].stack)) held += s.size[slot];
    }
    if (2 * held >= bytes) return true;
  }
  return false;
}

}  // namespace

SyntheticStart start_synthetic_trace(const replay::PreparedTrace& prepared, std::uint32_t oom_op, ProjectedStep& step) {
  replay::PreparedTrace& synthetic = step.trace;
  synthetic.source = prepared.source;
  synthetic.device = prepared.device;
  synthetic.trace_events = prepared.trace_events;
  synthetic.segment_events = prepared.segment_events;
  synthetic.address_hints = prepared.address_hints;
  synthetic.initial_segments = prepared.initial_segments;
  synthetic.initial_slots = prepared.initial_slots;
  synthetic.starts_mid_run = prepared.starts_mid_run;
  synthetic.elastic_hidden = prepared.elastic_hidden;
  synthetic.streams = prepared.streams;
  synthetic.recorded_config = prepared.recorded_config;
  synthetic.recorded_config_known = prepared.recorded_config_known;
  synthetic.recorded_initial_reserved = prepared.recorded_initial_reserved;
  synthetic.capacity = prepared.capacity;
  for (std::uint32_t k = 0; k < oom_op; ++k)
    if (prepared.ops[k].kind != OpKind::kOom) synthetic.ops.push_back(prepared.ops[k]);
  SyntheticStart start;
  start.served = prepared.ops[oom_op];
  const Op& last_recorded = synthetic.ops.empty() ? start.served : synthetic.ops.back();
  start.segment_end = last_recorded.segment_end;
  start.hint_end = last_recorded.hint_end;
  start.served.kind = OpKind::kAlloc;
  start.served.slot = prepared.slot_count;
  step.projected_from_op = synthetic.ops.size();
  synthetic.ops.push_back(start.served);
  synthetic.slot_count = prepared.slot_count + 1;
  return start;
}

ProjectedStep project_step_from_trace(const replay::PreparedTrace& prepared, const snapshot::Snapshot& snapshot,
                                      int device, const RecordedCurve& curve, std::size_t oom_index,
                                      const TraceUnits& units) {
  ProjectedStep out;
  TraceStepProjection& p = out.figures;
  p.unit_statement = units.statement;
  p.eval_units = units.eval;
  const auto trace = snapshot.trace(device);
  if (!units.repeats()) {
    p.unavailable_reason = "the failing unit has no earlier occurrence in the trace";
    return out;
  }
  if (curve.allocated.size() != trace.size() || prepared.trace_events != trace.size()) {
    p.unavailable_reason = "the trace and its replay do not match";
    return out;
  }

  // Units, the failing one last; at most kMaxUnits before it.
  const std::size_t count = units.starts.size();
  const std::size_t first_unit = count - 1 > kMaxUnits ? count - 1 - kMaxUnits : 0;
  p.earlier_units = count - 1;
  std::vector<Unit> unit(count - first_unit);
  std::int64_t live_blocks = 0;
  std::unordered_map<std::uint64_t, std::size_t> live;  // address → allocating event
  std::size_t next = first_unit;
  for (std::size_t i = 0; i <= oom_index; ++i) {
    while (next < count && units.starts[next] == i) {
      Unit& u = unit[next - first_unit];
      u.first = i;
      u.end = next + 1 < count ? units.starts[next + 1] : oom_index + 1;
      // An eval unit is over where its statement stopped allocating (the training steps that
      // follow until the next eval are another unit's business).
      if (units.eval && next + 1 < count && next < units.ends.size()) u.end = std::min(u.end, units.ends[next]);
      // A unit ends with its iteration of the loop: the next step's first statements (the
      // forward after a backward unit) run at another size, and belong to the next unit.
      if (next + 1 < count && next < units.iteration_ends.size()) u.end = std::min(u.end, units.iteration_ends[next]);
      u.blocks_at_start = live_blocks;
      u.start_level = i > 0 ? curve.allocated[i - 1] : level_before_trace(trace, curve);
      // Its iteration began where the one before ended (a backward unit: its forward came first); an eval
      // batch's has no head of its own (what ran since the eval before is training).
      const bool after_iteration = !units.eval && next > 0 && next - 1 < units.iteration_ends.size();
      note_older_blocks(u, trace, live, after_iteration ? units.iteration_ends[next - 1] : i);
      ++next;
    }
    const snapshot::TraceEvent& e = trace[i];
    if (e.action == TraceAction::kAlloc) {
      ++live_blocks;
      live[e.addr] = i;
    } else if (e.action == TraceAction::kFreeCompleted) {
      --live_blocks;
      live.erase(e.addr);
    }
    if (next > first_unit && i < unit[next - 1 - first_unit].end) {
      Unit& u = unit[next - 1 - first_unit];
      u.peak = std::max(u.peak, curve.allocated[i]);
      if (e.action == TraceAction::kAlloc || i == oom_index) {
        u.allocs.push_back(i);
        u.stacks.push_back(static_cast<std::uint32_t>(e.stack));
      }
    }
  }
  const Unit& failing = unit.back();
  p.prefix_allocations = failing.allocs.size();
  p.start_level_bytes = failing.start_level;
  p.live_at_oom_bytes = curve.allocated[oom_index] + trace[oom_index].size;

  // The reference: an aligned candidate of the failing unit's kind, its scale nearest 1.
  const auto alike = [](const Unit& u, const Unit& v) {
    const std::int64_t tolerance = std::max<std::int64_t>(8, v.blocks_at_start / 20);
    return std::abs(u.blocks_at_start - v.blocks_at_start) <= tolerance;
  };
  const auto same_kind = [&](const Unit& u) { return alike(u, failing); };
  // A mid-run trace's first unit may have lost its head to the trace's start: its peak is not a
  // whole step's, to check the fit on (field lit_edge cut at 50%: its tail, checked as a step,
  // missed by 40%); its allocations still tell how sizes follow the scale. (It may still be
  // the reference, when the failing prefix aligns with what is left of it.)
  const bool first_cut = prepared.starts_mid_run && first_unit == 0 && !units.first_unit_whole;
  const std::uint64_t prefix_bytes = bytes_of(trace, failing.allocs);
  std::optional<std::size_t> reference;
  Pairs reference_pairs;  // (position in reference, position in failing)
  std::size_t aligned_position = 0;
  bool reference_of_its_kind = false;
  double longest_scale = 1.0;  // the failing unit's sizes against the longest unit's
  std::size_t longest = 0;     // its index in `unit`
  std::vector<double> head_exponents;  // how the iteration's head grew with the batch, unit by unit
  bool growing = true;                 // every aligned unit so far (newest first) smaller than the one after it
  double after_scale = 1.0;            // the failing unit's sizes against the one after the candidate
  std::optional<LongerLoop> longer_loop;  // the newest candidate the failing prefix runs more often than
  for (std::size_t k = unit.size() - 1; k-- > 0;) {  // newest first: ties go to the most recent
    const Unit& candidate = unit[k];
    const std::size_t window = std::min(candidate.allocs.size(), failing.allocs.size() * 5 / 4 + 64);
    double scale = 1.0;
    const auto pairs = align_units(trace, candidate.allocs, candidate.stacks, window, failing.allocs, failing.stacks,
                                   failing.allocs.size(), scale);
    if (!pairs || pairs->empty() || pairs->back().second + 1 != failing.allocs.size()) continue;
    std::uint64_t matched = 0;
    for (const auto& pair : *pairs) matched += trace[failing.allocs[pair.second]].size;
    if (static_cast<double>(matched) < kMinMatchedShare * static_cast<double>(prefix_bytes)) {
      if (!longer_loop) longer_loop = runs_more_often(trace, candidate, window, failing, *pairs, first_unit + k + 1);
      continue;
    }
    const bool sized = std::any_of(pairs->begin(), pairs->end(), [&](const auto& pair) {
      return trace[candidate.allocs[pair.first]].size >= kScaleMinBytes &&
             trace[failing.allocs[pair.second]].size >= kScaleMinBytes;
    });
    if (!sized) continue;  // nothing the failing unit allocated so far tells its size
    ++p.aligned_units;
    const double off = share_off_scale(*pairs, [&](std::size_t i) { return trace[candidate.allocs[i]].size; },
                                       [&](std::size_t j) { return trace[failing.allocs[j]].size; }, scale, 0.02);
    p.off_scale_share = std::max(p.off_scale_share, off);
    // At the failing unit's scale, an iteration's head of another size (a backward unit's forward) is a batch of
    // another size all the same, in what the prefix does not show: field txl_edge (a Transformer-XL, the failing
    // unit's prefix one logits block of the same size in every step, its forward over memories 18% longer than the
    // step before's) was called fragmentation; its rerun under expandable segments ran that step and failed at
    // the next, whose memories were longer still.
    // A mid-run trace's first unit began its iteration before the trace: beside a failing unit with a head, it
    // cannot show that its forward was the failing one's size (txl_edge cut at 50%, fragmentation without this).
    const bool head_lost = prepared.starts_mid_run && first_unit + k == 0 && failing.head_bytes > 0;
    const bool head_differs =
        head_lost || (candidate.head_bytes > 0 && failing.head_bytes > 0 &&
                      std::abs(std::log(static_cast<double>(failing.head_bytes) /
                                        static_cast<double>(candidate.head_bytes))) > std::log(1 + kVaryingPartShare));
    if (std::abs(std::log(scale)) > std::log(1.02) || off > kVaryingPartShare || head_differs) ++p.varying_units;
    if (scale > 1.02) ++p.smaller_units;
    growing = growing && scale > after_scale * 1.02;
    if (growing) {
      if (p.growing_units++ == 0) p.last_growth = scale;
      after_scale = scale;
    }
    if (scale < 1 / 1.02 && (!p.longest_unit || scale < longest_scale)) {  // a longer batch than the failing one
      p.longest_unit = first_unit + k + 1;
      longest_scale = scale;
      longest = k;
    }
    if (std::abs(std::log(scale)) >= kLeast && candidate.head_bytes > 0 && failing.head_bytes > 0)
      head_exponents.push_back(std::log(static_cast<double>(failing.head_bytes) /
                                        static_cast<double>(candidate.head_bytes)) / std::log(scale));
    // Another kind only when none of its own aligns; among one kind, the scale nearest 1.
    const bool its_kind = same_kind(candidate);
    if (reference && (reference_of_its_kind && !its_kind)) continue;
    if (reference && reference_of_its_kind == its_kind &&
        std::abs(std::log(scale)) >= std::abs(std::log(p.scale)) - 1e-9)
      continue;
    reference = k;
    reference_of_its_kind = its_kind;
    reference_pairs = *pairs;
    aligned_position = pairs->back().first;
    p.scale = scale;
    p.matched_allocations = pairs->size();
    p.reference_off_scale_share = off;
    p.follows_one_scale = off <= kVaryingPartShare;
  }
  if (!reference) {
    p.unavailable_reason =
        longer_loop
            ? fmt::format("the failing unit runs the statements of unit {} more often than it did: {} of its "
                          "allocations ({}) are further runs of call stacks unit {} ran, a loop over more items (a "
                          "longer sequence, more frames or samples), so no earlier unit shows the rest of a unit "
                          "that long",
                          longer_loop->unit, longer_loop->allocations, format_bytes(longer_loop->bytes),
                          longer_loop->unit)
            : "no earlier unit allocates like the failing one up to the failing malloc (or what it allocated so "
              "far, none of it 1 MiB or more, does not tell its size)";
    // A ring or a late history start may have cut the trace's first unit: its tail, aligned
    // backwards from the failing malloc, tells where its record begins and how long a whole
    // unit is (its record, and the failing unit's head before that point).
    if (prepared.starts_mid_run && first_unit == 0 && unit.size() == 2 && failing.stacks.back() != 0) {
      double scale = 1.0;
      const auto tail = align_cut_unit(trace, unit[0].allocs, unit[0].stacks, unit[0].allocs.size(),
                                       failing.allocs, failing.stacks, scale);
      std::uint64_t matched = 0, overlap = 0;  // the failing unit's bytes from the record's start on
      if (tail) {
        for (const auto& pair : *tail) matched += trace[failing.allocs[pair.second]].size;
        for (std::size_t j = tail->front().second; j < failing.allocs.size(); ++j)
          overlap += trace[failing.allocs[j]].size;
      }
      // The overlap must be a quarter of the failing prefix at least, and aligned like a unit.
      if (tail && tail->front().second > 0 &&
          (failing.allocs.size() - tail->front().second) * kMinOverlapShare >= failing.allocs.size() &&
          static_cast<double>(matched) >= kMinMatchedShare * static_cast<double>(overlap)) {
        const std::size_t head_events = failing.allocs[tail->front().second] - failing.first;
        p.cut_unit_events = unit[0].end - unit[0].first + head_events;
        p.unavailable_reason = fmt::format(
            "the trace's only earlier unit lost its head to the trace's start: its record (events {}-{}) begins "
            "where the failing unit's allocation {} of {} is, so whole, a unit takes about {} trace events",
            unit[0].first, unit[0].end - 1, tail->front().second + 1, failing.allocs.size(), *p.cut_unit_events);
      }
    }
    return out;
  }
  const Unit& ref = unit[*reference];
  if (!same_kind(ref))
    p.kind_difference_bytes =
        std::max(ref.start_level, failing.start_level) - std::min(ref.start_level, failing.start_level);
  p.reference_unit = first_unit + *reference + 1;
  p.head_bytes = failing.head_bytes;
  p.reference_head_bytes = ref.head_bytes;
  p.reference_first_event = ref.first;
  p.reference_end_event = ref.end;
  p.aligned_event = ref.allocs[aligned_position];
  {
    std::vector<bool> paired(aligned_position + 1, false);
    for (const auto& pair : reference_pairs) paired[pair.first] = true;
    for (std::size_t i = 0; i <= aligned_position; ++i)
      if (!paired[i]) p.reference_unmatched_bytes += trace[ref.allocs[i]].size;
  }

  // The fit: the other units aligned with the whole reference, and the failing prefix.
  ExponentFit fit(ref.allocs.size());
  std::vector<std::pair<std::size_t, double>> checks;  // (unit, its scale against the reference)
  for (std::size_t k = 0; k + 1 < unit.size(); ++k) {
    if (k == *reference) continue;
    double scale = 1.0;
    const auto pairs = align_units(trace, ref.allocs, ref.stacks, ref.allocs.size(), unit[k].allocs, unit[k].stacks,
                                   unit[k].allocs.size(), scale);
    if (!pairs) continue;
    std::uint64_t matched_ref = 0, matched_other = 0;
    for (const auto& [i, j] : *pairs) {
      matched_ref += trace[ref.allocs[i]].size;
      matched_other += trace[unit[k].allocs[j]].size;
    }
    if (static_cast<double>(matched_ref) >= kMinMatchedShare * static_cast<double>(bytes_of(trace, ref.allocs)) &&
        static_cast<double>(matched_other) >= kMinMatchedShare * static_cast<double>(bytes_of(trace, unit[k].allocs)) &&
        !(first_cut && k == 0))  // its sizes tell exponents; its peak, without its head, checks nothing
      checks.emplace_back(k, scale);
    if (std::abs(std::log(scale)) < kLeast) continue;
    for (const auto& [i, j] : *pairs) {
      const std::uint64_t a = trace[ref.allocs[i]].size, b = trace[unit[k].allocs[j]].size;
      if (a == 0 || b == 0 || (ref.stacks[i] == 0 && std::max(a, b) < kScaleMinBytes))
        continue;  // matched by size alone
      fit.add(i, ref.stacks[i], k, std::log(static_cast<double>(b) / static_cast<double>(a)) / std::log(scale));
    }
  }
  // The failing unit's scale in the terms the other units' votes were cast in: the most common ratio by bytes can
  // be another power of the batch's dimension in a longer step (BLOOM, field blm_edge: the attention scores'
  // L² outweigh the logits' L only in the longest step, so its scale by bytes was L², the others' L, and
  // the projection 11% high). Each paired allocation whose exponent the others tell gives the scale as its ratio
  // to the power 1 / exponent; the bytes' median of those is the scale, and the share of the prefix's bytes it
  // does not explain is a fit error of its own.
  const std::size_t failing_unit = unit.size() - 1;
  // The prepared trace told each malloc's elasticity (replay::Op::elastic) once.
  const std::vector<std::uint32_t> op_of_event = replay::malloc_op_of_event(prepared);
  const auto elastic = [&](std::size_t event) {
    return op_of_event[event] != kNone && prepared.ops[op_of_event[event]].elastic;
  };
  if (const auto in_fit_terms = scale_in_fit_terms(trace, ref, failing, reference_pairs, fit, failing_unit, elastic)) {
    p.scale = in_fit_terms->scale;
    p.prefix_misfit_share = in_fit_terms->misfit_share;
  }
  if (std::abs(std::log(p.scale)) >= kLeast) {
    for (const auto& [i, j] : reference_pairs) {
      const std::uint64_t a = trace[ref.allocs[i]].size, b = trace[failing.allocs[j]].size;
      if (a == 0 || b == 0 || j + 1 == failing.allocs.size()) continue;
      fit.add(i, ref.stacks[i], failing_unit,
              std::log(static_cast<double>(b) / static_cast<double>(a)) / std::log(p.scale));
    }
  }
  // With a reference of the failing unit's kind, the fit is checked on the units of that kind
  // when two or more align: a unit of another kind begins holding other blocks (gradients,
  // optimizer state), which a projection between units of one kind need not model.
  const auto checks_of_its_kind = std::count_if(checks.begin(), checks.end(), [&](const auto& c) {
    return alike(unit[c.first], ref);
  });
  const bool only_its_kind = same_kind(ref) && checks_of_its_kind >= 2;
  for (const auto& [k, scale] : checks) {
    if (only_its_kind && !alike(unit[k], ref)) {
      ++p.other_kind_units;
      continue;
    }
    const std::uint64_t projected = projected_peak(trace, ref, fit, k, scale, unit[k]);
    const double real = static_cast<double>(std::max<std::uint64_t>(unit[k].peak, 1));
    const double error = (static_cast<double>(projected) - real) / real;
    p.fit_error = std::max(p.fit_error.value_or(0.0), std::abs(error));
    p.fit_error_above = std::max(p.fit_error_above, error);
    p.fit_error_below = std::max(p.fit_error_below, -error);
    ++p.checked_units;
  }
  if (*reference + 1 < unit.size() &&
      alike(failing, ref)) {  // the unit after the failing one is like the one after the reference
    const Unit& after = unit[*reference + 1];
    if (!alike(after, ref) && after.start_level > ref.start_level)
      p.next_unit_extra_bytes = after.start_level - ref.start_level;
  }
  // A step as long as the longest seen, begun as the failing one began, with the head that unit's iteration had.
  if (p.longest_unit)
    p.longest_peak_bytes = projected_peak(trace, ref, fit, kNone, p.scale / longest_scale, failing,
                                          failing.head_bytes > 0 ? static_cast<double>(unit[longest].head_bytes) /
                                                                       static_cast<double>(failing.head_bytes)
                                                                 : 1.0);

  // The synthetic trace: the recorded ops to the failing malloc, then the reference's rest.
  const std::uint32_t oom_op = op_of_event[oom_index];
  const std::uint32_t aligned_op = op_of_event[p.aligned_event];
  if (oom_op == kNone || aligned_op == kNone) {
    p.unavailable_reason = "the failing malloc or its counterpart is not in the replayed trace";
    return out;
  }
  const SlotState at_oom = slots_before(prepared, oom_op);
  const SlotState at_aligned = slots_before(prepared, aligned_op);

  const SyntheticStart synthetic_start = start_synthetic_trace(prepared, oom_op, out);
  const Op& served = synthetic_start.served;
  replay::PreparedTrace& synthetic = out.trace;
  const std::uint32_t segment_end = synthetic_start.segment_end;
  const std::uint32_t hint_end = synthetic_start.hint_end;
  std::uint32_t next_slot = served.slot + 1;

  // The reference's blocks live at its aligned malloc → the failing unit's counterparts.
  std::unordered_map<std::uint32_t, std::uint32_t> slot_for;      // reference slot → synthetic slot
  std::unordered_map<std::size_t, std::size_t> failing_event_of;  // reference event → failing event
  for (const auto& [i, j] : reference_pairs) failing_event_of[ref.allocs[i]] = failing.allocs[j];
  std::unordered_map<std::size_t, std::uint32_t> slot_at_oom;  // failing event → its slot, live at the OOM
  for (std::uint32_t slot = 0; slot < at_oom.live.size(); ++slot)
    if (at_oom.live[slot] && at_oom.event[slot] != kNone) slot_at_oom[at_oom.event[slot]] = slot;
  auto older_failing = older_blocks_by_stack(at_oom, trace, failing.first);
  const auto older_reference = older_blocks_by_stack(at_aligned, trace, ref.first);
  for (const auto& [stack, slots] : older_reference) {
    const auto it = older_failing.find(stack);
    if (it == older_failing.end()) continue;
    for (std::size_t n = 0; n < slots.size() && n < it->second.size(); ++n) slot_for[slots[n]] = it->second[n];
  }
  for (std::uint32_t slot = 0; slot < at_aligned.live.size(); ++slot) {
    if (!at_aligned.live[slot] || at_aligned.event[slot] == kNone || at_aligned.event[slot] < ref.first) continue;
    const auto counterpart = failing_event_of.find(at_aligned.event[slot]);
    if (counterpart == failing_event_of.end()) continue;
    if (const auto live = slot_at_oom.find(counterpart->second); live != slot_at_oom.end())
      slot_for[slot] = live->second;
  }
  slot_for[prepared.ops[aligned_op].slot] = served.slot;
  // What the failing unit holds that the reference's rest never frees, made without Python frames (the step
  // before's gradients): the projection holds it to its end, a loop calling `zero_grad()` between the forward and
  // the backward frees it where the backward begins (the first allocation without Python frames). Not when the
  // failing unit's own backward had begun (a checkpointed recompute, a backward hook: still held, so not freed), the
  // trace has no Python frames, or an earlier unit's backward began still holding such blocks (accumulation).
  const bool before_backward = !python_frames(snapshot, trace[oom_index].stack).empty() &&
                               first_backward_alloc(snapshot, trace, failing.first, oom_index) == oom_index;
  std::uint64_t held_through_rest =
      before_backward && failing.start_level > ref.start_level
          ? held_freeable_bytes(snapshot, trace, at_oom, ref.first, failing.first, slot_for, true)
          : 0;
  if (held_through_rest > 0 &&
      backward_kept_earlier_gradients(prepared, snapshot, trace, op_of_event, unit, held_through_rest))
    held_through_rest = 0;
  // Where the reference's rest begins its backward (its events from there on are the projection's backward).
  const std::size_t rest_backward =
      held_through_rest > 0 ? first_backward_alloc(snapshot, trace, p.aligned_event + 1, ref.end) : ref.end;
  bool backward_began = false;
  double peak_before_backward = 0, peak_from_backward = 0;

  std::vector<std::uint64_t> reference_size = at_aligned.size;  // by reference slot, as the rest runs
  // The live level over the projection as synthesised, and with every unfitted allocation
  // constant or quadratic instead of linear (by synthetic slot: the extra bytes either way).
  const auto start = static_cast<double>(p.live_at_oom_bytes);
  double level = start, low = start, high = start;
  double peak = start, peak_low = start, peak_high = start;
  std::unordered_map<std::uint32_t, std::pair<double, double>> spread;  // slot → (size − low, high − size)
  std::unordered_map<std::uint32_t, std::uint64_t> made;                // synthetic slot the projection made → size
  made[served.slot] = trace[oom_index].size;
  std::uint32_t slot_at_peak = served.slot;  // the last allocation that raised the peak (slots go in order)
  const auto size_of = [&](std::uint32_t slot) -> std::uint64_t {
    if (const auto it = made.find(slot); it != made.end()) return it->second;
    return slot < at_oom.size.size() ? at_oom.size[slot] : 0;
  };
  std::unordered_map<std::size_t, std::size_t> position_of;  // reference event → position
  for (std::size_t k = 0; k < ref.allocs.size(); ++k) position_of[ref.allocs[k]] = k;
  for (std::size_t k = aligned_op + 1; k < prepared.ops.size() && prepared.ops[k].trace_index < ref.end; ++k) {
    Op op = prepared.ops[k];
    op.trace_index = static_cast<std::uint32_t>(oom_index);
    op.segment_end = segment_end;
    op.hint_end = hint_end;
    switch (op.kind) {
      case OpKind::kAlloc: {
        const std::size_t position = position_of.at(prepared.ops[k].trace_index);
        const std::optional<double> exponent = fit.exponent(position, ref.stacks[position], kNone);
        const double e = exponent.value_or(1.0);
        const auto size = static_cast<std::uint64_t>(static_cast<double>(op.size) * std::pow(p.scale, e));
        if (!exponent)
          p.unfitted_bytes += op.size;
        else if (std::abs(e) < 0.25)
          p.constant_bytes += op.size;
        else if (std::abs(e - 1) < 0.25)
          p.linear_bytes += op.size;
        else if (std::abs(e - 2) < 0.25)
          p.quadratic_bytes += op.size;
        else
          p.other_bytes += op.size;
        // An unfitted allocation may be constant or quadratic instead of linear: the least and
        // most of the three (a failing unit smaller than its reference turns them around). `size`
        // is rounded down: a few bytes under the quadratic term are no doubt (field llava_lo: -2
        // bytes of doubt became 2^64 - 2 of over_bytes).
        const double constant = static_cast<double>(op.size);
        const double quadratic = constant * p.scale * p.scale;
        const double below = exponent ? 0.0 : std::max(0.0, static_cast<double>(size) - std::min(constant, quadratic));
        const double above = exponent ? 0.0 : std::max(0.0, std::max(constant, quadratic) - static_cast<double>(size));
        level += static_cast<double>(size);
        backward_began = prepared.ops[k].trace_index >= rest_backward;
        double& part_peak = backward_began ? peak_from_backward : peak_before_backward;
        part_peak = std::max(part_peak, level);
        low += static_cast<double>(size) - below;
        high += static_cast<double>(size) + above;
        if (level > peak) slot_at_peak = next_slot;
        peak = std::max(peak, level);
        peak_low = std::max(peak_low, low);
        peak_high = std::max(peak_high, high);
        reference_size[op.slot] = op.size;
        slot_for[op.slot] = next_slot;
        made[next_slot] = size;
        if (below != 0 || above != 0) spread[next_slot] = {below, above};
        op.slot = next_slot++;
        op.size = size;
        synthetic.ops.push_back(op);
        break;
      }
      case OpKind::kFree:
      case OpKind::kFreeRequested:
      case OpKind::kFreeCompleted: {
        const auto it = slot_for.find(op.slot);
        if (it == slot_for.end()) {
          if (op.kind != OpKind::kFreeRequested) p.unmatched_free_bytes += reference_size[op.slot];
          break;
        }
        op.slot = it->second;
        if (op.kind != OpKind::kFreeRequested) {
          slot_for.erase(it);
          const double size = static_cast<double>(size_of(op.slot));
          const auto extra = spread.find(op.slot);
          level -= size;
          low -= size - (extra != spread.end() ? extra->second.first : 0.0);
          high -= size + (extra != spread.end() ? extra->second.second : 0.0);
        }
        synthetic.ops.push_back(op);
        break;
      }
      case OpKind::kEmptyCache:
        synthetic.ops.push_back(op);
        break;
      case OpKind::kOom:
      case OpKind::kCaughtOom:
        break;  // a failure the program caught (cuDNN's workspace search): nothing was allocated
    }
  }
  synthetic.slot_count = next_slot;
  // One-sided doubts: a reference that began holding more than the failing unit (gradients it
  // accumulates into) may make fewer blocks than the failing unit will; one that held less may
  // make blocks the failing unit already has — long-lived ones (the optimizer's state), still held
  // where the reference ends, and only those made before the peak can raise it —, and the failing
  // unit may free what the step before left it that the reference never held (field gmt_edge, a
  // plain loop projected from its first step: the step before's 1.47 GB of log-probabilities,
  // freed when `logp` was rebound, and its gradients, freed by `zero_grad()` before the backward;
  // 13% above the whole run's peak). Both take at most what the failing unit held beyond the
  // reference. A free without a counterpart keeps a block that the failing unit may not hold.
  if (failing.start_level > ref.start_level) {
    p.reference_began_lower = true;
    for (const auto& [reference_slot, slot] : slot_for)
      if (slot > served.slot && slot <= slot_at_peak) p.kept_before_peak_bytes += made.at(slot);
    p.held_freeable_bytes = held_freeable_bytes(snapshot, trace, at_oom, ref.first, failing.first, slot_for);
    p.over_bytes += std::min(p.kind_difference_bytes, p.kept_before_peak_bytes + p.held_freeable_bytes);
  } else {
    p.under_bytes += p.kind_difference_bytes;
  }
  if (backward_began) {
    const double freed_peak = std::max({start, peak_before_backward,
                                        peak_from_backward - static_cast<double>(held_through_rest)});
    p.held_freed_saving_bytes = static_cast<std::uint64_t>(std::max(0.0, peak - freed_peak));
  }
  p.over_bytes += p.unmatched_free_bytes + static_cast<std::uint64_t>(peak - peak_low);
  p.under_bytes += static_cast<std::uint64_t>(peak_high - peak);
  p.available = true;
  // A batch of another size has its iteration's head grown as the earlier units' heads grew with theirs (the
  // median exponent; linear when no unit of another size tells).
  double head_exponent = 1.0;
  if (!head_exponents.empty()) {
    const auto middle = head_exponents.begin() + static_cast<std::ptrdiff_t>(head_exponents.size() / 2);
    std::nth_element(head_exponents.begin(), middle, head_exponents.end());
    head_exponent = std::clamp(*middle, 0.0, kMaxExponent);
  }
  out.peak_at_factor = [trace, ref, fit, failing, scale = p.scale, head_exponent](double factor) {
    return projected_peak(trace, ref, fit, kNone, scale * factor, failing, std::pow(factor, head_exponent));
  };
  return out;
}

}  // namespace fragscope::diagnose
