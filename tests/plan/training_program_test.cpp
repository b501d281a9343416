#include "plan/training_program.h"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>

#include <gtest/gtest.h>

#include "alloc/alloc_config.h"
#include "plan/reserved_model.h"

namespace fragscope::plan {
namespace {

JobSpec tiny_spec() {
  JobSpec s;
  s.source = "tiny";
  s.model = {"", 256, 3, 4, 2, 512, 1000, false};
  s.training.seq_len = 64;
  s.training.micro_batch_size = 2;
  s.training.grad_accum = 2;
  s.hardware.gpu = "H200";
  return s;
}

/// Live requested bytes per role once the program has run to its end.
std::map<MemoryRole, std::uint64_t> live_at_end(const AllocationProgram& p) {
  std::vector<MemoryRole> roles(p.tensors);
  std::vector<bool> live(p.tensors, false);
  std::vector<std::uint64_t> bytes(p.tensors, 0);
  for (const auto& e : p.events) {
    if (e.kind == ProgramEvent::Kind::kAlloc)
      live[e.tensor] = true, roles[e.tensor] = e.role, bytes[e.tensor] = e.bytes;
    else if (e.kind == ProgramEvent::Kind::kFree)
      live[e.tensor] = false;
    else
      roles[e.tensor] = e.role;
  }
  std::map<MemoryRole, std::uint64_t> out;
  for (std::uint32_t t = 0; t < p.tensors; ++t)
    if (live[t]) out[roles[t]] += bytes[t];
  return out;
}

TEST(TrainingProgram, EveryRegimeBuildsAndLeavesOnlyWhatOutlivesAStep) {
  // Whatever the combination, after the last optimizer step and zero_grad only the model, the
  // optimizer state, the cuBLAS workspaces, DDP's buckets, ZeRO's flat copies and the FSDP
  // root's gathered parameters are left: no activation, gradient or transient leaks.
  const Precision precisions[] = {Precision::kAmpBf16, Precision::kMixedBf16, Precision::kBf16, Precision::kFp32};
  const Strategy strategies[] = {Strategy::kNone,  Strategy::kDdp,   Strategy::kFsdp,
                                 Strategy::kZero1, Strategy::kZero2, Strategy::kZero3};
  const Checkpointing ckpts[] = {Checkpointing::kNone, Checkpointing::kSelective, Checkpointing::kFull};
  const Optimizer optimizers[] = {Optimizer::kAdamW, Optimizer::kAdamW8bit, Optimizer::kSgd, Optimizer::kLion};
  const OptimizerImpl impls[] = {OptimizerImpl::kForeach, OptimizerImpl::kFused, OptimizerImpl::kSingleTensor};
  int built = 0;
  for (Precision precision : precisions)
    for (Strategy strategy : strategies)
      for (Checkpointing ckpt : ckpts)
        for (Attention attention : {Attention::kSdpa, Attention::kEager})
          for (bool cache : {true, false}) {
            if (precision == Precision::kMixedBf16 && (strategy == Strategy::kNone || strategy == Strategy::kDdp))
              continue;
            JobSpec s = tiny_spec();
            s.training.precision = precision;
            s.training.checkpointing = ckpt;
            s.training.attention = attention;
            s.training.use_cache = cache;
            s.parallel.strategy = strategy;
            s.parallel.world_size = strategy == Strategy::kNone ? 1 : (strategy == Strategy::kFsdp && cache ? 1 : 4);
            s.training.optimizer = optimizers[built % 4];
            s.training.optimizer_impl = impls[built % 3];
            s.model.tied_embeddings = built % 5 == 0;
            if (ckpt == Checkpointing::kFull && built % 2) s.training.checkpointed_layers = 2;
            if (built % 7 == 0) s.eval = EvalConfig{4, 32, 1};
            ++built;
            TrainingSchedule schedule;
            schedule.lengths = MicroStepLengths::listed({64, 48, 64, 32});
            if (s.eval) schedule.eval_after = {1, 3};
            const std::string what = std::string(to_string(precision)) + " " + std::string(to_string(strategy)) + " " +
                                     std::string(to_string(ckpt)) + " " + std::string(to_string(attention)) +
                                     (cache ? " cache " : " no-cache ") + std::string(to_string(s.training.optimizer)) +
                                     " " + std::string(to_string(s.training.optimizer_impl)) +
                                     (s.model.tied_embeddings ? " tied" : "") + (s.eval ? " eval" : "");
            AllocationProgram program;
            try {
              program = build_training_program(s, schedule);
            } catch (const std::exception& e) {
              ADD_FAILURE() << what << ": " << e.what();
              continue;
            }
            const ReplayedRun r = replay_program(program, {}, std::nullopt, 1ull << 40);
            EXPECT_FALSE(r.oom);
            EXPECT_GT(r.peak_allocated_bytes, 0u);
            for (const auto& [role, bytes] : live_at_end(program)) {
              const bool persistent =
                  role == MemoryRole::kParameters || role == MemoryRole::kOptimizerState ||
                  role == MemoryRole::kWorkspaces || role == MemoryRole::kCommunication ||
                  (role == MemoryRole::kGradients && s.parallel.strategy != Strategy::kNone &&
                   s.parallel.strategy != Strategy::kDdp && s.parallel.strategy != Strategy::kFsdp) ||
                  (role == MemoryRole::kWeightCopies && strategy == Strategy::kFsdp);
              EXPECT_TRUE(persistent) << role_key(role) << " " << bytes << " bytes left: " << what;
            }
          }
  EXPECT_GT(built, 200);
}

TEST(TrainingProgram, MarksNameEveryPhaseOfEveryMicroStep) {
  JobSpec s = tiny_spec();
  TrainingSchedule schedule;
  schedule.lengths = MicroStepLengths::repeated(64, 2);
  const AllocationProgram p = build_training_program(s, schedule);
  std::vector<std::pair<ProgramPhase, std::uint32_t>> marks;
  for (const auto& m : p.marks) marks.emplace_back(m.phase, m.micro_step);
  EXPECT_EQ(marks, (std::vector<std::pair<ProgramPhase, std::uint32_t>>{{ProgramPhase::kSetup, 0},
                                                                        {ProgramPhase::kForward, 0},
                                                                        {ProgramPhase::kBackward, 0},
                                                                        {ProgramPhase::kForward, 1},
                                                                        {ProgramPhase::kBackward, 1},
                                                                        {ProgramPhase::kOptimizerStep, 1}}));
}

TEST(TrainingProgram, TheWriterGivesThePiecesInRunOrderAndMayPassOverMicroSteps) {
  JobSpec s = tiny_spec();
  s.eval = EvalConfig{2, 32, 1};
  TrainingSchedule schedule;
  schedule.lengths = MicroStepLengths::listed({64, 48, 64, 32});
  schedule.eval_after = {1, 3};
  AllocationTape tape;
  TrainingProgramWriter writer(s, schedule, tape);
  using Kind = TrainingProgramWriter::Piece::Kind;
  using Pieces = std::vector<std::tuple<Kind, std::uint32_t, std::uint64_t, bool>>;  // kind, micro-step, length, first
  Pieces pieces;
  while (!writer.done()) {
    const TrainingProgramWriter::Piece p = writer.next();
    pieces.emplace_back(p.kind, p.micro_step, p.seq_len, p.starts_accumulation);
    if (p.micro_step == 1 && p.kind == Kind::kMicroStep)
      writer.pass_over();
    else
      writer.write();
  }
  EXPECT_EQ(pieces, (Pieces{{Kind::kMicroStep, 0, 64, true},
                            {Kind::kMicroStep, 1, 48, false},
                            {Kind::kOptimizerStep, 1, 0, false},
                            {Kind::kEval, 1, 0, false},
                            {Kind::kMicroStep, 2, 64, true},
                            {Kind::kMicroStep, 3, 32, false},
                            {Kind::kOptimizerStep, 3, 0, false},
                            {Kind::kEval, 3, 0, false}}));
  std::vector<std::pair<ProgramPhase, std::uint32_t>> marks;
  for (const auto& m : tape.take().marks) marks.emplace_back(m.phase, m.micro_step);
  EXPECT_EQ(std::count(marks.begin(), marks.end(), std::pair{ProgramPhase::kForward, 1u}), 0);  // passed over
  EXPECT_EQ(std::count(marks.begin(), marks.end(), std::pair{ProgramPhase::kForward, 3u}), 1);
  EXPECT_EQ(std::count(marks.begin(), marks.end(), std::pair{ProgramPhase::kEval, 3u}), 1);
}

}  // namespace
}  // namespace fragscope::plan
