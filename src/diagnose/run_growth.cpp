#include "diagnose/run_growth.h"

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>
#include <vector>

#include "diagnose/oom_call_path.h"
#include "diagnose/python_frames.h"

namespace fragscope::diagnose {
namespace {

using snapshot::StackId;
using snapshot::TraceAction;

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

}  // namespace

RunGrowth find_run_growth(const snapshot::Snapshot& snapshot, int device, std::size_t oom_index,
                          const TraceUnits& units) {
  const std::vector<std::size_t>& starts = units.starts;
  if (starts.size() < kMinGrowingSteps + 2) return {};
  const auto trace = snapshot.trace(device);
  std::unordered_map<std::uint64_t, std::size_t> live;  // address → allocating event
  for (std::size_t i = 0; i < oom_index && i < trace.size(); ++i) {
    if (trace[i].action == TraceAction::kAlloc)
      live[trace[i].addr] = i;
    else if (trace[i].action == TraceAction::kFreeCompleted)
      live.erase(trace[i].addr);
  }
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
  // Newest first: the stacks that left blocks in every span so far, and the least any span left from them.
  std::map<StackId, std::uint64_t> common = left[spans - 1];
  std::size_t counted = 0;
  std::uint64_t least = 0;
  std::map<StackId, std::uint64_t> counted_common;
  for (std::size_t k = spans; k-- > oldest;) {
    std::map<StackId, std::uint64_t> next;
    for (const auto& [stack, bytes] : common)
      if (left[k].contains(stack)) next.emplace(stack, bytes);
    std::uint64_t smallest = std::numeric_limits<std::uint64_t>::max();
    for (std::size_t j = k; j < spans; ++j) {
      std::uint64_t sum = 0;
      for (const auto& [stack, _] : next)
        if (const auto it = left[j].find(stack); it != left[j].end()) sum += it->second;
      smallest = std::min(smallest, sum);
    }
    if (next.empty() || smallest < kMinGrowthBytes) break;
    common = std::move(next);
    counted = spans - k;
    least = smallest;
    counted_common = common;
  }
  if (counted < kMinGrowingSteps || 2 * counted < spans - oldest) return {};
  RunGrowth growth;
  growth.per_step_bytes = least;
  growth.steps = counted;
  std::map<StackId, std::uint64_t> kept;  // from the common stacks, allocated before the failing unit
  for (const auto& [address, event] : live)
    if (event >= starts.front() && event < starts.back() && counted_common.contains(trace[event].stack))
      kept[trace[event].stack] += trace[event].size;
  for (const auto& [stack, bytes] : kept) growth.kept_bytes += bytes;
  const auto most = std::max_element(kept.begin(), kept.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
  if (most != kept.end()) growth.frame = program_frame(snapshot, most->first);
  return growth;
}

}  // namespace fragscope::diagnose
