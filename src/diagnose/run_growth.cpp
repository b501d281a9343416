#include "diagnose/run_growth.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "diagnose/oom_call_path.h"
#include "diagnose/python_frames.h"

namespace fragscope::diagnose {
namespace {

using snapshot::StackId;

constexpr std::size_t kMaxSpans = 64;

/// The innermost Python frame outside torch (the program's line that made the block), else the innermost one.
std::string program_frame(const snapshot::Snapshot& snapshot, StackId stack) {
  if (stack == 0) return {};
  const std::vector<snapshot::FrameId> python = python_frames(snapshot, stack);
  for (auto it = python.rbegin(); it != python.rend(); ++it)
    if (torch_path(snapshot.strings.view(snapshot.stacks.frame(*it).filename)).empty())
      return describe_frame(snapshot, *it);
  return python.empty() ? std::string() : describe_frame(snapshot, python.back());
}

/// The program frame of the call stack that made the most bytes of `made` (stack → bytes); empty when none.
std::string frame_of_most(const snapshot::Snapshot& snapshot, const std::map<StackId, std::uint64_t>& made) {
  const auto most = std::max_element(made.begin(), made.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
  return most == made.end() ? std::string() : program_frame(snapshot, most->first);
}

/// A tensor remade larger at every unit (RunGrowth::regrown): the live level at each unit's start, newest first,
/// rising by kMinGrowthBytes or more each time.
RunGrowth find_regrown(const snapshot::Snapshot& snapshot, std::span<const snapshot::TraceEvent> trace,
                       const std::unordered_map<std::uint64_t, std::size_t>& live, const TraceUnits& units) {
  const std::vector<std::size_t>& starts = units.starts;
  std::vector<std::int64_t> level_at_start;  // relative to the first unit's start
  std::vector<std::int64_t> unit_peak;       // the most live within each unit (the failing one's up to its OOM)
  level_at_start.reserve(starts.size());
  unit_peak.reserve(starts.size());
  std::int64_t level = 0;
  std::size_t next = 0;
  for (std::size_t i = starts.front(); next < starts.size(); ++i) {
    while (next < starts.size() && starts[next] == i) {
      level_at_start.push_back(level);
      unit_peak.push_back(level);
      ++next;
    }
    if (i >= trace.size()) break;
    if (trace[i].action == snapshot::TraceAction::kAlloc) level += static_cast<std::int64_t>(trace[i].size);
    if (trace[i].action == snapshot::TraceAction::kFreeCompleted) level -= static_cast<std::int64_t>(trace[i].size);
    unit_peak.back() = std::max(unit_peak.back(), level);
  }
  const std::size_t rises = level_at_start.size() - 1;  // one per unit before the failing one
  const std::size_t looked_at = std::min(rises, kMaxSpans);
  std::size_t counted = 0;
  std::int64_t least = std::numeric_limits<std::int64_t>::max();
  for (std::size_t k = rises; k-- > rises - looked_at;) {
    const std::int64_t rise = level_at_start[k + 1] - level_at_start[k];
    if (rise < static_cast<std::int64_t>(kMinGrowthBytes)) break;
    least = std::min(least, rise);
    ++counted;
  }
  if (counted < kMinRegrownSteps || 2 * counted < looked_at) return {};
  RunGrowth growth;
  growth.regrown = true;
  growth.per_step_bytes = static_cast<std::uint64_t>(least);
  // The complete units' peaks over the same steps: torch.cat holds the old tensor and the new one at once, so the
  // peak rises by the remade tensor's whole growth, more than the level between steps (field dqn_*, a replay buffer
  // grown by cat: 20.7 MiB a collection against 13.8).
  std::int64_t least_peak_rise = std::numeric_limits<std::int64_t>::max();
  for (std::size_t k = rises - 1; k > rises - counted; --k)
    least_peak_rise = std::min(least_peak_rise, unit_peak[k] - unit_peak[k - 1]);
  if (least_peak_rise > least)
    growth.peak_per_step_bytes = static_cast<std::uint64_t>(least_peak_rise);
  growth.steps = counted;
  growth.eval_batches = units.eval;
  growth.kept_bytes = static_cast<std::uint64_t>(level_at_start[rises] - level_at_start[rises - counted]);
  std::map<StackId, std::uint64_t> made;  // live at the failing malloc, made in the unit before the failing one
  for (const auto& [address, event] : live)
    if (event >= starts[rises - 1] && event < starts[rises]) made[trace[event].stack] += trace[event].size;
  growth.frame = frame_of_most(snapshot, made);
  return growth;
}

}  // namespace

RunGrowth find_run_growth(const snapshot::Snapshot& snapshot, int device,
                          const std::unordered_map<std::uint64_t, std::size_t>& live, const TraceUnits& units) {
  const std::vector<std::size_t>& starts = units.starts;
  if (starts.size() < kMinGrowingSteps + 2) return {};
  const auto trace = snapshot.trace(device);
  // Span k runs from starts[k] to starts[k + 1]; the last one before the failing unit is left out. The newest
  // kMaxSpans tell (the count is quadratic in them).
  const std::size_t spans = starts.size() - 2;
  const std::size_t oldest = spans > kMaxSpans ? spans - kMaxSpans : 0;
  std::vector<std::map<StackId, std::uint64_t>> left(spans);  // per span: bytes still live, by call stack
  for (const auto& [address, event] : live) {
    if (event < starts.front() || event >= starts[spans]) continue;
    const auto span = static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), event) -
                                               starts.begin()) - 1;
    left[span][trace[event].stack] += trace[event].size;
  }
  // Newest first: the stacks that left blocks in every span counted, and the least any span left from them.
  std::set<StackId> common;
  for (const auto& [stack, _] : left[spans - 1]) common.insert(stack);
  std::size_t counted = 0;
  std::uint64_t least = 0;
  for (std::size_t k = spans; k-- > oldest;) {
    std::set<StackId> next;
    for (const StackId stack : common)
      if (left[k].contains(stack)) next.insert(stack);
    std::uint64_t smallest = std::numeric_limits<std::uint64_t>::max();
    for (std::size_t j = k; j < spans; ++j) {
      std::uint64_t sum = 0;
      for (const StackId stack : next)
        if (const auto it = left[j].find(stack); it != left[j].end()) sum += it->second;
      smallest = std::min(smallest, sum);
    }
    if (next.empty() || smallest < kMinGrowthBytes) break;
    common = std::move(next);
    counted = spans - k;
    least = smallest;
  }
  if (counted < kMinGrowingSteps || 2 * counted < spans - oldest) return find_regrown(snapshot, trace, live, units);
  RunGrowth growth;
  growth.per_step_bytes = least;
  growth.steps = counted;
  growth.eval_batches = units.eval;
  std::map<StackId, std::uint64_t> kept;  // from the common stacks, allocated before the failing unit
  for (const auto& [address, event] : live)
    if (event >= starts.front() && event < starts.back() && common.contains(trace[event].stack))
      kept[trace[event].stack] += trace[event].size;
  for (const auto& [stack, bytes] : kept) growth.kept_bytes += bytes;
  growth.frame = frame_of_most(snapshot, kept);
  return growth;
}

}  // namespace fragscope::diagnose
