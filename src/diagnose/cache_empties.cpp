#include "diagnose/cache_empties.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "diagnose/oom_call_path.h"
#include "diagnose/python_frames.h"

namespace fragscope::diagnose {
namespace {

using snapshot::TraceAction;

struct StackKind {
  bool empties = false;  ///< a frame of torch/cuda/memory.py's empty_cache
  std::string frame;     ///< the program's frame that called it
};

StackKind kind_of(const snapshot::Snapshot& snapshot, snapshot::StackId stack) {
  StackKind kind;
  const std::vector<snapshot::FrameId> python = python_frames(snapshot, stack);  // outermost first
  for (std::size_t i = 0; i < python.size(); ++i) {
    const snapshot::Frame& f = snapshot.stacks.frame(python[i]);
    if (torch_path(snapshot.strings.view(f.filename)) == "cuda/memory.py" &&
        snapshot.strings.view(f.name) == "empty_cache") {
      kind.empties = true;
      if (i > 0) kind.frame = describe_frame(snapshot, python[i - 1]);
      break;
    }
  }
  return kind;
}

}  // namespace

CacheEmpties find_cache_empties(const snapshot::Snapshot& snapshot, int device, std::size_t until) {
  const auto trace = snapshot.trace(device);
  std::unordered_map<snapshot::StackId, StackKind> kinds;
  CacheEmpties out;
  bool in_call = false;
  snapshot::StackId call_stack = 0;
  for (std::size_t i = 0; i < std::min(until, trace.size()); ++i) {
    const snapshot::TraceEvent& e = trace[i];
    const bool release = e.action == TraceAction::kSegmentFree || e.action == TraceAction::kSegmentUnmap;
    if (!release) {
      in_call = false;
      continue;
    }
    if (e.stack == 0) continue;  // a release without a stack neither begins nor ends a call
    auto [it, fresh] = kinds.try_emplace(e.stack);
    if (fresh) it->second = kind_of(snapshot, e.stack);
    if (!it->second.empties) {
      in_call = false;
      continue;
    }
    if (!in_call || e.stack != call_stack) ++out.calls;
    in_call = true;
    call_stack = e.stack;
    out.released_bytes += e.size;
    out.frame = it->second.frame;
  }
  return out;
}

}  // namespace fragscope::diagnose
