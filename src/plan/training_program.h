#pragma once
/// @file training_program.h
/// @brief A whole training run as an allocation program: model construction, then every
/// micro-step's forward and backward (llama_program.h), an optimizer step and zero_grad after
/// every grad_accum micro-steps (optimizer_program.h), and eval passes where scheduled
/// (training_schedule.h says which micro-steps a plan runs).
///
/// TrainingProgramWriter writes it piece by piece onto a tape, so a replay can take each piece
/// as it comes and pass over micro-steps whose effect it already knows (training_replay.h);
/// build_training_program writes it whole.
/// Thread-safety: pure functions; one writer per thread.

#include <cstdint>
#include <optional>
#include <vector>

#include "plan/allocation_program.h"
#include "plan/job_spec.h"
#include "plan/llama_program.h"
#include "plan/optimizer_program.h"
#include "plan/training_schedule.h"

namespace fragscope::plan {

class TrainingProgramWriter {
 public:
  /// @brief One piece of the run: a micro-step's forward and backward, the optimizer step (with
  /// zero_grad) that ends an accumulation, or an eval pass.
  struct Piece {
    enum class Kind : std::uint8_t { kMicroStep, kOptimizerStep, kEval };
    Kind kind = Kind::kMicroStep;
    std::uint32_t micro_step = 0;      ///< the micro-step, or the one the optimizer step or eval follows
    std::uint64_t seq_len = 0;         ///< kMicroStep: tokens per sequence
    bool starts_accumulation = false;  ///< kMicroStep: the first of its optimizer step (no .grad yet)
  };

  /// @brief Writes the model's construction onto `tape`. REQUIRES: validate(spec) passed; spec,
  /// schedule and tape outlive the writer.
  TrainingProgramWriter(const JobSpec& spec, const TrainingSchedule& schedule, AllocationTape& tape);

  bool done() const { return !next_; }
  /// @brief The piece write() or pass_over() takes next. REQUIRES: !done().
  const Piece& next() const { return *next_; }
  /// @brief Writes the next piece onto the tape.
  void write();
  /// @brief Moves past the next `count` pieces, micro-steps of one optimizer step, without writing
  /// them. REQUIRES: count ≥ 1; writing them would leave the program's state as it is (the same
  /// tensors live): later pieces are then written as if they had been; past the first, their
  /// lengths repeat with the schedule's period (MicroStepLengths::Reader::skip).
  void pass_over(std::uint64_t count = 1);
  /// @brief What one decoder block keeps for its backward, the largest of the written micro-steps.
  std::uint64_t block_activation_bytes() const { return model_.block_activation_bytes(); }

 private:
  void advance();

  const JobSpec& spec_;
  const TrainingSchedule& schedule_;
  AllocationTape& tape_;
  LlamaProgram model_;
  OptimizerProgram optimizer_;
  std::vector<LlamaProgram::OptimizedTensor> tensors_;
  MicroStepLengths::Reader lengths_;
  std::optional<Piece> next_;
  std::size_t next_eval_ = 0;
};

/// @brief The run's allocation program, whole. REQUIRES: validate(spec) passed.
AllocationProgram build_training_program(const JobSpec& spec, const TrainingSchedule& schedule);

}  // namespace fragscope::plan
