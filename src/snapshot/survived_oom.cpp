#include "snapshot/survived_oom.h"

#include <array>

namespace fragscope::snapshot {
namespace {

// ATen's functions that allocate where their callers catch c10::OutOfMemoryError (survived_oom.h), as the unwinder
// demangles them: the name ends the qualified name before the parameter list.
constexpr std::array<std::string_view, 4> kAtenCatchers = {"run_conv_plan", "run_conv_plan_fused",
                                                           "generate_and_filter_plans", "try_all"};

// The function of a demangled C++ frame, "at::native::run_conv_plan(cudnnContext*, ...)" -> "run_conv_plan", when
// it is ATen's (at::native, AlgoIterator<...>::try_all for try_all); empty otherwise.
std::string_view aten_function(std::string_view frame) {
  if (!frame.starts_with("at::native::")) return {};
  constexpr std::string_view kAnonymous = "(anonymous namespace)";
  std::size_t params = frame.find('(');
  while (params != std::string_view::npos && frame.substr(params).starts_with(kAnonymous))
    params = frame.find('(', params + kAnonymous.size());
  if (params == std::string_view::npos) return {};
  const std::string_view qualified = frame.substr(0, params);
  const std::size_t last = qualified.rfind("::");
  const std::string_view function = qualified.substr(last + 2);
  if (function == "try_all" && qualified.find("AlgoIterator<") == std::string_view::npos) return {};
  return function;
}

}  // namespace

std::string_view aten_oom_catcher(const Snapshot& snapshot, const TraceEvent& event) {
  if (event.stack >= snapshot.stacks.stack_count()) return {};
  for (const FrameId id : snapshot.stacks.stack(event.stack)) {
    const std::string_view function = aten_function(snapshot.strings.view(snapshot.stacks.frame(id).name));
    for (const std::string_view catcher : kAtenCatchers)
      if (function == catcher) return catcher;
  }
  return {};
}

bool hides_aten_catchers(const Snapshot& snapshot) {
  bool any_frame = false;
  bool convolution = false;
  for (FrameId id = 0; id < snapshot.stacks.frame_count(); ++id) {
    const Frame& frame = snapshot.stacks.frame(id);
    const std::string_view file = snapshot.strings.view(frame.filename);
    const std::string_view name = snapshot.strings.view(frame.name);
    if (file.empty() && name.empty()) continue;  // the table's empty frame
    any_frame = true;
    if (!file.ends_with(".py")) return false;  // the unwinder's C++ frames are recorded
    convolution = convolution || file.ends_with("torch/nn/modules/conv.py");
  }
  return !any_frame || convolution;
}

std::optional<std::size_t> fatal_oom_index(const Snapshot& snapshot, int device, RunEnd end) {
  const auto trace = snapshot.trace(device);
  for (std::size_t i = trace.size(); i-- > 0;) {
    if (trace[i].action == TraceAction::kAlloc) return std::nullopt;
    if (trace[i].action == TraceAction::kOom) {
      if (end != RunEnd::kCudnnFoundNoPlan && !aten_oom_catcher(snapshot, trace[i]).empty()) return std::nullopt;
      return i;
    }
  }
  return std::nullopt;
}

SurvivedOoms survived_ooms(const Snapshot& snapshot, int device, RunEnd end) {
  const auto trace = snapshot.trace(device);
  const std::optional<std::size_t> fatal = fatal_oom_index(snapshot, device, end);
  SurvivedOoms s;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    if (trace[i].action != TraceAction::kOom || i == fatal) continue;
    ++s.count;
    if (const std::string_view catcher = aten_oom_catcher(snapshot, trace[i]); !catcher.empty()) {
      ++s.caught_by_aten;
      s.last_catcher = catcher;
    }
  }
  return s;
}

}  // namespace fragscope::snapshot
