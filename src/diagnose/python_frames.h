#pragma once
/// @file python_frames.h
/// @brief The Python frames of a recorded call stack, and which code they belong to.
///
/// Stacks recorded with `stacks="all"` interleave C++ frames with the Python ones, and the
/// interleaving differs from one allocation to the next; the Python frames alone (files ending
/// in `.py`, and `<frozen ...>` modules) are the program's own call path. A file belongs to
/// torch when its path below the last `site-packages/` (or `dist-packages/`) starts with
/// `torch/`, or, for a source tree, contains `/torch/`: a virtual environment under
/// `/opt/torch/` holds other packages too.
/// Thread-safety: pure functions.

#include <string_view>
#include <vector>

#include "snapshot/snapshot.h"

namespace fragscope::diagnose {

/// @brief True for a frame of Python code (`*.py`, `<frozen runpy>`).
bool is_python_frame(const snapshot::Snapshot& snapshot, snapshot::FrameId frame);

/// @brief The Python frames of `stack`, outermost first.
std::vector<snapshot::FrameId> python_frames(const snapshot::Snapshot& snapshot, snapshot::StackId stack);

/// @brief The path of `file` inside torch ("optim/adam.py"), or empty when it is not torch's.
std::string_view torch_path(std::string_view file);

/// @brief True when a word of a function or file name begins with eval, valid or predict, in any case
/// (name_words.h): "evaluation_loop", "_EvaluationLoop", "prediction_step", "eval.py"; not "_mask_invalid_locations".
bool names_evaluation(std::string_view text);

}  // namespace fragscope::diagnose
