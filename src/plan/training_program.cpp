#include "plan/training_program.h"

namespace fragscope::plan {

TrainingProgramWriter::TrainingProgramWriter(const JobSpec& spec, const TrainingSchedule& schedule,
                                             AllocationTape& tape)
    : spec_(spec),
      schedule_(schedule),
      tape_(tape),
      model_(spec, tape),
      optimizer_(spec, tape),
      lengths_(schedule.lengths) {
  tape_.mark(ProgramPhase::kSetup, 0);
  model_.construct();
  tensors_ = model_.optimized_tensors();
  if (schedule_.lengths.count() > 0) next_ = Piece{Piece::Kind::kMicroStep, 0, lengths_.next(), true};
}

void TrainingProgramWriter::write() {
  const Piece& p = *next_;
  switch (p.kind) {
    case Piece::Kind::kMicroStep:
      model_.train_micro_step(p.seq_len, p.micro_step);
      break;
    case Piece::Kind::kOptimizerStep:
      tape_.mark(ProgramPhase::kOptimizerStep, p.micro_step);
      optimizer_.step(tensors_);
      model_.release_gradients();
      break;
    case Piece::Kind::kEval:
      model_.eval_pass(spec_.eval->micro_batch_size, spec_.eval->seq_len, p.micro_step);
      break;
  }
  advance();
}

void TrainingProgramWriter::pass_over(std::uint64_t count) {
  lengths_.skip(count - 1);
  next_->micro_step += static_cast<std::uint32_t>(count - 1);
  advance();
}

void TrainingProgramWriter::advance() {
  const Piece done = *next_;
  const std::uint64_t ga = spec_.training.grad_accum;
  const std::uint32_t k = done.micro_step;
  const std::vector<std::uint32_t>& evals = schedule_.eval_after;
  if (done.kind == Piece::Kind::kMicroStep && (k + 1ull) % ga == 0) {
    next_ = Piece{Piece::Kind::kOptimizerStep, k};
  } else if (done.kind != Piece::Kind::kEval && next_eval_ < evals.size() && evals[next_eval_] == k) {
    next_ = Piece{Piece::Kind::kEval, k};
    ++next_eval_;
  } else if (k + 1ull < schedule_.lengths.count()) {
    next_ = Piece{Piece::Kind::kMicroStep, k + 1, lengths_.next(), (k + 1ull) % ga == 0};
  } else {
    next_.reset();
  }
}

AllocationProgram build_training_program(const JobSpec& spec, const TrainingSchedule& schedule) {
  AllocationTape tape;
  TrainingProgramWriter writer(spec, schedule, tape);
  while (!writer.done()) writer.write();
  AllocationProgram program = tape.take();
  program.block_activation_bytes = writer.block_activation_bytes();
  return program;
}

}  // namespace fragscope::plan
