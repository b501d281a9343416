#pragma once
/// @file oom_call_path.h
/// @brief Was the failing malloc part of the training step the recorded steps repeated, or of
/// a pass they never ran (eval, checkpoint, the first optimizer step)? Decided from the call
/// stacks the trace records (`_record_memory_history(stacks="python")`).
///
/// Frames are compared outermost first. The trace's allocations that share the OOM stack's
/// outermost frame (its thread) diverge from one another below some depth C: the statements
/// of the program's main loop. For every deeper prefix of the OOM stack, an *episode* is a run
/// of consecutive allocations under that prefix (allocations with no recorded frames, such as
/// autograd's, neither start nor break one). The OOM's path is *repeated* when some prefix
/// of the loop level (depth C + 1) has two or more episodes: the same statement ran in an
/// earlier step (a forward line runs once per micro-step; deeper frames are not counted, they
/// repeat per layer within one pass). A statement that wraps the whole loop (`train_step()`
/// holding forward, backward and optimizer) has one episode but spans many steps: it is
/// repeated too when its episode lasted longer than `kWrapperSteps` recorded steps and ran the
/// optimizer (a long eval pass lasts as long, and runs none). Otherwise the failing pass is
/// *new*: it runs code no earlier step ran, so the steps the trace shows say nothing about its
/// peak.
/// Thread-safety: a pure function.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "snapshot/snapshot.h"

namespace fragscope::diagnose {

struct OomCallPath {
  bool has_stack = false;   ///< the `oom` entry carries Python frames
  bool repeated = false;    ///< the failing statement ran in an earlier step (see file comment)
  /// Some statement of the loop level ran in two or more episodes before the OOM: the trace
  /// shows steps repeating. False when the run failed in its first step (nothing to compare).
  bool loop_repeats = false;
  std::string statement;    ///< the OOM's frame at the loop level: "gen.py:149 in run"
  std::optional<std::size_t> statement_first_seen;  ///< first allocation under that frame
  std::size_t episodes = 0;    ///< episodes of the statement (the failing one included)
  /// Where each episode of the statement began (its first allocation), the failing one last:
  /// with a forward statement, where each recorded step began.
  std::vector<std::size_t> episode_starts;
  double statement_span_ms = 0;  ///< from the statement's first allocation to the OOM
  bool model_forward = false;  ///< the stack goes through torch.nn.Module.__call__
  bool optimizer = false;      ///< through torch/optim
  /// The statement's failing episode allocated through torch.nn.Module.__call__ / torch/optim
  /// before the OOM (`logits.float()` after an eval forward: the forward, not the failing malloc).
  bool episode_forward = false;
  bool episode_optimizer = false;
  bool serialization = false;  ///< through torch.save / state_dict / a checkpoint module
  /// An allocation before the statement's first episode was a training step's: autograd's (C++ frames naming
  /// torch::autograd::, or no frames at all where the trace records Python frames only) or an optimizer's. Without
  /// one, statements that repeated before the OOM were no earlier step: a statement over several lines (Python
  /// names each line in turn: 101, 102, 101) or a pass before training (Lightning's sanity check).
  bool trained_before = false;
  std::string innermost;       ///< innermost Python frame (else frame): "functional.py:2397 in silu"
  /// The failing malloc ran on autograd's engine thread (no Python frames): its statement is that
  /// of the program's last allocation with Python frames before it, inside which backward() ran.
  bool backward = false;
};

/// @brief A one-episode statement lasting this many median steps wraps the training loop.
inline constexpr double kWrapperSteps = 3.0;

/// @brief Analyses the call stack of the `oom` entry at `oom_index` of `device`'s trace.
/// @param median_step_ms median step time from telemetry (nullopt: no wrapper check).
/// REQUIRES: oom_index < snapshot.trace(device).size().
OomCallPath analyze_oom_call_path(const snapshot::Snapshot& snapshot, int device, std::size_t oom_index,
                                  std::optional<double> median_step_ms = std::nullopt);

/// @brief "file.py:LINE in NAME" (the file without its folders).
std::string describe_frame(const snapshot::Snapshot& snapshot, snapshot::FrameId frame);

}  // namespace fragscope::diagnose
