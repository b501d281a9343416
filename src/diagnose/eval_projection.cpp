#include "diagnose/eval_projection.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "diagnose/oom_call_path.h"
#include "diagnose/python_frames.h"
#include "diagnose/sequence_alignment.h"
#include "diagnose/size_scale.h"
#include "util/file_name.h"

namespace fragscope::diagnose {
namespace {

using replay::Op;
using replay::OpKind;
using snapshot::FrameId;
using snapshot::StackId;
using snapshot::TraceAction;

constexpr std::size_t kMaxCalls = 4;        // training calls tried, newest first
constexpr std::size_t kMaxSharedCalls = 8;  // shared functions tried before giving up
constexpr std::size_t kMaxEdits = 1500;     // insertions + deletions the eval and a call may differ by
constexpr double kMinMatchedShare = 0.9;    // of the eval prefix's bytes, to align
constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
constexpr std::size_t kKept = std::numeric_limits<std::size_t>::max();  // not freed before the rest ends

/// Python frames per call stack, outermost first.
class FrameCache {
 public:
  explicit FrameCache(const snapshot::Snapshot& snapshot) : snapshot_(snapshot) {}
  const std::vector<FrameId>& of(StackId stack) {
    auto [it, added] = cache_.try_emplace(stack);
    if (added && stack != 0) it->second = python_frames(snapshot_, stack);
    return it->second;
  }

