#include "diagnose/trace_units.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>

#include "diagnose/oom_call_path.h"
#include "diagnose/python_frames.h"
#include "snapshot/history_start.h"
#include "util/file_name.h"

namespace fragscope::diagnose {
namespace {

using snapshot::FrameId;
using snapshot::StackId;
using snapshot::TraceAction;

/// Frames below which a statement repeats within one pass (per layer, per parameter).
bool inside_a_pass(std::string_view torch_file) {
  return torch_file.starts_with("nn/modules/module.py") || torch_file.starts_with("autograd/") ||
         torch_file.starts_with("_tensor.py") ||  // Tensor.backward
         torch_file.starts_with("optim/") || torch_file.starts_with("utils/checkpoint.py");
}

/// How an allocation's frames relate to the anchor's.
struct Relation {
  std::size_t shared = 0;  ///< leading frames equal to the anchor's
  bool counts = false;     ///< starts or breaks episodes (see the file comment)
};

/// Splits each unit where the Python frames of its first allocation recur (see the caller).
template <typename Frames>
void split_at_recurring_starts(TraceUnits& units, std::span<const snapshot::TraceEvent> trace, Frames& frames) {
  std::vector<std::size_t> starts;
  std::vector<std::size_t> ends;
  for (std::size_t u = 0; u < units.starts.size(); ++u) {
    const std::size_t begin = units.starts[u];
    const std::size_t stop = u + 1 < units.starts.size() ? units.starts[u + 1] : units.anchor + 1;
    const std::vector<FrameId>& first = frames(trace[begin].stack);
    starts.push_back(begin);
    for (std::size_t i = begin + 1; i < stop; ++i) {
      if (trace[i].action != TraceAction::kAlloc || trace[i].stack == 0 || frames(trace[i].stack) != first) continue;
      ends.push_back(i);  // the step before ran to here without leaving the statement
      starts.push_back(i);
    }
    if (u < units.ends.size()) ends.push_back(units.ends[u]);
  }
  units.starts = std::move(starts);
  units.ends = std::move(ends);
}

/// Sets units.later_statement and later_than (see trace_units.h) from the program's allocations before the anchor;
/// `shared(stack)` is how many leading Python frames the stack shares with the anchor's; `ran_before_trace(d)`: the
/// anchor's statement at depth d ran before the trace began (then the loop did not come to a new pass).
template <typename Frames, typename Shared, typename RanBefore>
void find_later_statement(const snapshot::Snapshot& snapshot, std::span<const snapshot::TraceEvent> trace,
                          const std::vector<FrameId>& anchor, std::size_t program_depth, Frames& frames,
                          Shared& shared_with_anchor, RanBefore& ran_before_trace, TraceUnits& units) {
  struct Later {
    std::size_t depth = 0;  // frames shared with the anchor above it
    std::uint64_t made_bytes = 0;
    std::uint64_t freed_bytes = 0;
  };
  std::unordered_map<FrameId, Later> later;
  std::unordered_map<std::uint64_t, std::pair<FrameId, std::uint64_t>> live;  // address → (statement, size)
  for (const snapshot::TraceEvent& e : trace) {
    if (e.action == TraceAction::kFreeRequested) {
      if (const auto it = live.find(e.addr); it != live.end()) {
        later[it->second.first].freed_bytes += it->second.second;
        live.erase(it);
      }
      continue;
    }
    if (e.action != TraceAction::kAlloc || e.stack == 0) continue;
    const std::vector<FrameId>& f = frames(e.stack);
    const std::size_t shared = shared_with_anchor(e.stack);
    if (shared >= program_depth || shared >= f.size()) continue;
    const snapshot::Frame& mine = snapshot.stacks.frame(f[shared]);
    const snapshot::Frame& anchors = snapshot.stacks.frame(anchor[shared]);
    if (mine.filename != anchors.filename || mine.name != anchors.name || mine.line <= anchors.line ||
        anchors.line == snapshot::Frame::kUnknownLine || mine.line == snapshot::Frame::kUnknownLine)
      continue;
    Later& l = later[f[shared]];
    l.depth = shared;
    l.made_bytes += e.size;
    live[e.addr] = {f[shared], e.size};
  }
  // A later line whose blocks are still held may be the failing statement's own argument on the line below a call
  // (Python evaluates them first); a statement that ran and freed most of what it made finished before the anchor.
  std::optional<std::pair<FrameId, Later>> found;
  for (const auto& [statement, l] : later)
    if (2 * l.freed_bytes > l.made_bytes &&
        (!found || std::pair(l.depth, statement) < std::pair(found->second.depth, found->first)))
      found = {statement, l};
  if (!found || ran_before_trace(found->second.depth)) return;
  units.later_statement = describe_frame(snapshot, found->first);
  units.later_than = describe_frame(snapshot, anchor[found->second.depth]);
}

}  // namespace

TraceUnits find_trace_units(const snapshot::Snapshot& snapshot, int device, std::size_t oom_index) {
  TraceUnits units;
  const auto trace = snapshot.trace(device);
  std::unordered_map<StackId, std::vector<FrameId>> frames_of;
  const auto frames = [&](StackId stack) -> const std::vector<FrameId>& {
    auto [it, added] = frames_of.try_emplace(stack);
    if (added && stack != 0) it->second = python_frames(snapshot, stack);
    return it->second;
  };
  // A frame's path inside torch ("optim/adamw.py"), empty for the program's (or a library's) own code.
  const auto torch_file = [&](FrameId f) {
    return torch_path(snapshot.strings.view(snapshot.stacks.frame(f).filename));
  };
  // The program's own frames come first; a stack that starts inside torch runs on another
  // thread (a checkpointed backward's recompute) and says nothing of the program's loop.
  const auto programs = [&](StackId stack) {
    const std::vector<FrameId>& f = frames(stack);
    return !f.empty() && torch_file(f.front()).empty();
  };
  units.anchor = oom_index;
  while (!programs(trace[units.anchor].stack)) {
    std::size_t i = units.anchor;
    while (i > 0 && trace[i - 1].action != TraceAction::kAlloc) --i;
    if (i == 0) return units;
    units.anchor = i - 1;
    units.anchor_is_oom = false;
  }
  const std::vector<FrameId> anchor = frames(trace[units.anchor].stack);

  std::size_t program_depth = anchor.size();  // frames of the program's own loops
  std::size_t eval_depth = 0;                 // the deepest of them naming evaluation
  std::size_t least_depth = 1;                // an eval unit holds the shallowest frame naming it
  // The script that was run (the deepest top-level frame): it runs every pass, so its name ("train_eval.py")
  // says none of them; a library's file ("evaluation_loop.py") does.
  std::optional<snapshot::StringId> script;
  for (const FrameId f : anchor)
    if (snapshot.strings.view(snapshot.stacks.frame(f).name) == "<module>") script = snapshot.stacks.frame(f).filename;
  for (std::size_t d = 0; d < anchor.size(); ++d) {
    const snapshot::Frame& frame = snapshot.stacks.frame(anchor[d]);
    const std::string_view file = snapshot.strings.view(frame.filename);
    const std::string_view inside = torch_path(file);
    if (!inside.empty() && inside_a_pass(inside)) {
      program_depth = d;
      break;
    }
    const bool by_name = inside.empty() && names_evaluation(snapshot.strings.view(frame.name));
    const bool by_file = inside.empty() && frame.filename != script &&
                         names_evaluation(file_name_of(file));
    if (by_name) eval_depth = d + 1;
    if ((by_name || by_file) && !units.eval) {
      least_depth = d + 1;
      units.eval_statement = describe_frame(snapshot, anchor[d > 0 ? d - 1 : 0]);
    }
    units.eval |= by_name || by_file;
  }
  if (program_depth == 0) return units;
  units.program_frame = describe_frame(snapshot, anchor[program_depth - 1]);

  std::unordered_map<StackId, Relation> relation_of;
  const auto relation = [&](StackId stack) {
    auto [it, added] = relation_of.try_emplace(stack);
    if (added) {
      const std::vector<FrameId>& f = frames(stack);
      std::size_t n = 0;
      while (n < f.size() && n < anchor.size() && f[n] == anchor[n]) ++n;
      it->second = {n, n > 0 && (n < f.size() || n == anchor.size())};
    }
    return it->second;
  };
  // Episodes per depth in one pass: an allocation sharing s frames after one sharing p < s
  // starts an episode at every depth in (p, s].
  std::vector<std::int64_t> opened(program_depth + 2, 0);
  std::size_t previous = 0;
  const auto visit_all = [&](auto&& visit) {
    for (std::size_t i = 0; i < units.anchor; ++i) {
      if (trace[i].action != TraceAction::kAlloc || trace[i].stack == 0) continue;
      const Relation r = relation(trace[i].stack);
      if (r.counts) visit(i, std::min(r.shared, program_depth));
    }
    visit(units.anchor, program_depth);
  };
  visit_all([&](std::size_t, std::size_t shared) {
    if (shared > previous) {
      ++opened[previous + 1];
      --opened[shared + 1];
    }
    previous = shared;
  });
  std::size_t best_depth = 0;
  std::size_t best = 0;
  std::int64_t running = 0;
  for (std::size_t d = 1; d <= program_depth; ++d) {
    running += opened[d];
    if (d >= least_depth && running > static_cast<std::int64_t>(best)) {
      best = static_cast<std::size_t>(running);
      best_depth = d;
    }
  }
  if (eval_depth > 0) {
    previous = 0;
    visit_all([&](std::size_t i, std::size_t shared) {
      if (shared >= eval_depth && previous < eval_depth) units.eval_batch_start = i;
      previous = shared;
    });
  }
  if (best_depth == 0) return units;
  // A loop whose body is one `optimizer.step(closure)` (L-BFGS as torch.optim's docs show it) allocates nothing
  // between two steps: their runs merge into one episode. The statement's first allocation is then the closure's
  // first call (the program's code again below torch.optim; not an optimizer's per-parameter state), made from one
  // line of the optimizer's step: each recurrence of that allocation's frames begins a step.
  const auto in_program = [&](FrameId f) { return torch_file(f).empty(); };
  const auto statement_starts_in_a_closure = [&] {
    for (std::size_t i = 0; i < units.anchor; ++i) {
      if (trace[i].action != TraceAction::kAlloc || trace[i].stack == 0) continue;
      const Relation r = relation(trace[i].stack);
      if (!r.counts || r.shared < program_depth) continue;
      const std::vector<FrameId>& f = frames(trace[i].stack);
      return f.size() > program_depth + 1 && torch_file(f[program_depth]).starts_with("optim/") &&
             std::any_of(f.begin() + static_cast<std::ptrdiff_t>(program_depth) + 1, f.end(), in_program);
    }
    return false;
  };
  const bool steps_in_one_call = best == 1 && !units.eval && program_depth < anchor.size() &&
                                 torch_file(anchor[program_depth]).starts_with("optim/") &&
                                 statement_starts_in_a_closure();
  if (steps_in_one_call) best_depth = program_depth;
  units.depth = best_depth;
  units.statement = describe_frame(snapshot, anchor[best_depth - 1]);
  previous = 0;
  units.first_unit_whole = false;
  visit_all([&](std::size_t i, std::size_t shared) {
    if (shared < best_depth && units.starts.empty()) units.first_unit_whole = true;
    if (shared >= best_depth && previous < best_depth) units.starts.push_back(i);
    if (shared < best_depth && previous >= best_depth) units.ends.push_back(i);
    previous = shared;
  });
  if (steps_in_one_call) split_at_recurring_starts(units, trace, frames);
  // A statement of the same loop body above the unit's own (the loop wrapped to a lower line).
  const snapshot::Frame& unit_frame = snapshot.stacks.frame(anchor[best_depth - 1]);
  const auto earlier_statement = [&](StackId stack) {
    const std::vector<FrameId>& f = frames(stack);
    if (f.size() < best_depth) return false;
    const snapshot::Frame& frame = snapshot.stacks.frame(f[best_depth - 1]);
    return frame.filename == unit_frame.filename && frame.name == unit_frame.name &&
           frame.line != snapshot::Frame::kUnknownLine && unit_frame.line != snapshot::Frame::kUnknownLine &&
           frame.line < unit_frame.line;
  };
  // An evaluation inside a training unit's iteration (Lightning's validation in `advance`, HF's
  // `_maybe_log_save_evaluate` after a step) is another pass: it ends the training step.
  std::unordered_map<StackId, bool> evaluates;
  const auto in_evaluation = [&](StackId stack) {
    auto [it, added] = evaluates.try_emplace(stack, false);
    if (added)
      for (const FrameId f : frames(stack)) {
        const snapshot::Frame& frame = snapshot.stacks.frame(f);
        it->second = it->second || (torch_path(snapshot.strings.view(frame.filename)).empty() &&
                                    names_evaluation(snapshot.strings.view(frame.name)));
      }
    return it->second;
  };
  for (std::size_t u = 0; u + 1 < units.starts.size(); ++u) {
    std::size_t end = units.starts[u + 1];
    for (std::size_t i = units.starts[u] + 1; i < end; ++i) {
      if (trace[i].action != TraceAction::kAlloc || trace[i].stack == 0) continue;
      const Relation r = relation(trace[i].stack);
      if ((r.counts && r.shared + 1 == best_depth && earlier_statement(trace[i].stack)) ||
          (!units.eval && in_evaluation(trace[i].stack)))
        end = i;
    }
    units.iteration_ends.push_back(end);
  }
  // Only a failing statement that did not run before needs it (the phase of a first pass).
  if (!units.repeats()) {
    const auto shared = [&](StackId stack) { return relation(stack).shared; };
    // A ring that wrapped drops the earlier runs' events, not what they left live: the step before's output, still
    // bound to its variable (Tacotron's `mel_post`, field taco_edge), keeps the statement's frames.
    const auto ran_before_trace = [&](std::size_t depth) {
      const auto made_there = [&](const snapshot::Block* b) {
        if (b->stack == 0) return false;
        const std::vector<FrameId>& f = frames(b->stack);
        return f.size() > depth &&
               std::equal(anchor.begin(), anchor.begin() + static_cast<std::ptrdiff_t>(depth) + 1, f.begin());
      };
      const std::vector<const snapshot::Block*> older = snapshot::blocks_older_than_trace(snapshot, device);
      return std::any_of(older.begin(), older.end(), made_there);
    };
    find_later_statement(snapshot, trace.first(units.anchor), anchor, program_depth, frames, shared, ran_before_trace,
                         units);
  }
  return units;
}

}  // namespace fragscope::diagnose
