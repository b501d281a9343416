// A run that grows (run_growth.h), on field recordings: a loop that keeps each step's logits grows by them, a KV cache
// remade larger at every token grows by it; loops that hold a prefetched batch, gradients across micro-steps or an
// eval's outputs do not.

#include "diagnose/run_growth.h"

#include <gtest/gtest.h>

#include "diagnose/live_blocks.h"
#include "field_recordings.h"
#include "util/bytes.h"

namespace fragscope::diagnose {
namespace {

using fragscope::testing::last_oom;
using fragscope::testing::read_field_snapshot;

RunGrowth growth_of(const std::string& name) {
  const snapshot::Snapshot snap = read_field_snapshot(name);
  const std::size_t oom = last_oom(snap);
  return find_run_growth(snap, 0, live_blocks_before(snap.trace(0), oom), find_trace_units(snap, 0, oom));
}

// epoch_logits_leak.py keeps `output.detach()` (16 × 512 × 32,000 bf16 logits, 500 MiB) and the step's batch
// (16 × 513 int64 token ids, a view of it) every step. leak_lo failed in the trace's ninth step: seven steps are
// counted (the one before the failing step is left out), and eight steps' logits are live.
TEST(RunGrowth, ALoopKeepingEachStepsLogitsGrowsByThem) {
  const RunGrowth g = growth_of("leak_lo");
  ASSERT_TRUE(g.grows());
  const std::uint64_t logits = 16ull * 512 * 32000 * 2;
  EXPECT_GE(g.per_step_bytes, logits);
  EXPECT_LT(g.per_step_bytes, logits + kMiB);
  EXPECT_EQ(g.steps, 7u);
  EXPECT_GE(g.kept_bytes, 8 * logits);
  EXPECT_LT(g.kept_bytes, 8 * (logits + kMiB));
  EXPECT_NE(g.frame.find("epoch_logits_leak.py"), std::string::npos) << g.frame;
  EXPECT_FALSE(g.eval_batches);
}

// Lightning's validation_step_outputs keeping each batch's fp32 probabilities, 16 × 21 × 512 × 512, and its int64
// masks (field lvo_edge, batch 11 of the validation): the eval batches grow by both.
TEST(RunGrowth, AValidationKeepingEachBatchsOutputsGrowsByThem) {
  const RunGrowth g = growth_of("lvo_edge");
  ASSERT_TRUE(g.grows());
  EXPECT_EQ(g.per_step_bytes, 16ull * 21 * 512 * 512 * 4 + 16ull * 512 * 512 * 8);
  EXPECT_NE(g.frame.find("lightning_val_outputs.py"), std::string::npos) << g.frame;
  EXPECT_TRUE(g.eval_batches);
}

// A ring that kept only the last three eval batches before the failing one (lvo_edge's trace cut to its last
// quarter was called fragmentation): two steps, both leaving the same outputs, are enough.
TEST(RunGrowth, TwoStepsLeavingTheSameBlocksAreEnough) {
  const snapshot::Snapshot snap = read_field_snapshot("lvo_edge");
  const std::size_t oom = last_oom(snap);
  TraceUnits units = find_trace_units(snap, 0, oom);
  ASSERT_GT(units.starts.size(), 4u);
  units.starts.erase(units.starts.begin(), units.starts.end() - 4);
  const auto live = live_blocks_before(snap.trace(0), oom);
  const RunGrowth g = find_run_growth(snap, 0, live, units);
  ASSERT_TRUE(g.grows());
  EXPECT_EQ(g.steps, 2u);
  units.starts.erase(units.starts.begin());
  EXPECT_FALSE(find_run_growth(snap, 0, live, units).grows());
}

// A GPT loop sampling 384 tokens for 256 prompts with a KV cache grown by torch.cat at every token (field gsl_edge,
// failing at token 238): each token remakes the cache one token larger and frees the old one, 256 prompts × 1 token
// × 1,024 wide × 2 bytes for keys and values in each of 12 layers: 12 MiB a token, and no decode step leaves a
// block live. The memory live at each step's start rises by it (the newest 64 steps looked at, all rising).
TEST(RunGrowth, ACacheRemadeLargerAtEveryTokenGrowsTheRun) {
  const RunGrowth g = growth_of("gsl_edge");
  ASSERT_TRUE(g.grows());
  EXPECT_TRUE(g.regrown);
  const std::uint64_t token = 2ull * 12 * 256 * 1024 * 2;
  EXPECT_GE(g.per_step_bytes, token);
  EXPECT_LT(g.per_step_bytes, token + kMiB);
  EXPECT_EQ(g.steps, 64u);
  EXPECT_GE(g.kept_bytes, 64 * token);
  EXPECT_NE(g.frame.find("gpt_sample_in_loop.py"), std::string::npos) << g.frame;
}

// A DQN's replay buffer on the GPU grown by torch.cat at every collection of 256 transitions (field dqn_*): two
// buffers of 84 × 84 × 4 uint8 frames, 6.89 MiB a collection each, so the memory live at each collection's start
// rises by 13.78 MiB. Each cat holds the old buffer and its larger copy at once: the collections' peaks rise by
// three buffers' growth, 20.67 MiB, and the steps after the failing one need that much more each.
TEST(RunGrowth, ATensorRemadeLargerRaisesThePeaksByItsCopyToo) {
  const std::uint64_t frames = 256ull * 4 * 84 * 84;
  for (const char* name : {"dqn_edge", "dqn_lo"}) {
    SCOPED_TRACE(name);
    const RunGrowth g = growth_of(name);
    ASSERT_TRUE(g.grows());
    EXPECT_TRUE(g.regrown);
    EXPECT_GE(g.per_step_bytes, 2 * frames);
    EXPECT_LT(g.per_step_bytes, 2 * frames + kMiB);
    EXPECT_GE(g.peak_per_step_bytes, 3 * frames);
    EXPECT_LT(g.peak_per_step_bytes, 3 * frames + kMiB);
    EXPECT_EQ(g.peak_growth_bytes(), g.peak_per_step_bytes);
    EXPECT_NE(g.frame.find("dqn_replay.py"), std::string::npos) << g.frame;
  }
  // A run that keeps blocks, remaking none, grows its peaks by what it keeps.
  const RunGrowth kept = growth_of("leak_lo");
  EXPECT_EQ(kept.peak_per_step_bytes, 0u);
  EXPECT_EQ(kept.peak_growth_bytes(), kept.per_step_bytes);
}

// timm's prefetcher holds the next batch from a side stream (tpf0_edge); HF's Trainer accumulating gradients holds
// them across micro-steps (hfga_lo); a Fabric loop frees each step's activations (fab_edge); the HF Trainer's eval
// concatenation frees the older outputs: only the batch before the failing one holds one (hel_lo); MoCo's queue of
// keys is written in place (moco_lo); timm's EMA copy of the model is made once (timm_edge).
TEST(RunGrowth, PrefetchedBatchesHeldGradientsAndEvalOutputsAreNoGrowth) {
  for (const char* name : {"tpf0_edge", "hfga_lo", "fab_edge", "hel_lo", "moco_lo", "timm_edge"}) {
    SCOPED_TRACE(name);
    const RunGrowth g = growth_of(name);
    EXPECT_FALSE(g.grows()) << g.per_step_bytes << " over " << g.steps << " steps at " << g.frame;
  }
}

}  // namespace
}  // namespace fragscope::diagnose