 private:
  const snapshot::Snapshot& snapshot_;
  std::unordered_map<StackId, std::vector<FrameId>> cache_;
};

bool same_function(const snapshot::Snapshot& snapshot, FrameId a, FrameId b) {
  const snapshot::Frame& x = snapshot.stacks.frame(a);
  const snapshot::Frame& y = snapshot.stacks.frame(b);
  return x.filename == y.filename && x.name == y.name;
}

bool torch_frame(const snapshot::Snapshot& snapshot, FrameId frame) {
  return !torch_path(snapshot.strings.view(snapshot.stacks.frame(frame).filename)).empty();
}

/// Where the eval's stack and a training stack call the same function from different sites.
struct SharedCall {
  std::size_t eval_depth = 0;            ///< the function's frame in the eval's stack
  std::vector<FrameId> training_prefix;  ///< the training's frames above it
  FrameId training_frame = 0;            ///< the training's frame of the function
};

std::optional<SharedCall> shared_call(const snapshot::Snapshot& snapshot, const std::vector<FrameId>& eval,
                                      const std::vector<FrameId>& training) {
  std::size_t common = 0;
  while (common < eval.size() && common < training.size() && eval[common] == training[common]) ++common;
  if (common == 0 || common == eval.size() || common == training.size()) return std::nullopt;
  for (std::size_t j = common; j + 1 < eval.size(); ++j)
    for (std::size_t k = common; k + 1 < training.size(); ++k) {
      // Where the stacks part, the same function at two lines is the loop both statements are in.
      if ((j == common && k == common) || !same_function(snapshot, eval[j], training[k])) continue;
      // Equal below it down to the first frame outside torch (the callee's own code), or to the
      // eval's innermost frame.
      std::size_t t = 1;
      bool equal = true;
      while (j + t < eval.size()) {
        equal = k + t < training.size() && eval[j + t] == training[k + t];
        if (!equal || !torch_frame(snapshot, eval[j + t])) break;
        ++t;
      }
      if (equal) {
        const auto at = training.begin() + static_cast<std::ptrdiff_t>(k);
        return SharedCall{j, {training.begin(), at}, training[k]};
      }
    }
  return std::nullopt;
}

/// The frames run `function` called from below `prefix`.
bool under(const snapshot::Snapshot& snapshot, const std::vector<FrameId>& frames, std::span<const FrameId> prefix,
           FrameId function) {
  return frames.size() > prefix.size() && std::equal(prefix.begin(), prefix.end(), frames.begin()) &&
         same_function(snapshot, frames[prefix.size()], function);
}

/// The step's backward pass or optimizer: no Python frames (autograd's engine thread), or
/// through torch.autograd, Tensor.backward or torch.optim.
bool backward_or_optimizer(const snapshot::Snapshot& snapshot, const std::vector<FrameId>& frames) {
  if (frames.empty()) return true;
  return std::any_of(frames.begin(), frames.end(), [&](FrameId f) {
    const std::string_view inside = torch_path(snapshot.strings.view(snapshot.stacks.frame(f).filename));
    return inside.starts_with("autograd/") || inside.starts_with("_tensor.py") || inside.starts_with("optim/");
  });
}

/// What aligns an allocation of the eval with one of the training: its innermost frame outside
/// torch (the statement of the model or the program) and its innermost frame (the op).
std::uint64_t key_of(const snapshot::Snapshot& snapshot, const std::vector<FrameId>& frames) {
  std::uint32_t outside = kNone;
  for (auto it = frames.rbegin(); it != frames.rend(); ++it)
    if (!torch_frame(snapshot, *it)) {
      outside = *it;
      break;
    }
  return (std::uint64_t{outside} << 32) | (frames.empty() ? kNone : frames.back());
}

/// One training call of the shared function: its allocations, then those of the step's
/// statements after it up to the backward pass (from `after`).
struct TrainingCall {
  std::vector<std::size_t> events;
  std::size_t after = 0;
};

std::vector<TrainingCall> training_calls(const snapshot::Snapshot& snapshot,
                                         std::span<const snapshot::TraceEvent> trace, FrameCache& frames,
                                         const SharedCall& shared, std::size_t eval_start) {
  std::vector<TrainingCall> calls;
  enum class State { kIdle, kInside, kAfter } state = State::kIdle;
  for (std::size_t i = 0; i < eval_start; ++i) {
    if (trace[i].action != TraceAction::kAlloc) continue;
    const std::vector<FrameId>& f = frames.of(trace[i].stack);
    if (under(snapshot, f, shared.training_prefix, shared.training_frame)) {
      if (state != State::kInside) calls.emplace_back();
      calls.back().events.push_back(i);
      calls.back().after = calls.back().events.size();
      state = State::kInside;
    } else if (state != State::kIdle) {
      if (backward_or_optimizer(snapshot, f)) {
        state = State::kIdle;
      } else {
        calls.back().events.push_back(i);
        state = State::kAfter;
      }
    }
  }
  if (calls.size() > kMaxCalls) calls.erase(calls.begin(), calls.end() - kMaxCalls);
  return calls;
}

/// A training call aligned with the eval's prefix.
struct Reference {
  std::size_t call = 0;
  AlignedPairs pairs;  ///< (eval position, call position)
  double scale = 1.0;  ///< the eval's sizes / the call's
  /// The least and largest ratio of the pairs of 1 MiB or more that grow like the scale (their
  /// logarithm within a quarter of its): linear allocations do not all grow alike (padding,
  /// rounding), so the estimates scale the rest by these, each its own way.
  double scale_low = 1.0;
  double scale_high = 1.0;
};

/// The rest of the eval, from the reference call: sizes and when each block is freed.
class RestModel {
 public:
  RestModel(std::span<const snapshot::TraceEvent> trace, const std::vector<std::size_t>& eval, const TrainingCall& call,
            const std::vector<std::uint64_t>& call_keys, const Reference& reference,
            const std::vector<std::uint32_t>& free_at)
      : trace_(trace),
        eval_(eval),
        call_(call.events),
        keys_(call_keys),
        scale_low_(reference.scale_low),
        scale_high_(reference.scale_high),
        free_at_(free_at) {
    eval_to_call_.assign(eval.size(), kNone);
    call_to_eval_.assign(call_.size(), kNone);
    for (const auto& [i, j] : reference.pairs) {
      eval_to_call_[i] = j;
      call_to_eval_[j] = i;
    }
    failing_ = eval_to_call_.back();
    for (std::size_t p = 0; p < call_.size(); ++p) positions_[keys_[p]].push_back(p);
  }

  std::size_t failing_position() const { return failing_; }
  std::size_t size() const { return call_.size(); }
  std::uint32_t call_position_of(std::size_t eval_position) const { return eval_to_call_[eval_position]; }

