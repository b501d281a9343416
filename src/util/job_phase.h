#pragma once
/// @file job_phase.h
/// @brief What a training job is doing: the one vocabulary of phases. The hook marks train, eval
/// and checkpoint (python/fragscope: steps.jsonl's `phase`, the rank file's phase field, a
/// canary's required_phases); doctor's verdict on an OOM adds the optimizer's step and unknown.
/// A job's own telemetry may name a phase of its own: where such a name travels (a telemetry
/// record, the phase doctor reports) it stays a string, compared with phase_name().
/// plan's ProgramPhase (plan/allocation_program.h) is finer: the parts of a step it emulates.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fragscope {

enum class JobPhase : std::uint8_t { kTrain, kEval, kCheckpoint, kOptimizer, kUnknown };

/// @brief The phases the hook marks, in the order its docs list them.
inline constexpr JobPhase kHookPhases[] = {JobPhase::kTrain, JobPhase::kEval, JobPhase::kCheckpoint};

/// @brief "train", "eval", "checkpoint", "optimizer", "unknown": the names every output and
/// input uses (metric labels, steps.jsonl, doctor's `phase`).
constexpr std::string_view phase_name(JobPhase phase) {
  switch (phase) {
    case JobPhase::kTrain:
      return "train";
    case JobPhase::kEval:
      return "eval";
    case JobPhase::kCheckpoint:
      return "checkpoint";
    case JobPhase::kOptimizer:
      return "optimizer";
    case JobPhase::kUnknown:
      break;
  }
  return "unknown";
}

/// @brief The names of kHookPhases, in order.
inline std::vector<std::string> hook_phase_names() {
  std::vector<std::string> names;
  for (const JobPhase phase : kHookPhases) names.emplace_back(phase_name(phase));
  return names;
}

}  // namespace fragscope
