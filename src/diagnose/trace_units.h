#pragma once
/// @file trace_units.h
/// @brief The repeating unit of the program that ran out of memory (a training step, a
/// micro-step, an eval batch), found from the trace's call stacks alone.
///
/// Python frames are compared outermost first (python_frames.h). The *anchor* is the failing
/// malloc, or, when it has no Python frames (autograd's engine thread runs the backward pass),
/// the program's last allocation before it. For each depth d of the anchor's frames, an
/// *episode* is a run of consecutive allocations sharing the anchor's first d frames.
/// Allocations without Python frames (other threads) and those whose frames are a strict prefix
/// of the anchor's (a C function called from a module's top level records fewer frames) neither
/// start nor break one. A stack whose outermost Python frame is torch's runs on another thread
/// (a checkpointed backward's recompute): it is no anchor either.
///
/// The unit is the depth with the most episodes (the shallowest of them), among the frames of
/// the program's own loops: above the first frame in torch.nn.Module, torch.autograd,
/// Tensor.backward, torch.optim or torch.utils.checkpoint, below which a statement repeats per
/// layer or per parameter. When the anchor's frames name evaluation (eval / valid / predict in
/// a function or file name outside torch; not the name of the script that was run, the deepest
/// `<module>` frame's file: "train_eval.py" runs every pass), the unit holds the shallowest such frame: HF's
/// `_maybe_log_save_evaluate` also logs at other steps, and its logging is not an eval pass.
/// Each episode starts a unit; the failing unit is the last. An earlier unit ends where the
/// loop's next iteration begins: at the next unit, or before, at an allocation of an earlier
/// statement of the same loop body (same function, a lower line), such as the next step's
/// forward when the unit is a backward statement; the next step belongs to the next unit. An
/// allocation in evaluation (a function naming it outside torch) ends a training unit too.
/// A unit whose statement calls torch.optim itself (a loop of `optimizer.step(closure)`) allocates
/// nothing between two steps: a step begins at each recurrence of the Python frames of the
/// statement run's first allocation (the closure's first call, made from one line of the step).
/// Thread-safety: a pure function.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "snapshot/snapshot.h"

namespace fragscope::diagnose {

struct TraceUnits {
  std::size_t anchor = 0;     ///< trace index of the allocation whose frames define the units
  bool anchor_is_oom = true;  ///< false: the failing malloc has no Python frames
  std::string statement;      ///< the unit's frame: "trainer.py:1842 in _run_epoch"
  std::string program_frame;  ///< the anchor's innermost frame of the program: "trainer.py:2044 in training_step"
  std::size_t depth = 0;      ///< Python frames a unit's allocations share with the anchor
  /// Where each unit began (its first allocation), the failing unit last.
  std::vector<std::size_t> starts;
  /// Where each earlier unit's statement stopped allocating: the first allocation of the
  /// program's thread outside it (its backward pass and optimizer step come after, on
  /// training units; an eval unit is over).
  std::vector<std::size_t> ends;
  /// The anchor's frames name an evaluation loop (eval / valid / predict in a function or file
  /// name outside torch): the units are eval batches.
  bool eval = false;
  /// With `eval`: where the failing eval batch began: the last episode of the anchor's deepest
  /// frame that names evaluation (HF's prediction_step, Lightning's validation_step).
  std::optional<std::size_t> eval_batch_start;
  /// With `eval`: the statement that entered evaluation (the frame calling the shallowest one
  /// that names it): "trainer.py:1883 in _run_epoch".
  std::string eval_statement;
  /// The program allocated outside the unit's statement before the first unit began: that unit
  /// began in the trace. False when the trace's first allocations are already the unit's (a
  /// ring or a late history start may have cut its head).
  bool first_unit_whole = true;
  /// Where each earlier unit's iteration of the loop ended (see the file comment), or where an
  /// evaluation inside it began (another pass).
  std::vector<std::size_t> iteration_ends;
  /// A statement after one of the anchor's frames in the same function (a higher line) that allocated before it in
  /// the trace and freed more than half of that (a finished run, not an argument evaluated for the anchor's own
  /// call), the outermost: the loop around both came back to `later_than`, or the function ran before, so the
  /// failing pass is not the run's first step. Looked for only when the failing unit does not repeat; not set when a
  /// block live in the snapshot, older than the trace (no alloc event of it), was made through the anchor's frame
  /// there: the failing statement ran before a ring that wrapped, and the loop did not come to a new pass.
  std::string later_statement;
  std::string later_than;  ///< the anchor's frame it comes after: "hard_negative_refresh.py:158 in <module>"
  /// @brief The failing unit has earlier occurrences in the trace.
  bool repeats() const { return starts.size() >= 2; }
};

/// @brief Finds the units up to the `oom` entry at `oom_index` of `device`'s trace.
/// REQUIRES: oom_index < snapshot.trace(device).size().
TraceUnits find_trace_units(const snapshot::Snapshot& snapshot, int device, std::size_t oom_index);

}  // namespace fragscope::diagnose