  /// The call's own free of position p: the call position before which it happened, or kKept.
  std::size_t training_free(std::size_t p) const {
    const std::uint32_t f = free_at_[call_[p]];
    if (f == kNone) return kKept;
    const auto x = static_cast<std::size_t>(std::upper_bound(call_.begin(), call_.end(), f) - call_.begin());
    return x < call_.size() ? x : kKept;
  }
  /// How many call positions eval position a lived, when the eval freed it before the OOM.
  std::optional<std::size_t> eval_lifetime(std::size_t a) const {
    const std::uint32_t f = free_at_[eval_[a]];
    if (f == kNone || eval_to_call_[a] == kNone) return std::nullopt;
    auto x = static_cast<std::size_t>(std::upper_bound(eval_.begin(), eval_.end(), f) - eval_.begin());
    while (x < eval_.size() && eval_to_call_[x] == kNone) ++x;
    if (x == eval_.size()) return std::nullopt;
    return eval_to_call_[x] - eval_to_call_[a];
  }
  /// An earlier position of the call that the eval ran, like p (same frames, size and lifetime
  /// in the call), preferring one the eval freed and the same neighbours; nullopt when none.
  std::optional<std::size_t> like(std::size_t p, std::size_t before) const {
    const auto& candidates = positions_.at(keys_[p]);
    const std::size_t own = lifetime(p);
    const auto neighbours = [&](std::size_t q) {
      return (q == 0 || keys_[q - 1] == keys_[p - 1]) &&
             (q + 1 >= keys_.size() || p + 1 >= keys_.size() || keys_[q + 1] == keys_[p + 1]);
    };
    for (const bool want_freed : {true, false})
      for (const bool want_neighbours : {true, false})
        for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
          const std::size_t q = *it;
          if (q >= before || call_to_eval_[q] == kNone || trace_[call_[q]].size != trace_[call_[p]].size ||
              lifetime(q) != own)
            continue;
          if (want_neighbours && p > 0 && !neighbours(q)) continue;
          if (want_freed && !eval_lifetime(call_to_eval_[q])) continue;
          return q;
        }
    return std::nullopt;
  }
  /// Size of position p in the eval: its like's, else the call's times the scale (the largest
  /// of the linear ratios for the upper estimate, the least for the lower).
  std::uint64_t eval_size(std::size_t p, std::optional<std::size_t> like_q, bool upper) const {
    if (like_q) return trace_[eval_[call_to_eval_[*like_q]]].size;
    return static_cast<std::uint64_t>(
        std::ceil(static_cast<double>(trace_[call_[p]].size) * (upper ? scale_high_ : scale_low_)));
  }
  /// Where the eval frees position p: where its like's lifetime ends, or the call's own free,
  /// whichever is first; kKept when neither tells.
  std::size_t eval_free(std::size_t p, std::optional<std::size_t> like_q) const {
    std::size_t x = training_free(p);
    if (like_q)
      if (const auto life = eval_lifetime(call_to_eval_[*like_q])) x = std::min(x, p + std::max<std::size_t>(*life, 1));
    return x;
  }

 private:
  std::size_t lifetime(std::size_t p) const {
    const std::size_t x = training_free(p);
    return x == kKept ? kKept : x - p;
  }
  std::span<const snapshot::TraceEvent> trace_;
  const std::vector<std::size_t>& eval_;
  const std::vector<std::size_t>& call_;
  const std::vector<std::uint64_t>& keys_;
  double scale_low_;
  double scale_high_;
  const std::vector<std::uint32_t>& free_at_;
  std::vector<std::uint32_t> eval_to_call_;
  std::vector<std::uint32_t> call_to_eval_;
  std::size_t failing_ = 0;
  std::unordered_map<std::uint64_t, std::vector<std::size_t>> positions_;
};

/// Frees scheduled at a call position, earliest first.
using FreeQueue = std::priority_queue<std::pair<std::size_t, std::uint32_t>,
                                      std::vector<std::pair<std::size_t, std::uint32_t>>, std::greater<>>;

}  // namespace

