#include "plan/proposals.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "plan/job_spec.h"
#include "plan/throughput_model.h"
#include "util/error.h"
#include "util/gpu_catalog.h"

namespace fragscope::plan {
namespace {

const std::filesystem::path kExamples = std::filesystem::path(FRAGSCOPE_SOURCE_DIR) / "examples";

const Proposal* find(const ProposalSet& set, std::string_view prefix) {
  for (const auto& p : set.proposals)
    if (p.name.starts_with(prefix)) return &p;
  return nullptr;
}

ProposalSet propose_for(const JobSpec& spec, std::optional<std::uint64_t> target = std::nullopt) {
  return propose(spec, estimate_memory(spec), target);
}

TEST(Proposals, SeedJobNeedsAChangeAndTheRecommendationIsWithinTheLimit) {
  const JobSpec seed = read_job_spec(kExamples / "seed-13b.toml");
  const ProposalSet set = propose_for(seed);
  EXPECT_FALSE(set.current.fits);
  EXPECT_EQ(set.current_global_batch, 256u);
  EXPECT_EQ(set.target_global_batch, 512u);
  const Proposal* global = find(set, "global batch 512");
  ASSERT_NE(global, nullptr);
  EXPECT_EQ(global->spec.training.grad_accum, 32u);
  ASSERT_TRUE(set.recommended);
  const Proposal& best = set.proposals[*set.recommended];
  EXPECT_TRUE(best.workable);
  EXPECT_TRUE(best.estimate.within_hbm_limit);  // under the canary's 90% of HBM, not just fitting
  EXPECT_FALSE(best.more_hardware);
  EXPECT_FALSE(best.changes_numerics);
  EXPECT_EQ(best.spec.global_batch(), 512u);  // every proposal keeps the target global batch
  for (const auto& p : set.proposals) {
    if (p.workable && p.estimate.within_hbm_limit && !p.more_hardware && !p.changes_numerics) {
      EXPECT_LE(p.throughput_factor, best.throughput_factor + 1e-9) << p.name;
    }
    EXPECT_NE(p.cost.find(p.throughput_factor == 1.0 ? "none" : "(estimate)"), std::string::npos) << p.name;
  }
  EXPECT_NE(set.recommendation.find(best.name), std::string::npos);
}

TEST(Proposals, PartialCheckpointingIsTheFewestBlocksWithinTheLimit) {
  const JobSpec seed = read_job_spec(kExamples / "seed-13b.toml");
  const ProposalSet set = propose_for(seed);
  const Proposal* full = find(set, "activation checkpointing: full");
  ASSERT_NE(full, nullptr);
  EXPECT_TRUE(full->estimate.within_hbm_limit);
  const Proposal* partial = find(set, "activation checkpointing: ");
  for (const auto& p : set.proposals)
    if (p.name.find(" of 40 blocks") != std::string::npos) partial = &p;
  ASSERT_NE(partial, nullptr);
  ASSERT_TRUE(partial->spec.training.checkpointed_layers);
  const std::uint64_t k = *partial->spec.training.checkpointed_layers;
  EXPECT_TRUE(partial->estimate.within_hbm_limit);
  EXPECT_GT(partial->throughput_factor, full->throughput_factor);
  JobSpec fewer = partial->spec;
  fewer.training.checkpointed_layers = k - 1;
  EXPECT_FALSE(estimate_memory(fewer).within_hbm_limit);  // one block fewer is over the limit
}

TEST(Proposals, EveryLeverIsOfferedAndCosted) {
  const JobSpec seed = read_job_spec(kExamples / "seed-13b.toml");
  const ProposalSet set = propose_for(seed);
  for (const char* name :
       {"AdamW fused=True", "AdamW foreach=False", "8-bit AdamW (bitsandbytes)", "CPU offload (FSDP2 CPUOffloadPolicy)",
        "chunked cross-entropy", "fused linear cross-entropy", "use_cache=False", "expandable_segments",
        "activation checkpointing: selective"})
    EXPECT_NE(find(set, name), nullptr) << name;
  const Proposal* fused = find(set, "AdamW fused=True");
  const Proposal* eight = find(set, "8-bit AdamW");
  EXPECT_TRUE(eight->changes_numerics);
  EXPECT_EQ(eight->memory_basis, "derived");
  EXPECT_LT(eight->estimate.peak_reserved_bytes, fused->estimate.peak_reserved_bytes);
  EXPECT_LT(find(set, "use_cache=False")->estimate.peak_allocated_bytes, set.current.peak_allocated_bytes);
  EXPECT_LT(find(set, "CPU offload")->estimate.peak_allocated_bytes, set.current.peak_allocated_bytes);
  EXPECT_LT(find(set, "CPU offload")->throughput_factor, 1.0);
}

TEST(Proposals, FusedAdamWDropsTheForeachTemporaries) {
  // The issue's 7B spec whose peak was 6.74 GiB of foreach temporaries: fused=True has none.
  const JobSpec ddp = read_job_spec(kExamples / "llama2-7b-ddp.toml");
  const ProposalSet set = propose_for(ddp);
  const Proposal* fused = find(set, "AdamW fused=True");
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(fused->estimate.item("optimizer_temporaries"), 0u);
  // no more than the GPU-resident step scalars (512-byte blocks) of its 291 tensors
  EXPECT_LE(fused->estimate.peak_allocated_bytes, set.current.peak_allocated_bytes + 291 * 512);
}

TEST(Proposals, ChunkedCrossEntropyShrinksALogitsBoundPeak) {
  // The issue's 1B spec whose peak is logits: Llama-3's 128k vocabulary, long micro-batches,
  // checkpointed blocks.
  JobSpec s = parse_job_spec(R"(
[model]
preset = "llama-3.2-1b"
[training]
seq_len = 8192
micro_batch_size = 8
activation_checkpointing = "full"
[hardware]
gpu = "H200"
)",
                             "1b.toml");
  const ProposalSet set = propose_for(s);
  EXPECT_GT(set.current.item("logits_and_loss"), set.current.peak_allocated_bytes / 2);
  const Proposal* chunked = find(set, "chunked cross-entropy");
  const Proposal* fused = find(set, "fused linear cross-entropy");
  ASSERT_NE(chunked, nullptr);
  ASSERT_NE(fused, nullptr);
  EXPECT_LT(chunked->estimate.peak_reserved_bytes, set.current.peak_reserved_bytes / 2);
  EXPECT_LT(fused->estimate.peak_reserved_bytes, set.current.peak_reserved_bytes / 2);
  EXPECT_LT(chunked->throughput_factor, 1.0);  // lm_head runs twice
}

TEST(Proposals, SmallMicroBatchesUnderFsdpAcrossNodesPayForTheGathers) {
  // The issue: micro-batch 1's −5% ignored FSDP's doubled gathers across nodes.
  JobSpec seed = read_job_spec(kExamples / "seed-13b.toml");
  seed.parallel.world_size = 16;  // two nodes
  JobSpec one = seed;
  one.training.micro_batch_size = 1;
  one.training.grad_accum *= 2;
  const double across_nodes = throughput_factor(seed, one);
  seed.parallel.world_size = 8;
  one.parallel.world_size = 8;
  const double one_node = throughput_factor(seed, one);
  EXPECT_LT(across_nodes, 0.80);
  EXPECT_GT(one_node, 0.90);
}

TEST(Proposals, ShardingHelpsWhereReplicationCannot) {
  const JobSpec ddp = read_job_spec(kExamples / "llama2-7b-ddp.toml");
  const ProposalSet set = propose_for(ddp);
  const Proposal* more_ddp = find(set, "ddp over 8 GPUs");
  ASSERT_NE(more_ddp, nullptr);
  EXPECT_FALSE(more_ddp->workable);
  EXPECT_EQ(more_ddp->estimate.peak_allocated_bytes, set.current.peak_allocated_bytes);
  const Proposal* fsdp = find(set, "fsdp over 8 GPUs");
  ASSERT_NE(fsdp, nullptr);
  EXPECT_LT(fsdp->estimate.peak_allocated_bytes, set.current.peak_allocated_bytes);
  const Proposal* mig = find(set, "MIG 3g.40gb");
  ASSERT_NE(mig, nullptr);
  EXPECT_FALSE(mig->workable);  // no P2P between MIG instances
}

TEST(Proposals, AJobWithinTheLimitIsKept) {
  const JobSpec p1 = read_job_spec(kExamples / "plan_p1.toml");
  const ProposalSet set = propose_for(p1);
  EXPECT_TRUE(set.current.within_hbm_limit);
  EXPECT_FALSE(set.recommended);
  EXPECT_EQ(set.recommendation.rfind("keep the job as specified", 0), 0u);
  int slices = 0;
  for (const auto& p : set.proposals) {
    if (!p.name.starts_with("MIG ")) continue;
    ++slices;
    EXPECT_LE(p.estimate.device_bytes, find_gpu("H200")->total_bytes) << p.name;
    EXPECT_TRUE(p.workable) << p.name;  // one GPU: a slice is an option
  }
  EXPECT_EQ(slices, 6);
  EXPECT_FALSE(find(set, "MIG 1g.18gb")->estimate.fits);
  EXPECT_TRUE(find(set, "MIG 7g.141gb")->estimate.fits);
}

TEST(Proposals, AGlobalBatchNoMicroBatchReachesIsAnError) {
  JobSpec p1 = read_job_spec(kExamples / "plan_p1.toml");  // mbs 4 on one GPU
  const ProposalSet set = propose_for(p1, 10);
  const Proposal* global = find(set, "global batch 10");
  ASSERT_NE(global, nullptr);
  EXPECT_FALSE(global->workable);
  EXPECT_NE(global->problem.find("not a multiple of micro_batch_size 4"), std::string::npos);
  ASSERT_TRUE(set.recommended);  // only proposals reaching 10 (micro-batch 2 or 1)
  EXPECT_EQ(set.proposals[*set.recommended].spec.global_batch(), 10u);
  p1.parallel.strategy = Strategy::kDdp;
  p1.parallel.world_size = 4;
  EXPECT_THROW(propose_for(p1, 10), InputError);  // not a multiple of 4 ranks
}

TEST(Proposals, AProposalPastAMillionMicroStepsPerOptimizerStepCannotWork) {
  // --global-batch 2^40 at micro-batch 4 would be grad_accum 2^38, beyond what a job may have:
  // each such proposal is flagged and replayed at the job's grad_accum, never at 2^38.
  const JobSpec p1 = read_job_spec(kExamples / "plan_p1.toml");
  const ProposalSet set = propose_for(p1, kMaxGlobalBatch);
  const Proposal* global = find(set, "global batch");
  ASSERT_NE(global, nullptr);
  EXPECT_FALSE(global->workable);
  EXPECT_NE(global->problem.find("needs grad_accum 274877906944, beyond 1 Mi micro-steps"), std::string::npos);
  for (const auto& p : set.proposals) EXPECT_LE(p.spec.training.grad_accum, kMaxGradAccum) << p.name;
  EXPECT_FALSE(set.recommended);
}

TEST(Proposals, ExpandableSegmentsOnlyShrinksTheCache) {
  const JobSpec p1 = read_job_spec(kExamples / "plan_p1.toml");
  const ProposalSet set = propose_for(p1);
  const Proposal* expandable = find(set, "expandable_segments");
  ASSERT_NE(expandable, nullptr);
  EXPECT_LE(expandable->estimate.peak_reserved_bytes, set.current.peak_reserved_bytes);
  EXPECT_EQ(expandable->overrides.front(), "hardware.alloc_conf=\"expandable_segments:True\"");
}

TEST(Proposals, LargestFitIsTheEdgeOfTheLimit) {
  const JobSpec p1 = read_job_spec(kExamples / "plan_p1.toml");
  const LargestFit fit = largest_fit(p1);
  ASSERT_TRUE(fit.micro_batch_size && fit.seq_len);
  EXPECT_TRUE(fit.at_micro_batch->within_hbm_limit);
  JobSpec bigger = p1;
  bigger.training.micro_batch_size = *fit.micro_batch_size + 1;
  EXPECT_FALSE(estimate_memory(bigger).within_hbm_limit);
  EXPECT_EQ(*fit.seq_len % 8, 0u);
  bigger = p1;
  bigger.training.seq_len = *fit.seq_len + 8;
  EXPECT_FALSE(estimate_memory(bigger).within_hbm_limit);
}

}  // namespace
}  // namespace fragscope::plan
