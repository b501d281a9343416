#pragma once
/// @file eval_projection.h
/// @brief The rest of an eval batch that the trace never ran before, projected from the
/// training step's call of the same function: a trace to replay through any allocator setting.
///
/// An evaluation runs the training's code (the model's forward, often the same loss function)
/// under no_grad, at another batch or sequence size, and frees what the training keeps for its
/// backward pass. In order:
/// - *the shared call*: the failing malloc's Python frames are compared with a training
///   allocation's (the newest before the eval batch, outside evaluation, on the program's
///   thread): below where they part, the first function both call, from call sites that differ
///   (`compute_loss` from `prediction_step` and from `training_step`), down to the first frame
///   outside torch below it equal in both (`model(...)` and `criterion(...)` are both a
///   torch.nn.Module call; the model's own forward tells them apart);
/// - *training calls*: runs of consecutive allocations under that function from the training's
///   call site, each extended over the step's statements after it up to its backward pass
///   (the loss, when the model does not compute it): the newest kMaxCalls before the eval;
/// - *alignment*: the eval batch's allocations under the shared function, up to the failing
///   malloc, against each call's, by their innermost frame outside torch and innermost frame
///   (sequence_alignment.h: checkpointing and eval-only wrappers change the frames in between);
///   a call aligns when the failing malloc has a counterpart, 90% of the prefix's bytes do and
///   a pair of 1 MiB or more tells the size; the reference is the one whose scale
///   (size_scale.h) is nearest 1;
/// - *lifetimes*: a block of the rest is freed where the eval freed its like: an earlier block
///   of the call (an earlier layer) matched to an allocation of the eval, with the same
///   frames, size and lifetime in the training call, that the eval freed before the OOM (the
///   lifetime counted in the training call's allocations); else where the training call freed
///   it; else it stays to the end. Its size is its like's in the eval, else the training's
///   times the scale: the largest ratio among the pairs that grow like it for the upper
///   estimate, the least for the lower (linear allocations do not all grow alike);
/// - *two estimates*: the synthetic trace (the recorded operations up to the failing malloc,
///   that malloc served, then the rest as above, the eval's blocks live at the OOM freed where
///   the training freed their counterparts) is the upper estimate; the lower one frees every
///   block whose lifetime the eval has not shown as soon as it is made (before the next
///   allocation) and leaves out the step's statements after the call (an eval need not compute a loss).
/// At 596 cuts of the complete eval batches of tests/data/field (Lightning's validation, the
/// DeepLabV3 recipe's and the nn.Transformer tutorial's evaluate()), each taken as the failing
/// malloc, the real peak of the rest of the batch lay between the two estimates
/// (tests/diagnose/eval_projection_test.cpp, docs/VALIDATION.md).
/// Thread-safety: a pure function over read-only inputs.

#include <cstddef>
#include <cstdint>
#include <string>

#include "diagnose/recorded_curve.h"
#include "diagnose/trace_projection.h"
#include "replay/prepared_trace.h"
#include "snapshot/snapshot.h"

namespace fragscope::diagnose {

/// @brief Projects the eval batch that began at trace event `eval_start` and failed at the
/// `oom` entry `oom_index`. `prepared` is prepare_trace of the same device; `statement` names
/// the eval pass ("trainer.py:1883 in _run_epoch").
/// @return figures.available false, with a reason, when no training call supports it; else
/// figures.from_training_call, most_peak_bytes and least_peak_bytes set, and the upper estimate's trace.
ProjectedStep project_eval_from_training(const replay::PreparedTrace& prepared, const snapshot::Snapshot& snapshot,
                                         int device, const RecordedCurve& curve, std::size_t oom_index,
                                         std::size_t eval_start, const std::string& statement);

}  // namespace fragscope::diagnose