ProjectedStep project_eval_from_training(const replay::PreparedTrace& prepared, const snapshot::Snapshot& snapshot,
                                         int device, const RecordedCurve& curve, std::size_t oom_index,
                                         std::size_t eval_start, const std::string& statement) {
  ProjectedStep out;
  TraceStepProjection& p = out.figures;
  p.unit_statement = statement;
  p.eval_units = true;
  p.from_training_call = true;
  const auto trace = snapshot.trace(device);
  if (curve.allocated.size() != trace.size() || prepared.trace_events != trace.size() || eval_start > oom_index) {
    p.unavailable_reason = "the trace and its replay do not match";
    return out;
  }
  FrameCache frames(snapshot);
  const std::vector<FrameId> failing = frames.of(trace[oom_index].stack);

  // Each block's free before the OOM, by its allocating event.
  std::vector<std::uint32_t> free_at(oom_index + 1, kNone);
  {
    std::unordered_map<std::uint64_t, std::uint32_t> allocated_at;
    for (std::size_t i = 0; i < oom_index; ++i) {
      if (trace[i].action == TraceAction::kAlloc) {
        allocated_at[trace[i].addr] = static_cast<std::uint32_t>(i);
      } else if (trace[i].action == TraceAction::kFreeCompleted) {
        if (const auto it = allocated_at.find(trace[i].addr); it != allocated_at.end()) {
          free_at[it->second] = static_cast<std::uint32_t>(i);
          allocated_at.erase(it);
        }
      }
    }
  }

  // The shared function: from the newest training allocations back, the first whose calls align.
  std::optional<SharedCall> shared;
  std::vector<std::size_t> eval;  // the eval's allocations under it, the failing malloc last
  std::vector<std::uint64_t> eval_keys;
  std::vector<TrainingCall> calls;
  std::vector<std::vector<std::uint64_t>> call_keys;
  std::optional<Reference> reference;
  std::vector<std::pair<std::size_t, FrameId>> tried;  // (eval depth, training frame)
  std::unordered_set<StackId> examined;                // a stack tells the same every time
  for (std::size_t i = eval_start; i-- > 0 && !reference && tried.size() < kMaxSharedCalls;) {
    if (trace[i].action != TraceAction::kAlloc || !examined.insert(trace[i].stack).second) continue;
    const std::vector<FrameId>& training = frames.of(trace[i].stack);
    if (std::any_of(training.begin(), training.end(), [&](FrameId f) {
          const snapshot::Frame& frame = snapshot.stacks.frame(f);
          return torch_path(snapshot.strings.view(frame.filename)).empty() &&
                 names_evaluation(snapshot.strings.view(frame.name));
        }))
      continue;  // the evaluation's own allocations (its set-up) are not the training's
    shared = shared_call(snapshot, failing, training);
    if (!shared) continue;
    const std::pair<std::size_t, FrameId> id{shared->eval_depth, shared->training_frame};
    if (std::any_of(tried.begin(), tried.end(), [&](const auto& t) {
          return t.first == id.first && same_function(snapshot, t.second, id.second);
        }))
      continue;
    tried.push_back(id);

    const std::span<const FrameId> eval_prefix(failing.data(), shared->eval_depth);
    eval.clear();
    eval_keys.clear();
    for (std::size_t e = eval_start; e < oom_index; ++e) {
      if (trace[e].action != TraceAction::kAlloc) continue;
      const std::vector<FrameId>& f = frames.of(trace[e].stack);
      if (!under(snapshot, f, eval_prefix, failing[shared->eval_depth])) continue;
      eval.push_back(e);
      eval_keys.push_back(key_of(snapshot, f));
    }
    eval.push_back(oom_index);
    eval_keys.push_back(key_of(snapshot, failing));
    std::uint64_t eval_bytes = 0;
    for (const std::size_t e : eval) eval_bytes += trace[e].size;

    calls = training_calls(snapshot, trace, frames, *shared, eval_start);
    call_keys.assign(calls.size(), {});
    for (std::size_t c = calls.size(); c-- > 0;) {
      for (const std::size_t e : calls[c].events) call_keys[c].push_back(key_of(snapshot, frames.of(trace[e].stack)));
      const std::size_t window = std::min(calls[c].events.size(), eval.size() * 3 / 2 + 64);
      auto pairs = align_sequences(
          eval.size(), window, [&](std::size_t a, std::size_t b) { return eval_keys[a] == call_keys[c][b]; },
          kMaxEdits);
      if (!pairs || pairs->empty() || pairs->back().first + 1 != eval.size()) continue;
      std::uint64_t matched = 0;
      bool sized = false;
      for (const auto& [a, b] : *pairs) {
        matched += trace[eval[a]].size;
        sized |= trace[eval[a]].size >= kScaleMinBytes && trace[calls[c].events[b]].size >= kScaleMinBytes;
      }
      if (!sized || static_cast<double>(matched) < kMinMatchedShare * static_cast<double>(eval_bytes)) continue;
      const double scale = 1.0 / size_scale(
                                     *pairs, [&](std::size_t a) { return trace[eval[a]].size; },
                                     [&](std::size_t b) { return trace[calls[c].events[b]].size; });
      if (reference && std::abs(std::log(scale)) >= std::abs(std::log(reference->scale))) continue;
      reference = Reference{c, std::move(*pairs), scale, scale, scale};
      for (const auto& [a, b] : reference->pairs) {
        const std::uint64_t sa = trace[eval[a]].size, sb = trace[calls[c].events[b]].size;
        if (sa < kScaleMinBytes || sb < kScaleMinBytes) continue;
        const double ratio = static_cast<double>(sa) / static_cast<double>(sb);
        if (std::abs(std::log(ratio) - std::log(scale)) > 0.25 * std::abs(std::log(scale))) continue;
        reference->scale_low = std::min(reference->scale_low, ratio);
        reference->scale_high = std::max(reference->scale_high, ratio);
      }
    }
  }
  if (!reference) {
    p.unavailable_reason =
        "no training call allocates like the eval up to the failing malloc (no function the eval calls is also "
        "called by a training step the trace holds, or its allocations differ)";
    return out;
  }
  const TrainingCall& call = calls[reference->call];
  const RestModel rest(trace, eval, call, call_keys[reference->call], *reference, free_at);
  const std::size_t failing_position = rest.failing_position();
  p.shared_function = fmt::format(
      "{} in {}", file_name_of(snapshot.strings.view(snapshot.stacks.frame(shared->training_frame).filename)),
      snapshot.strings.view(snapshot.stacks.frame(shared->training_frame).name));
  p.training_call =
      shared->training_prefix.empty() ? std::string() : describe_frame(snapshot, shared->training_prefix.back());
  p.earlier_units = calls.size();
  p.reference_unit = reference->call + 1;
  p.reference_first_event = call.events.front();
  p.reference_end_event = call.events.back() + 1;
  p.aligned_event = call.events[failing_position];
  p.prefix_allocations = eval.size();
  p.matched_allocations = reference->pairs.size();
  p.scale = reference->scale;
  p.start_level_bytes = eval_start > 0 ? curve.allocated[eval_start - 1] : 0;
  // Live before the failing malloc (an `oom` entry changes nothing; a cut at a served malloc, as
  // the validation makes, already counts it) and the request.
  p.live_at_oom_bytes =
      curve.allocated[oom_index] + (trace[oom_index].action == TraceAction::kAlloc ? 0 : trace[oom_index].size);

  const std::vector<std::uint32_t> op_of_event = replay::malloc_op_of_event(prepared);
  const std::uint32_t oom_op = op_of_event[oom_index];
  if (oom_op == kNone ||
      std::any_of(call.events.begin(), call.events.end(), [&](std::size_t e) { return op_of_event[e] == kNone; })) {
    p.unavailable_reason = "the failing malloc or the training call is not in the replayed trace";
    return out;
  }
  // The eval's blocks live at the OOM, by the slot that holds them.
  std::unordered_map<std::size_t, std::uint32_t> slot_of_event;
  {
    std::vector<std::uint32_t> event_in_slot(prepared.slot_count, kNone);
    for (std::uint32_t k = 0; k < oom_op; ++k) {
      const Op& op = prepared.ops[k];
      if (op.kind == OpKind::kAlloc)
        event_in_slot[op.slot] = op.trace_index;
      else if (op.kind == OpKind::kFree || op.kind == OpKind::kFreeCompleted)
        event_in_slot[op.slot] = kNone;
    }
    const std::unordered_set<std::size_t> in_eval(eval.begin(), eval.end());
    for (std::uint32_t slot = 0; slot < event_in_slot.size(); ++slot)
      if (event_in_slot[slot] != kNone && in_eval.contains(event_in_slot[slot]))
        slot_of_event[event_in_slot[slot]] = slot;
  }

  // The upper estimate, as operations: the eval's live blocks freed where the training freed
  // their counterparts; the rest as RestModel says.
  const SyntheticStart start = start_synthetic_trace(prepared, oom_op, out);
  replay::PreparedTrace& synthetic = out.trace;
  std::uint32_t next_slot = start.served.slot + 1;
  FreeQueue upper;
  std::unordered_map<std::uint32_t, std::uint64_t> size_of_slot;
  const auto level_start = static_cast<double>(p.live_at_oom_bytes);
  double level = level_start, peak = level_start;
  for (std::size_t a = 0; a + 1 < eval.size(); ++a) {
    const auto slot = slot_of_event.find(eval[a]);
    const std::uint32_t position = rest.call_position_of(a);
    if (slot == slot_of_event.end() || position == kNone) continue;
    size_of_slot[slot->second] = trace[eval[a]].size;
    if (const std::size_t x = rest.training_free(position); x != kKept)
      upper.emplace(std::max(x, failing_position + 1), slot->second);
  }
  size_of_slot[start.served.slot] = trace[oom_index].size;
  const auto like_of_failing = rest.like(failing_position, failing_position);
  if (const std::size_t x = rest.eval_free(failing_position, like_of_failing); x != kKept)
    upper.emplace(x, start.served.slot);
  for (std::size_t position = failing_position + 1; position < rest.size(); ++position) {
    while (!upper.empty() && upper.top().first <= position) {
      Op free_op = start.served;
      free_op.kind = OpKind::kFree;
      free_op.slot = upper.top().second;
      free_op.segment_end = start.segment_end;
      free_op.hint_end = start.hint_end;
      free_op.trace_index = static_cast<std::uint32_t>(oom_index);
      synthetic.ops.push_back(free_op);
      level -= static_cast<double>(size_of_slot[free_op.slot]);
      upper.pop();
    }
    const auto like_q = rest.like(position, failing_position);
    Op op = prepared.ops[op_of_event[call.events[position]]];
    op.size = rest.eval_size(position, like_q, true);
    op.slot = next_slot++;
    op.segment_end = start.segment_end;
    op.hint_end = start.hint_end;
    op.trace_index = static_cast<std::uint32_t>(oom_index);
    synthetic.ops.push_back(op);
    size_of_slot[op.slot] = op.size;
    level += static_cast<double>(op.size);
    peak = std::max(peak, level);
    if (like_q && rest.eval_free(position, like_q) != rest.training_free(position)) ++p.learned_lifetimes;
    if (like_q)
      p.other_bytes += op.size;  // sized as the eval made its like
    else
      p.linear_bytes += op.size;  // the call's size times the scale
    if (const std::size_t x = rest.eval_free(position, like_q); x != kKept) upper.emplace(x, op.slot);
  }
  synthetic.slot_count = next_slot;

  // The lower estimate: every block whose lifetime the eval has not shown freed as soon as it is made (before the
  // next allocation), the eval's live blocks where their like's lifetime ends, no cuDNN workspace
  // (replay::Op::elastic: refused, ATen runs a plan that asks for less), nothing after the call.
  FreeQueue lower;
  double low = level_start, low_peak = level_start;
  std::unordered_map<std::uint32_t, std::uint64_t> low_size;  // by key: eval position or rest position + eval.size()
  std::uint32_t low_id = 0;
  const auto schedule = [&](std::size_t at, std::uint64_t bytes) {
    low_size[low_id] = bytes;
    lower.emplace(at, low_id++);
  };
  for (std::size_t a = 0; a + 1 < eval.size(); ++a) {
    const std::uint32_t position = rest.call_position_of(a);
    if (!slot_of_event.contains(eval[a]) || position == kNone) continue;
    const auto like_q = rest.like(position, position);
    const std::size_t x = rest.eval_free(position, like_q);
    schedule(x == kKept ? failing_position + 1 : std::max(x, failing_position + 1), trace[eval[a]].size);
  }
  {
    const std::size_t x = rest.eval_free(failing_position, like_of_failing);
    schedule(x == kKept ? failing_position + 1 : x, trace[oom_index].size);
  }
  for (std::size_t position = failing_position + 1; position < call.after; ++position) {
    while (!lower.empty() && lower.top().first <= position) {
      low -= static_cast<double>(low_size[lower.top().second]);
      lower.pop();
    }
    const auto like_q = rest.like(position, failing_position);
    const bool elastic = prepared.ops[op_of_event[call.events[position]]].elastic;
    const std::uint64_t bytes = elastic ? 0 : rest.eval_size(position, like_q, false);
    low += static_cast<double>(bytes);
    low_peak = std::max(low_peak, low);
    const std::size_t x = rest.eval_free(position, like_q);
    schedule(x == kKept ? position + 1 : x, bytes);
  }
  p.most_peak_bytes = static_cast<std::uint64_t>(peak);
  p.least_peak_bytes = static_cast<std::uint64_t>(low_peak);
  p.over_bytes = peak > low_peak ? static_cast<std::uint64_t>(peak - low_peak) : 0;
  p.available = true;
  return out;
}

}  // namespace fragscope::diagnose
