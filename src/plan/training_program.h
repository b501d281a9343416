#pragma once
/// @file training_program.h
/// @brief A whole training run as an allocation program: model construction, then every
/// micro-step's forward and backward (llama_program.h), an optimizer step and zero_grad after
/// every grad_accum micro-steps (optimizer_program.h), and eval passes where scheduled.
///
/// The planning schedules: fixed-length jobs run three optimizer steps (the first creates the
/// optimizer state; the allocator's cache is steady from the second on: replaying 2 to 10 steps
/// of every recorded shape gives the same peaks). Variable-length jobs run kLengthDraws seeded
/// draws of lengths from the spec's distribution (log-normal around median_seq_len with
/// length_sigma, clipped to [min_seq_len, seq_len], multiples of 8, as the fixtures' recorder
/// draws them), each kVariableLengthMicroSteps long in whole optimizer steps, the last
/// micro-step forced to seq_len: the longest sequence arriving with gradients and optimizer
/// state present. Reserved memory then depends on the order of the lengths (which blocks the
/// cache holds when a long one arrives): the plan keeps the draw that reserves the most. An
/// [eval] table adds an eval pass after every `every` optimizer steps.
/// Thread-safety: pure functions.

#include <cstdint>
#include <span>
#include <vector>

#include "plan/allocation_program.h"
#include "plan/job_spec.h"

namespace fragscope::plan {

inline constexpr std::uint64_t kFixedLengthOptimizerSteps = 3;
inline constexpr std::uint64_t kVariableLengthMicroSteps = 128;  ///< at least 8 optimizer steps
inline constexpr std::uint64_t kLengthDraws = 4;
inline constexpr std::uint64_t kLengthSeed = 1234;  ///< draw k uses kLengthSeed + k

struct TrainingSchedule {
  std::vector<std::uint64_t> seq_lens;    ///< tokens per sequence, one per micro-step
  std::vector<std::uint32_t> eval_after;  ///< micro-steps (ending an optimizer step) followed by an eval pass
};

/// @brief The schedules `plan` replays for `spec` (see the file comment): one for fixed lengths,
/// kLengthDraws for variable lengths.
std::vector<TrainingSchedule> planning_schedules(const JobSpec& spec);

/// @brief `count` lengths drawn from the spec's distribution with `seed`.
std::vector<std::uint64_t> draw_lengths(const JobSpec& spec, std::size_t count, std::uint64_t seed);

/// @brief The run's allocation program. REQUIRES: validate(spec) passed.
AllocationProgram build_training_program(const JobSpec& spec, const TrainingSchedule& schedule);

}  // namespace fragscope::plan
