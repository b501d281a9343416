#pragma once
/// @file training_replay.h
/// @brief A schedule's program (training_program.h) replayed as it is written (reserved_model.h),
/// passing over the micro-steps that cannot change the result: what keeps `plan`'s time and
/// memory bounded whatever grad_accum is (up to 2^20 micro-steps per optimizer step).
///
/// Why passing over is exact: a micro-step's program depends only on its length, on whether it
/// starts an accumulation, and on the tensors live before it (LlamaProgram keeps nothing else
/// across micro-steps that changes what it writes). The replay's state between pieces — the
/// allocator model's state, segment addresses as their order, with the role of the tensor in
/// each live block and that tensor's order among the live ones (ProgramReplay::state) — then
/// decides everything a micro-step does. So when a micro-step replayed from state S ends in S,
/// a later micro-step of the same length and kind that starts from S does the same: the same
/// mallocs, retries and frees, ending in S. Its peaks cannot pass the run's, which already count
/// the first one's, and nothing the plan reports counts it but the allocator's retries, which
/// are added. The replay remembers, per state that some micro-step left as it found it, those
/// micro-steps' lengths and retries, and neither writes nor replays a micro-step whose state and
/// length it knows. Everything else is written and replayed: micro-steps that change the state
/// (the first of an accumulation creates .grad; a longer sequence grows the cache), optimizer
/// steps, eval passes.
///
/// Whole runs of micro-steps are passed over in one go too, by the same argument: within an
/// optimizer step the lengths repeat with a period from its second micro-step on (one length:
/// period 1; drawn lengths past kDrawnLengthsPerAccumulation: that many, training_schedule.h).
/// When the state at the start of a period is one a period of this optimizer step started from,
/// the micro-steps since then repeat whole until the optimizer step ends: they are counted (their
/// retries added) without being visited one by one.
///
/// Cost: a fixed-length job's state settles within the first three micro-steps of each optimizer
/// step, and the rest of the step is passed over at once: a few micro-steps are visited whatever
/// grad_accum is. A variable-length job's settles once the cache holds what its longest length
/// needs; each length is then replayed once per state an optimizer step's first micro-step
/// leaves (about 8 × the distinct lengths), and each optimizer step visits at most its 16384 drawn
/// micro-steps and, in practice, two periods more. Tensor ids freed within a piece are given out
/// again, so memory stays one piece's.
/// Thread-safety: pure function of its arguments.

#include <cstdint>
#include <optional>

#include "alloc/alloc_config.h"
#include "plan/job_spec.h"
#include "plan/reserved_model.h"
#include "plan/training_schedule.h"

namespace fragscope::plan {

struct TrainingReplay {
  ReplayedRun run;  ///< as replay_program(build_training_program(spec, schedule), …) returns it
  std::uint64_t block_activation_bytes = 0;  ///< AllocationProgram::block_activation_bytes
  std::uint64_t micro_steps_written = 0;     ///< replayed event by event; the rest were passed over
  std::uint64_t micro_steps_visited = 0;     ///< written, or passed over one by one: the replay's work
};

/// @brief Replays `schedule`'s program for `spec` on a device of `device_total_bytes` whose
/// process may reserve at most `capacity` bytes (nullopt: unlimited). Stops at the first OOM.
/// REQUIRES: validate(spec) passed.
TrainingReplay replay_training(const JobSpec& spec, const TrainingSchedule& schedule, const alloc::AllocConfig& config,
                               std::optional<std::uint64_t> capacity, std::uint64_t device_total_bytes);

}  // namespace fragscope::plan
