#include "plan/throughput_model.h"

#include <filesystem>

#include <gtest/gtest.h>

namespace fragscope::plan {
namespace {

JobSpec p1() { return read_job_spec(std::filesystem::path(FRAGSCOPE_SOURCE_DIR) / "examples" / "plan_p1.toml"); }

TEST(ThroughputModel, FullCheckpointingRepeatsTheBlocksForward) {
  JobSpec a = p1(), b = p1();
  b.training.checkpointing = Checkpointing::kFull;
  const double full = throughput_factor(a, b);
  EXPECT_GT(full, 0.70);
  EXPECT_LT(full, 0.80);               // one more forward of every block: ~1/3 more work on the blocks
  b.training.checkpointed_layers = 8;  // half of the 16 blocks
  const double half = throughput_factor(a, b);
  EXPECT_GT(half, full);
  EXPECT_LT(half, 1.0);
  EXPECT_DOUBLE_EQ(throughput_factor(a, a), 1.0);
}

TEST(ThroughputModel, MigSlicesGetTheirShareOfTheSms) {
  JobSpec a = p1(), b = p1();
  b.hardware.mig = "3g.71gb";
  EXPECT_NEAR(throughput_factor(a, b), 3.0 / 7.0, 1e-9);
}

TEST(ThroughputModel, ShardingCollectivesCostAcrossNodes) {
  JobSpec a = read_job_spec(std::filesystem::path(FRAGSCOPE_SOURCE_DIR) / "examples" / "seed-13b.toml");
  JobSpec small = a;
  small.training.micro_batch_size = 1;
  small.training.grad_accum = 32;
  EXPECT_GT(throughput_factor(a, small), 0.9);             // within a node the gathers hide under compute
  a.parallel.world_size = small.parallel.world_size = 32;  // four nodes
  EXPECT_LT(throughput_factor(a, small), 0.8);
}

TEST(ThroughputModel, OffloadAndChunkedLossCostSomething) {
  JobSpec a = read_job_spec(std::filesystem::path(FRAGSCOPE_SOURCE_DIR) / "examples" / "seed-13b.toml");
  JobSpec b = a;
  b.training.cpu_offload = CpuOffload::kParameters;
  EXPECT_LT(throughput_factor(a, b), 1.0);
  b = a;
  b.training.loss = Loss::kChunked;
  EXPECT_LT(throughput_factor(a, b), 1.0);
  EXPECT_EQ(throughput_cost_text(1.0), "none");
  EXPECT_EQ(throughput_cost_text(0.75), "−25.0% tokens/s per GPU (estimate)");
  EXPECT_EQ(throughput_cost_text(1.5), "+50.0% tokens/s per GPU (estimate)");
}

}  // namespace
}  // namespace fragscope::plan
