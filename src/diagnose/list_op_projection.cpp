#include "diagnose/list_op_projection.h"

#include <unordered_map>
#include <vector>

#include "diagnose/oom_call_path.h"
#include "diagnose/optimizer_code.h"
#include "diagnose/trace_size.h"

namespace fragscope::diagnose {
namespace {

using snapshot::StackId;
using snapshot::TraceAction;

std::string site_of(const snapshot::Snapshot& snapshot, StackId stack) {
  const auto frames = snapshot.stacks.stack(stack);
  return frames.empty() ? std::string("(no frames)") : describe_frame(snapshot, frames.front());  // innermost first
}

}  // namespace

ListOpProjection project_failing_list_op(const snapshot::Snapshot& snapshot, int device, const RecordedCurve& curve,
                                         std::size_t oom_index, std::uint64_t private_pool_idle_bytes) {
  ListOpProjection p;
  const auto trace = snapshot.trace(device);
  const snapshot::TraceEvent& oom = trace[oom_index];
  const std::optional<std::size_t> first = optimizer_step_start(snapshot, trace, oom_index);
  if (!first) {
    p.unavailable_reason = "the failing malloc was not made by torch/optim code";
    return p;
  }
  p.site = site_of(snapshot, oom.stack);
  // Sizes per allocation site over the optimizer step that ends at the OOM, in order.
  std::unordered_map<StackId, std::vector<std::uint64_t>> sizes;
  std::vector<StackId> sites;  // in order of first allocation
  for (std::size_t i = *first; i < oom_index; ++i) {
    const snapshot::TraceEvent& e = trace[i];
    if (e.action != TraceAction::kAlloc || e.stack == 0) continue;
    auto [it, added] = sizes.try_emplace(e.stack);
    if (added) sites.push_back(e.stack);
    it->second.push_back(e.size);
  }
  std::vector<std::uint64_t> failing = sizes.contains(oom.stack) ? sizes[oom.stack] : std::vector<std::uint64_t>{};
  failing.push_back(oom.size);
  for (const StackId site : sites) {
    if (site == oom.stack) continue;
    const std::vector<std::uint64_t>& list = sizes[site];
    if (list.size() < failing.size()) continue;
    bool prefix = true;
    for (std::size_t k = 0; k < failing.size() && prefix; ++k) prefix = same_trace_size(list[k], failing[k]);
    if (!prefix) continue;
    p.available = true;
    p.list_site = site_of(snapshot, site);
    p.done = failing.size() - 1;
    p.total = list.size();
    for (std::size_t k = p.done; k < list.size(); ++k) p.remaining_bytes += list[k];
    p.private_pool_idle_bytes = private_pool_idle_bytes;
    p.projected_peak_bytes = curve.allocated[oom_index] + private_pool_idle_bytes + p.remaining_bytes;
    return p;
  }
  p.unavailable_reason = "no earlier allocation site of this optimizer step allocated a list of the same sizes";
  return p;
}

}  // namespace fragscope::diagnose
