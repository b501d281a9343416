#include "diagnose/oom_call_path.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "diagnose/optimizer_code.h"
#include "diagnose/python_frames.h"
#include "util/file_name.h"
#include "util/shown_text.h"

namespace fragscope::diagnose {
namespace {

using snapshot::FrameId;
using snapshot::StackId;

/// The program's call path of `stack`, outermost first: its Python frames when it has any (with
/// stacks="all" the C++ frames around them, `_start` and the interpreter's, interleave differently
/// from one allocation to the next), else all its frames (autograd's thread has no Python frames).
std::vector<FrameId> program_frames(const snapshot::Snapshot& snapshot, StackId stack) {
  std::vector<FrameId> python = python_frames(snapshot, stack);
  if (!python.empty()) return python;
  const auto frames = snapshot.stacks.stack(stack);
  return {frames.rbegin(), frames.rend()};
}

std::size_t common_prefix(const std::vector<FrameId>& a, const std::vector<FrameId>& b) {
  const std::size_t n = std::min(a.size(), b.size());
  std::size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

bool file_contains(const snapshot::Snapshot& snapshot, FrameId frame, std::string_view text) {
  return snapshot.strings.view(snapshot.stacks.frame(frame).filename).find(text) != std::string_view::npos;
}

/// The stack runs through torch.nn.Module.__call__ (a model's forward).
bool through_module_forward(const snapshot::Snapshot& snapshot, StackId stack) {
  for (const FrameId frame : snapshot.stacks.stack(stack))
    if (file_contains(snapshot, frame, "torch/nn/modules/module.py")) return true;
  return false;
}

bool name_contains(const snapshot::Snapshot& snapshot, FrameId frame, std::string_view text) {
  return snapshot.strings.view(snapshot.stacks.frame(frame).name).find(text) != std::string_view::npos;
}

/// Made on autograd's engine thread: C++ frames naming torch::autograd:: and no Python frame, or no frames at all (a
/// trace recorded with stacks="python" gives that thread none).
bool made_on_autograd_thread(const snapshot::Snapshot& snapshot, StackId stack) {
  const auto frames = snapshot.stacks.stack(stack);
  if (frames.empty()) return true;
  if (!python_frames(snapshot, stack).empty()) return false;
  return std::any_of(frames.begin(), frames.end(),
                     [&](FrameId f) { return name_contains(snapshot, f, "torch::autograd::"); });
}

}  // namespace

std::string describe_frame(const snapshot::Snapshot& snapshot, FrameId frame) {
  const snapshot::Frame& f = snapshot.stacks.frame(frame);
  return fmt::format("{}:{} in {}", shown_name(file_name_of(snapshot.strings.view(f.filename))), f.line_text(),
                     shown_name(snapshot.strings.view(f.name)));
}

OomCallPath analyze_oom_call_path(const snapshot::Snapshot& snapshot, int device, std::size_t oom_index,
                                  std::optional<double> median_step_ms) {
  OomCallPath path;
  const auto trace = snapshot.trace(device);
  const StackId oom_stack = trace[oom_index].stack;
  if (oom_stack == 0 || snapshot.stacks.stack(oom_stack).empty()) return path;
  path.has_stack = true;
  const std::vector<FrameId> own_frames = program_frames(snapshot, oom_stack);
  const std::vector<FrameId> python = python_frames(snapshot, oom_stack);
  path.backward = made_on_autograd_thread(snapshot, oom_stack);  // the stack has frames: autograd's C++ ones
  path.innermost = !python.empty() ? describe_frame(snapshot, python.back())
                   : path.backward ? std::string("the backward pass (autograd's engine thread: no Python frames)")
                                   : describe_frame(snapshot, own_frames.back());
  // Autograd's thread dispatches one node after another: its frames diverge per layer, not per
  // step. Its malloc runs inside the program's backward() call, after the program's last
  // allocation with Python frames: that allocation's path stands for the OOM's.
  std::vector<FrameId> oom = own_frames;
  if (path.backward) {
    std::unordered_set<StackId> without_python;  // the backward's own stacks, met again and again
    for (std::size_t i = oom_index; i-- > 0;) {
      const snapshot::TraceEvent& e = trace[i];
      if (e.action != snapshot::TraceAction::kAlloc || e.stack == 0 || without_python.contains(e.stack)) continue;
      if (std::vector<FrameId> program = python_frames(snapshot, e.stack); !program.empty()) {
        oom = std::move(program);
        break;
      }
      without_python.insert(e.stack);
    }
  }
  path.model_forward = through_module_forward(snapshot, oom_stack);
  path.optimizer = made_by_optimizer(snapshot, oom_stack);
  for (const FrameId frame : oom) {
    path.serialization |= file_contains(snapshot, frame, "torch/serialization.py") ||
                          file_contains(snapshot, frame, "checkpoint/") ||
                          name_contains(snapshot, frame, "state_dict");
  }

  // Each distinct stack's call path and common prefix with the OOM's (stacks are shared, so this is cheap).
  std::unordered_map<StackId, std::vector<FrameId>> path_of;
  const auto call_path = [&](StackId stack) -> const std::vector<FrameId>& {
    const auto [it, added] = path_of.try_emplace(stack);
    if (added) it->second = program_frames(snapshot, stack);
    return it->second;
  };
  std::unordered_map<StackId, std::size_t> prefix_of;
  auto prefix = [&](StackId stack) {
    const auto [it, added] = prefix_of.try_emplace(stack, 0);
    if (added) it->second = common_prefix(oom, call_path(stack));
    return it->second;
  };
  // Depth of each allocation's shared prefix with the OOM stack, in trace order (allocations
  // without frames skipped; 0 for another thread), the OOM itself last with its full depth.
  const auto for_each_depth = [&](auto&& visit) {
    for (std::size_t i = 0; i <= oom_index; ++i) {
      const snapshot::TraceEvent& e = trace[i];
      if (i < oom_index && (e.action != snapshot::TraceAction::kAlloc || e.stack == 0)) continue;
      const std::size_t depth = i == oom_index ? oom.size() : prefix(e.stack);
      if (depth != 0) visit(i, depth);
    }
  };
  std::size_t loop_depth = oom.size();  // C: the shallowest divergence among same-thread stacks
  for_each_depth([&](std::size_t, std::size_t depth) { loop_depth = std::min(loop_depth, depth); });
  // Episodes of every loop-level statement (each stack's frame just below the common prefix).
  std::unordered_map<FrameId, std::size_t> statement_episodes;
  std::optional<FrameId> previous_statement;
  for (std::size_t i = 0; i < oom_index && !path.loop_repeats; ++i) {
    const snapshot::TraceEvent& e = trace[i];
    if (e.action != snapshot::TraceAction::kAlloc || e.stack == 0 || prefix(e.stack) == 0) continue;
    const std::vector<FrameId>& frames = call_path(e.stack);
    if (frames.size() <= loop_depth) continue;
    const FrameId statement = frames[loop_depth];
    if (previous_statement != statement) path.loop_repeats |= ++statement_episodes[statement] >= 2;
    previous_statement = statement;
  }
  const std::size_t statement_depth = std::min(loop_depth + 1, oom.size());
  path.statement = describe_frame(snapshot, oom[statement_depth - 1]);
  // The statement's episodes: each begins at an allocation under it after one that was not.
  bool inside = false;
  for_each_depth([&](std::size_t i, std::size_t depth) {
    if (depth >= statement_depth && !inside) path.episode_starts.push_back(i);
    inside = depth >= statement_depth;
  });
  path.episodes = path.episode_starts.size();
  if (!path.episode_starts.empty()) {
    std::unordered_map<StackId, std::pair<bool, bool>> through;  // stack → (module forward, optimizer)
    for (std::size_t i = path.episode_starts.back(); i < oom_index; ++i) {
      const snapshot::TraceEvent& e = trace[i];
      if (e.action != snapshot::TraceAction::kAlloc || e.stack == 0 || prefix(e.stack) < statement_depth) continue;
      auto [it, added] = through.try_emplace(e.stack, false, false);
      if (added) it->second = {through_module_forward(snapshot, e.stack), made_by_optimizer(snapshot, e.stack)};
      path.episode_forward |= it->second.first;
      path.episode_optimizer |= it->second.second;
    }
  }
  if (!path.episode_starts.empty()) path.statement_first_seen = path.episode_starts.front();
  std::unordered_map<StackId, bool> trains;  // stack → made by autograd's thread or an optimizer
  for (std::size_t i = 0; i < path.statement_first_seen.value_or(oom_index) && !path.trained_before; ++i) {
    const snapshot::TraceEvent& e = trace[i];
    if (e.action != snapshot::TraceAction::kAlloc) continue;
    const auto [it, added] = trains.try_emplace(e.stack, false);
    if (added) it->second = made_on_autograd_thread(snapshot, e.stack) || made_by_optimizer(snapshot, e.stack);
    path.trained_before = it->second;
  }
  if (path.statement_first_seen) {
    const std::int64_t first = trace[*path.statement_first_seen].time_us;
    const std::int64_t last = trace[oom_index].time_us;
    if (first > 0 && last >= first) path.statement_span_ms = static_cast<double>(last - first) / 1000.0;
  }
  const bool wraps_steps = median_step_ms && *median_step_ms > 0 &&
                           path.statement_span_ms > kWrapperSteps * *median_step_ms && path.episode_optimizer;
  path.repeated = path.episodes >= 2 || wraps_steps;
  return path;
}

}  // namespace fragscope::diagnose
