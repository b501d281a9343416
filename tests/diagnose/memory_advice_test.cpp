// Memory reductions the snapshot shows, with the bytes live at the OOM, on field recordings of
// HF models trained by Accelerate and HF's Trainer, and a foreach AdamW that failed in its step.
#include "diagnose/memory_advice.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "../fixture_support.h"
#include "diagnose/live_blocks.h"
#include "diagnose/run_growth.h"
#include "field_recordings.h"
#include "util/bytes.h"

namespace fragscope::diagnose {
namespace {

using fragscope::testing::last_oom;
using fragscope::testing::read_field_snapshot;

std::vector<MemoryAdvice> advice_for(const snapshot::Snapshot& snap, std::uint64_t capacity) {
  const std::size_t oom = last_oom(snap);
  const TraceUnits units = find_trace_units(snap, 0, oom);
  const auto live = live_blocks_before(snap.trace(0), oom);
  return memory_advice(snap, 0, oom, live, units, find_run_growth(snap, 0, live, units), capacity);
}

const MemoryAdvice* find(const std::vector<MemoryAdvice>& advice, std::string_view key) {
  const auto it = std::find_if(advice.begin(), advice.end(), [&](const MemoryAdvice& a) { return a.key == key; });
  return it == advice.end() ? nullptr : &*it;
}

// A Llama called with labels in a training loop keeps a DynamicCache: per layer its keys and
// values, batch × KV heads × tokens × head dim, in fp32 (under bf16 autocast the rotary
// embedding's fp32 cos/sin promote them). acc_edge: 16 layers, 12 heads of 128, batch 4, 3072
// tokens: 16 × 2 × 4 × 12 × 3072 × 128 × 4 bytes = 2.25 GiB.
TEST(MemoryAdvice, KvCacheInTrainingIsTheCachesBytes) {
  const auto advice = advice_for(read_field_snapshot("acc_edge"), 32 * kGiB);
  const MemoryAdvice* kv = find(advice, "kv_cache");
  ASSERT_NE(kv, nullptr);
  EXPECT_EQ(kv->bytes, 16ull * 2 * 4 * 12 * 3072 * 128 * 4);
  EXPECT_NE(kv->setting.find("use_cache = False"), std::string::npos);
}

// HF Trainer's eval with batch 48: the failing malloc is cross_entropy's fp32 log-softmax of
// the logits' fp32 upcast, each 48 × 2048 × 32000 × 4 bytes = 11.72 GiB.
TEST(MemoryAdvice, Fp32LogitsAndTheEvalBatch) {
  const auto advice = advice_for(read_field_snapshot("hfc_lo"), 31 * kGiB);
  const MemoryAdvice* logits = find(advice, "fp32_logits");
  ASSERT_NE(logits, nullptr);
  EXPECT_GE(logits->bytes, 2 * 48ull * 2048 * 32000 * 4);
  const MemoryAdvice* batch = find(advice, "eval_batch");
  ASSERT_NE(batch, nullptr);
  EXPECT_GE(batch->bytes, logits->bytes);  // the batch's logits are part of it
  EXPECT_EQ(find(advice, "kv_cache"), nullptr);
  EXPECT_GE(advice.front().bytes, advice.back().bytes);
}

// torchvision's FCN (field fcn_lo, batch 12 at 448 × 448, 21 classes) fails in cross_entropy's
// fp32 log-softmax of its per-pixel scores: 12 × 21 × 448 × 448 × 4 bytes. The words are a
// segmentation's too, not only a language model's.
TEST(MemoryAdvice, Fp32ScoresOfASegmentationLossArePerPixel) {
  const auto advice = advice_for(read_field_snapshot("fcn_lo"), 6 * kGiB);
  const MemoryAdvice* logits = find(advice, "fp32_logits");
  ASSERT_NE(logits, nullptr);
  EXPECT_EQ(logits->bytes, 12ull * 21 * 448 * 448 * 4);
  EXPECT_NE(logits->evidence.find("every token or pixel"), std::string::npos) << logits->evidence;
  EXPECT_EQ(logits->evidence.find("vocabulary"), std::string::npos) << logits->evidence;
}

// AdamW (foreach) failed in its first step (held-out B_cap): its foreach results live at the OOM, made in the
// step that failed (AdamW makes its state in `_init_group`, apart).
TEST(MemoryAdvice, ForeachTemporariesOfAFailingOptimizerStep) {
  const snapshot::Snapshot snap = snapshot::read_snapshot_file(
      (std::filesystem::path(FRAGSCOPE_SOURCE_DIR) / "tests/data/heldout/B_cap/snapshot.pickle.gz").string());
  const MemoryAdvice* foreach = find(advice_for(snap, 14 * kGiB), "foreach_temporaries");
  ASSERT_NE(foreach, nullptr);
  EXPECT_GT(foreach->bytes, 256 * kMiB);
  EXPECT_NE(foreach->setting.find("fused=True"), std::string::npos);
}

// fast.ai-style progressive resizing (field prz_edge) steps SGD with momentum and weight decay, foreach, and ran
// out of memory in a forward: the 97.49 MiB that `_multi_tensor_sgd` made and is live are its momentum buffers
// (cloned from the gradients on the first step), which SGD's fused kernel keeps too. So with torchvision's
// segmentation recipe (fcn_lo, 134.74 MiB) and Lightning's validation (lvo_edge): no foreach advice.
TEST(MemoryAdvice, AnOptimizersStateIsNotItsForeachTemporaries) {
  for (const char* name : {"prz_edge", "fcn_lo", "lvo_edge"}) {
    const auto advice = advice_for(read_field_snapshot(name), 8 * kGiB);
    EXPECT_EQ(find(advice, "foreach_temporaries"), nullptr) << name;
  }
}

// A loop that keeps each step's logits (field leak_lo, 500 MiB a step): what the earlier steps left is the advice's
// bytes, named at the program's line that made them.
TEST(MemoryAdvice, ARunThatGrowsIsToldToKeepItsTensorsOffTheGpu) {
  const auto advice = advice_for(read_field_snapshot("leak_lo"), 12 * kGiB);
  const MemoryAdvice* kept = find(advice, "kept_per_step");
  ASSERT_NE(kept, nullptr);
  EXPECT_GE(kept->bytes, 8 * 16ull * 512 * 32000 * 2);
  EXPECT_EQ(&advice.front(), kept);
  EXPECT_NE(kept->setting.find(".cpu()"), std::string::npos);
  EXPECT_NE(kept->evidence.find("epoch_logits_leak.py"), std::string::npos) << kept->evidence;
}

}  // namespace
}  // namespace fragscope::diagnose
