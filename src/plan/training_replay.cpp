#include "plan/training_replay.h"

#include <algorithm>

#include <absl/container/flat_hash_map.h>
#include <absl/container/node_hash_map.h>

#include "plan/training_program.h"

namespace fragscope::plan {

TrainingReplay replay_training(const JobSpec& spec, const TrainingSchedule& schedule, const alloc::AllocConfig& config,
                               std::optional<std::uint64_t> capacity, std::uint64_t device_total_bytes) {
  using Piece = TrainingProgramWriter::Piece;
  ProgramReplay replay(config, capacity, device_total_bytes);
  AllocationTape tape;
  TrainingProgramWriter writer(spec, schedule, tape);
  std::vector<ProgramEvent> events;
  std::vector<ProgramMark> marks;
  auto replay_written = [&] {
    tape.take_written(events, marks);
    return replay.replay(events, marks);
  };
  auto micro_step_key = [](const Piece& p) { return p.seq_len << 1 | std::uint64_t{p.starts_accumulation}; };
  // state → (length, starts an accumulation) → retries of a micro-step that left the state as it
  // found it; node_hash_map: `repeats` points into it across insertions
  using Repeats = absl::flat_hash_map<std::uint64_t, std::uint64_t>;
  absl::node_hash_map<std::vector<std::uint64_t>, Repeats> unchanged_by;

  // Within an optimizer step, the lengths from its second micro-step on repeat with `period`; the
  // state at each period's start → where it was and the retries by then. From a state seen there
  // before, the micro-steps since repeat whole (the same lengths from the same state) until the
  // optimizer step ends or the schedule's forced last micro-step.
  const std::uint64_t ga = spec.training.grad_accum, period = schedule.lengths.period();
  const std::uint64_t periodic_end = schedule.lengths.count() - (schedule.lengths.last_is_forced() ? 1 : 0);
  struct PeriodStart {
    std::uint64_t micro_step = 0;
    std::uint64_t retries = 0;
  };
  absl::flat_hash_map<std::vector<std::uint64_t>, PeriodStart> period_starts;

  TrainingReplay out;
  bool running = replay_written();  // the model's construction
  std::vector<std::uint64_t> state = replay.state();
  Repeats* repeats = nullptr;  // the current state's, once it has some
  while (running && !writer.done()) {
    const Piece piece = writer.next();
    const bool micro_step = piece.kind == Piece::Kind::kMicroStep;
    if (micro_step && period) {
      const std::uint64_t at = piece.micro_step % ga, retries = replay.run().num_alloc_retries;
      if (at == 0) {
        period_starts.clear();
      } else if ((at - 1) % period == 0) {
        const auto [seen, first] = period_starts.try_emplace(state, PeriodStart{piece.micro_step, retries});
        const std::uint64_t cycle = piece.micro_step - seen->second.micro_step;
        const std::uint64_t end = std::min(piece.micro_step - at + ga, periodic_end);
        if (!first && end - piece.micro_step >= cycle) {
          const std::uint64_t cycles = (end - piece.micro_step) / cycle;
          replay.add_alloc_retries(cycles * (retries - seen->second.retries));
          writer.pass_over(cycles * cycle);
          continue;
        }
      }
    }
    if (micro_step) ++out.micro_steps_visited;
    if (micro_step && repeats) {
      if (const auto repeat = repeats->find(micro_step_key(piece)); repeat != repeats->end()) {
        replay.add_alloc_retries(repeat->second);
        writer.pass_over();
        continue;
      }
    }
    const std::uint64_t retries_before = replay.run().num_alloc_retries;
    const AllocationTape::Tensor first = tape.next_tensor();
    writer.write();
    if (micro_step) ++out.micro_steps_written;
    running = replay_written();
    if (!running) break;
    tape.reuse_ids_from(first);
    std::vector<std::uint64_t> after = replay.state();
    if (after != state) {
      state = std::move(after);
      const auto known = unchanged_by.find(state);
      repeats = known == unchanged_by.end() ? nullptr : &known->second;
    } else if (micro_step) {
      if (!repeats) repeats = &unchanged_by[state];
      (*repeats)[micro_step_key(piece)] = replay.run().num_alloc_retries - retries_before;
    }
  }
  out.run = replay.run();
  out.block_activation_bytes = writer.block_activation_bytes();
  return out;
}

}  // namespace fragscope::plan
