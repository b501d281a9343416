#include "plan/proposals.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "plan/job_spec.h"
#include "util/gpu_catalog.h"

namespace fragscope::plan {
namespace {

const std::filesystem::path kExamples = std::filesystem::path(FRAGSCOPE_SOURCE_DIR) / "examples";

const Proposal* find(const ProposalSet& set, std::string_view prefix) {
  for (const auto& p : set.proposals)
    if (p.name.starts_with(prefix)) return &p;
  return nullptr;
}

TEST(Proposals, SeedJobNeedsAChangeAndTheRecommendationFitsCheapest) {
  const JobSpec seed = read_job_spec(kExamples / "seed-13b.toml");
  const ProposalSet set = propose(seed, std::nullopt);
  EXPECT_FALSE(set.current.fits);
  EXPECT_EQ(set.current_global_batch, 256u);
  ASSERT_TRUE(set.target_global_batch);
  EXPECT_EQ(*set.target_global_batch, 512u);
  const Proposal* global = find(set, "global batch 512");
  ASSERT_NE(global, nullptr);
  EXPECT_EQ(global->spec.training.grad_accum, 32u);
  ASSERT_TRUE(set.recommended);
  const Proposal& best = set.proposals[*set.recommended];
  EXPECT_TRUE(best.workable);
  EXPECT_TRUE(best.estimate.within_hbm_limit);  // under the canary's 90% of HBM, not just fitting
  EXPECT_FALSE(best.more_hardware);
  EXPECT_EQ(best.spec.global_batch(), 512u);  // every proposal keeps the target global batch
  // amp-bf16 is torch.autocast over fp32 FSDP parameters: micro-batch 1 no longer fits; full
  // checkpointing with expandable segments does.
  EXPECT_EQ(best.name, "full checkpointing + expandable_segments");
  EXPECT_FALSE(find(set, "micro-batch 1 (grad_accum up)")->estimate.fits);
  for (const auto& p : set.proposals) {
    if (p.workable && p.estimate.within_hbm_limit && !p.more_hardware) {
      EXPECT_LE(p.throughput_factor, best.throughput_factor + 1e-9) << p.name;
    }
  }
  EXPECT_NE(set.recommendation.find(best.name), std::string::npos);
}

TEST(Proposals, CheckpointingLowersThePeakAndCostsThroughput) {
  const JobSpec seed = read_job_spec(kExamples / "seed-13b.toml");
  const ProposalSet set = propose(seed, std::nullopt);
  const Proposal* full = find(set, "activation checkpointing: full");
  ASSERT_NE(full, nullptr);
  EXPECT_LT(full->estimate.peak_allocated_bytes, set.current.peak_allocated_bytes / 2);
  EXPECT_DOUBLE_EQ(full->throughput_factor, 0.75);
  const Proposal* selective = find(set, "activation checkpointing: selective");
  ASSERT_NE(selective, nullptr);
  EXPECT_FALSE(selective->problem.empty());  // SDPA keeps no scores: nothing to gain
}

TEST(Proposals, ShardingHelpsWhereReplicationCannot) {
  const JobSpec ddp = read_job_spec(kExamples / "llama2-7b-ddp.toml");
  const ProposalSet set = propose(ddp, std::nullopt);
  const Proposal* more_ddp = find(set, "ddp over 8 GPUs");
  ASSERT_NE(more_ddp, nullptr);
  EXPECT_FALSE(more_ddp->workable);
  EXPECT_EQ(more_ddp->estimate.peak_allocated_bytes, set.current.peak_allocated_bytes);
  const Proposal* fsdp = find(set, "fsdp over 8 GPUs");
  ASSERT_NE(fsdp, nullptr);
  EXPECT_LT(fsdp->estimate.peak_allocated_bytes, set.current.peak_allocated_bytes);
  // A multi-GPU job cannot move onto MIG slices (no P2P between instances).
  const Proposal* mig = find(set, "MIG 3g.40gb");
  ASSERT_NE(mig, nullptr);
  EXPECT_FALSE(mig->workable);
}

TEST(Proposals, MigSlicesAreNeverLargerThanTheCard) {
  const JobSpec p1 = read_job_spec(kExamples / "plan_p1.toml");
  const ProposalSet set = propose(p1, std::nullopt);
  EXPECT_TRUE(set.current.fits);
  EXPECT_FALSE(set.recommended);  // it fits: keep it
  EXPECT_EQ(set.recommendation.rfind("keep the job as specified", 0), 0u);
  int slices = 0;
  for (const auto& p : set.proposals) {
    if (!p.name.starts_with("MIG ")) continue;
    ++slices;
    EXPECT_LE(p.estimate.device_bytes, find_gpu("H200")->total_bytes) << p.name;
    EXPECT_TRUE(p.workable) << p.name;  // one GPU: a slice is an option
  }
  EXPECT_EQ(slices, 6);
  EXPECT_FALSE(find(set, "MIG 1g.18gb")->estimate.fits);   // 34.6 GiB of peak in 17.5 GiB
  EXPECT_TRUE(find(set, "MIG 7g.141gb")->estimate.fits);   // the whole card
  EXPECT_NEAR(find(set, "MIG 3g.71gb")->throughput_factor, 3.0 / 7.0, 1e-12);
}

TEST(Proposals, SameHardwareComesBeforeALargerSlice) {
  // Llama-3-8B on a 3g.71gb slice fits at 91% of the slice: the whole card (7g) would be faster,
  // but expandable_segments makes it fit on the slice it has.
  const JobSpec mig = read_job_spec(kExamples / "llama3-8b-mig.toml");
  const ProposalSet set = propose(mig, std::nullopt);
  EXPECT_TRUE(set.current.fits);
  EXPECT_FALSE(set.current.within_hbm_limit);
  ASSERT_TRUE(set.recommended);
  EXPECT_EQ(set.proposals[*set.recommended].name, "expandable_segments");
  const Proposal* whole = find(set, "MIG 7g.141gb");
  ASSERT_NE(whole, nullptr);
  EXPECT_TRUE(whole->more_hardware);
  EXPECT_NEAR(whole->throughput_factor, 7.0 / 3.0, 1e-12);
  EXPECT_FALSE(find(set, "MIG 1g.18gb")->more_hardware);
}

TEST(Proposals, GlobalBatchThatCannotBeReachedIsFlagged) {
  const JobSpec p1 = read_job_spec(kExamples / "plan_p1.toml");  // mbs 4 on one GPU
  const ProposalSet set = propose(p1, 10);
  const Proposal* global = find(set, "global batch 10");
  ASSERT_NE(global, nullptr);
  EXPECT_FALSE(global->workable);
  EXPECT_NE(global->problem.find("not a multiple of micro_batch_size 4"), std::string::npos);
}

TEST(Proposals, ExpandableSegmentsOnlyShrinksTheHeadroom) {
  const JobSpec p1 = read_job_spec(kExamples / "plan_p1.toml");
  const ProposalSet set = propose(p1, std::nullopt);
  const Proposal* expandable = find(set, "expandable_segments");
  ASSERT_NE(expandable, nullptr);
  EXPECT_EQ(expandable->estimate.peak_allocated_bytes, set.current.peak_allocated_bytes);
  EXPECT_LT(expandable->estimate.peak_reserved_bytes, set.current.peak_reserved_bytes);
}

}  // namespace
}  // namespace fragscope::plan
