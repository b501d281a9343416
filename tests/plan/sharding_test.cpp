// Model state per GPU. On the recorded runs (fp32 AdamW under autocast, one GPU) the end state
// of every completed run holds exactly the parameters and AdamW's two states (the gradients
// are freed by zero_grad) plus the two 32 MiB cuBLAS workspaces: memory_stats' allocated bytes.
// The sharded strategies follow DeepSpeed's published estimators and FSDP's even split.
#include "plan/sharding.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "recorded_run.h"

namespace fragscope::plan {
namespace {

namespace fs = std::filesystem;
using testing::load_recorded_run;

const fs::path kFixtures = FRAGSCOPE_FIXTURES_DIR;

TEST(Sharding, SingleGpuStateIsWhatTheRecordedRunsHeldAtTheEnd) {
  for (const char* name : {"fid_default", "fid_expandable", "big", "plan_p1", "plan_p2", "calib"}) {
    const auto run = load_recorded_run(kFixtures / name);
    const StateBytes s = state_bytes(run.spec);
    if (run.params) {
      EXPECT_EQ(s.parameters, 4 * run.params) << name;  // fp32 master weights
    }
    EXPECT_EQ(s.optimizer_state, 2 * s.parameters) << name;  // exp_avg, exp_avg_sq
    EXPECT_EQ(s.gradients, s.parameters) << name;
    EXPECT_EQ(s.optimizer_temporaries, s.parameters) << name;  // foreach sqrt(exp_avg_sq)
    EXPECT_EQ(s.ddp_buckets, 0u);
    const auto stats = testing::read_json(kFixtures / name / "stats.json");
    const std::int64_t allocated = stats["allocated_bytes.all.current"].get<std::int64_t>();
    const std::int64_t cublas = 2 * 32 * 1024 * 1024;
    // Within 64 KiB: 441 tensors rounded up to 512 bytes each.
    EXPECT_NEAR(static_cast<double>(s.parameters + s.optimizer_state + cublas), static_cast<double>(allocated), 65536.0)
        << name;
  }
}

JobSpec spec_with(Strategy strategy, std::uint64_t gpus, Precision precision, Optimizer optimizer = Optimizer::kAdamW) {
  JobSpec spec = load_recorded_run(kFixtures / "plan_p1").spec;
  spec.parallel.strategy = strategy;
  spec.parallel.world_size = gpus;
  spec.training.precision = precision;
  spec.training.optimizer = optimizer;
  return spec;
}

TEST(Sharding, ZeroStagesFollowDeepSpeedsEstimators) {
  const JobSpec zero2 = spec_with(Strategy::kZero2, 8, Precision::kBf16);
  const std::uint64_t P = zero2.model.parameters();
  const StateBytes s2 = state_bytes(zero2);
  // estimate_zero2_model_states_mem_needs: 4P + 16P/N (bf16 params and grads; fp32 grads,
  // master and Adam partitioned).
  EXPECT_NEAR(static_cast<double>(s2.parameters + s2.gradients + s2.optimizer_state), 4.0 * P + 16.0 * P / 8, 2.0);
  EXPECT_EQ(s2.optimizer_temporaries, 0u) << "fused Adam updates in place";
  const StateBytes s1 = state_bytes(spec_with(Strategy::kZero1, 8, Precision::kBf16));
  EXPECT_EQ(s1.parameters + s1.gradients + s1.optimizer_state, s2.parameters + s2.gradients + s2.optimizer_state);
  // estimate_zero3_model_states_mem_needs: 18P/N, plus the largest layer gathered (4 B each).
  const StateBytes s3 = state_bytes(spec_with(Strategy::kZero3, 8, Precision::kBf16));
  EXPECT_NEAR(static_cast<double>(s3.parameters + s3.gradients + s3.optimizer_state), 18.0 * P / 8, 3.0);
  const auto& m = zero2.model;
  EXPECT_EQ(s3.gathered_outer, 4 * std::max(m.layer_parameters(), m.vocab_size * m.hidden_size));
}

TEST(Sharding, FsdpSplitsEvenlyAndDdpAddsBuckets) {
  const StateBytes one = state_bytes(spec_with(Strategy::kNone, 1, Precision::kAmpBf16));
  const StateBytes fsdp1 = state_bytes(spec_with(Strategy::kFsdp, 1, Precision::kAmpBf16));
  EXPECT_EQ(fsdp1.parameters, one.parameters);
  EXPECT_EQ(fsdp1.optimizer_state, one.optimizer_state);
  const StateBytes fsdp8 = state_bytes(spec_with(Strategy::kFsdp, 8, Precision::kAmpBf16));
  EXPECT_EQ(fsdp8.parameters, (one.parameters + 7) / 8);
  EXPECT_EQ(fsdp8.optimizer_state, (one.optimizer_state + 7) / 8);
  EXPECT_EQ(fsdp8.gathered_outer, fsdp1.gathered_outer) << "gathered buffers are whole on every rank";
  const StateBytes ddp = state_bytes(spec_with(Strategy::kDdp, 8, Precision::kAmpBf16));
  EXPECT_EQ(ddp.parameters, one.parameters) << "DDP replicates";
  EXPECT_EQ(ddp.ddp_buckets, one.gradients);
}

TEST(Sharding, OptimizerStateBytesPerParameter) {
  const std::uint64_t P = spec_with(Strategy::kNone, 1, Precision::kBf16).model.parameters();
  EXPECT_EQ(state_bytes(spec_with(Strategy::kNone, 1, Precision::kBf16, Optimizer::kAdamW)).optimizer_state, 4 * P);
  EXPECT_EQ(state_bytes(spec_with(Strategy::kNone, 1, Precision::kBf16, Optimizer::kSgd)).optimizer_state, 2 * P);
  EXPECT_EQ(state_bytes(spec_with(Strategy::kNone, 1, Precision::kBf16, Optimizer::kAdamW8bit)).optimizer_state, 2 * P);
  EXPECT_EQ(state_bytes(spec_with(Strategy::kNone, 1, Precision::kFp32, Optimizer::kLion)).optimizer_state, 4 * P);
  EXPECT_EQ(state_bytes(spec_with(Strategy::kNone, 1, Precision::kBf16, Optimizer::kSgd)).optimizer_temporaries, 0u);
}

}  // namespace
}  // namespace fragscope::plan
