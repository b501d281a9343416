#pragma once
/// @file oom_phase.h
/// @brief The phase an OOM happened in (train / eval / checkpoint / optimizer), from the
/// strongest evidence at hand, in this order:
/// 1. a `record_function` / annotation still open at the OOM whose name says it ("eval",
///    "valid", "checkpoint", "save", "Optimizer.step"; not Optimizer.step when the failing
///    malloc is not the optimizer's own code: the closure optimizer.step(closure) runs);
/// 2. the telemetry's `phase` field of the last record, when it is not "train";
/// 3. the OOM's call path (oom_call_path.h): a repeated statement is the training step; a new
///    pass through a model forward is an eval, through torch/optim the optimizer's first step,
///    through torch.save / state_dict a checkpoint;
/// 4. otherwise "train" when nothing contradicts it, "unknown" without telemetry or stacks.
/// Thread-safety: pure functions.

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "diagnose/oom_call_path.h"
#include "inputs/step_telemetry.h"
#include "snapshot/snapshot.h"
#include "util/job_phase.h"

namespace fragscope::diagnose {

struct OomPhase {
  std::string phase{phase_name(JobPhase::kUnknown)};  ///< a phase_name(), or the telemetry's own
  std::string source;             ///< one line: what decided it
  bool repeats_step = false;      ///< the failing pass is the recorded training step again
};

/// @brief The innermost annotation of `device` opened (START) before `time_us` and not closed
/// (END) by then; nullopt when none.
std::optional<std::string> open_annotation(const snapshot::Snapshot& snapshot, int device, std::int64_t time_us);

/// @brief Decides the phase. `snapshot`/`call_path` may be null (no trace); `steps` may be empty.
OomPhase decide_oom_phase(const snapshot::Snapshot* snapshot, int device, std::optional<std::size_t> oom_index,
                          const OomCallPath* call_path, std::span<const inputs::StepRecord> steps);

}  // namespace fragscope::diagnose
