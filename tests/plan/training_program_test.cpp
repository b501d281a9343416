#include "plan/training_program.h"

#include <algorithm>
#include <array>
#include <map>

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
            schedule.seq_lens = {64, 48, 64, 32};
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

TEST(TrainingProgram, FixedLengthsRunThreeOptimizerSteps) {
  JobSpec s = tiny_spec();
  s.training.grad_accum = 4;
  const std::vector<TrainingSchedule> schedules = planning_schedules(s);
  ASSERT_EQ(schedules.size(), 1u);
  EXPECT_EQ(schedules[0].seq_lens, std::vector<std::uint64_t>(12, 64));
  EXPECT_TRUE(schedules[0].eval_after.empty());
  s.eval = EvalConfig{8, 128, 2};
  EXPECT_EQ(planning_schedules(s)[0].eval_after, (std::vector<std::uint32_t>{7, 11}));  // every 2 steps, and the last
}

TEST(TrainingProgram, VariableLengthsAreSeededDrawsEndingOnTheLongest) {
  JobSpec s = tiny_spec();
  s.training.seq_len = 4096;
  s.training.variable_length = true;
  s.training.min_seq_len = 256;
  s.training.median_seq_len = 1097;
  const std::vector<TrainingSchedule> draws = planning_schedules(s);
  ASSERT_EQ(draws.size(), kLengthDraws);
  EXPECT_EQ(draws[0].seq_lens, planning_schedules(s)[0].seq_lens);  // seeded: the same every time
  EXPECT_NE(draws[0].seq_lens, draws[1].seq_lens);
  for (const auto& a : draws) {
    EXPECT_EQ(a.seq_lens.size(), 128u);  // whole optimizer steps, at least 8
    EXPECT_EQ(a.seq_lens.back(), 4096u);
    for (auto len : a.seq_lens) {
      EXPECT_GE(len, 256u);
      EXPECT_LE(len, 4096u);
      EXPECT_EQ(len % 8, 0u);
    }
  }
  // The recorder's distribution: median e^7 ≈ 1097, σ 0.6.
  std::vector<std::uint64_t> many = draw_lengths(s, 4001, 7);
  std::nth_element(many.begin(), many.begin() + 2000, many.end());
  EXPECT_NEAR(static_cast<double>(many[2000]), 1097.0, 40.0);
}

TEST(TrainingProgram, MarksNameEveryPhaseOfEveryMicroStep) {
  JobSpec s = tiny_spec();
  TrainingSchedule schedule;
  schedule.seq_lens = {64, 64};
  const AllocationProgram p = build_training_program(s, schedule);
  std::vector<std::pair<Phase, std::uint32_t>> marks;
  for (const auto& m : p.marks) marks.emplace_back(m.phase, m.micro_step);
  EXPECT_EQ(marks, (std::vector<std::pair<Phase, std::uint32_t>>{{Phase::kSetup, 0},
                                                                 {Phase::kForward, 0},
                                                                 {Phase::kBackward, 0},
                                                                 {Phase::kForward, 1},
                                                                 {Phase::kBackward, 1},
                                                                 {Phase::kOptimizerStep, 1}}));
}

}  // namespace
}  // namespace fragscope::plan
