// The attention core (llama_attention.cpp): what SDPA's flash kernel and HF's eager attention
// keep for the backward, the flash backward's workspace, and selective recomputation, which
// keeps the core's inputs and runs the core again before its backward.
#include <vector>

#include <gtest/gtest.h>

#include "plan/llama_program.h"
#include "plan/llama_program_impl.h"
#include "tape_probe.h"

namespace fragscope::plan {
namespace {

using testing::probe;
using testing::probe_phase;
using testing::tiny_llama;

/// The tiny model in bf16 (no autocast casts), 2 × 64 tokens.
JobSpec bf16_llama(Attention attention, Checkpointing checkpointing = Checkpointing::kNone) {
  JobSpec s = tiny_llama();
  s.training.precision = Precision::kBf16;
  s.training.attention = attention;
  s.training.checkpointing = checkpointing;
  return s;
}

/// The activations the attention core leaves live: its output and what it saved.
std::uint64_t kept_by_the_core(const JobSpec& spec) {
  AllocationTape tape;
  tape.mark(ProgramPhase::kSetup, 0);
  LlamaProgram::Impl m(spec, tape);
  m.construct();
  m.seq = 64;
  m.tokens = 128;
  LlamaProgram::Impl::Block b;
  b.q_rot = m.alloc(2 * m.tokens * m.h, MemoryRole::kActivations);
  b.key = m.alloc(2 * m.tokens * m.kv, MemoryRole::kActivations);
  b.value = m.alloc(2 * m.tokens * m.kv, MemoryRole::kActivations);
  b.key_bytes = b.value_bytes = 2;
  tape.mark(ProgramPhase::kForward, 0);
  m.attention_core(b);
  return probe(tape.take()).live(MemoryRole::kActivations) - 2 * m.tokens * (m.h + 2 * m.kv);
}

TEST(LlamaAttention, SdpaKeepsItsOutputAndLogSumExpEagerKeepsTheScores) {
  const std::uint64_t t = 128, h = 256, heads = 4;
  EXPECT_EQ(kept_by_the_core(bf16_llama(Attention::kSdpa)), 2 * t * h + 4 * t * heads);
  // eager over 2 KV heads: repeat_kv's copies of k and v, the fp32 softmax and its bf16 cast
  // (batch × heads × seq² scores), the output
  const std::uint64_t scores = 2 * heads * 64 * 64;
  EXPECT_EQ(kept_by_the_core(bf16_llama(Attention::kEager)), 3 * 2 * t * h + 4 * scores + 2 * scores);
}

TEST(LlamaAttention, FlashBackwardTakesAWorkspaceSizedByTheHeads) {
  // the fp32 dq accumulator, GQA's expanded dk and dv, softmax_d per row + 1 (256-aligned)
  const std::uint64_t rows = 128 * 4, head_dim = 64, softmax_d = 2304;  // 4 × 2 × 4 × 65, aligned
  for (const std::uint64_t kv_heads : {2, 4}) {
    JobSpec s = bf16_llama(Attention::kSdpa);
    s.model.num_kv_heads = kv_heads;
    AllocationTape tape;
    tape.mark(ProgramPhase::kSetup, 0);
    LlamaProgram model(s, tape);
    model.construct();
    model.train_micro_step(64, 0);
    const std::uint64_t workspace = 4 * rows * head_dim + (kv_heads != 4 ? 4 * rows * head_dim : 0) + softmax_d;
    EXPECT_EQ(probe_phase(tape.take(), 2).count(MemoryRole::kTransients, workspace), 3u) << kv_heads;  // per layer
  }
}

TEST(LlamaAttention, SelectiveRecomputationRunsTheCoreAgainBeforeItsBackward) {
  auto backward_activations = [](Checkpointing checkpointing, std::uint64_t& block_bytes) {
    AllocationTape tape;
    tape.mark(ProgramPhase::kSetup, 0);
    LlamaProgram model(bf16_llama(Attention::kEager, checkpointing), tape);
    model.construct();
    model.train_micro_step(64, 0);
    block_bytes = model.block_activation_bytes();
    return probe_phase(tape.take(), 2).sizes(MemoryRole::kActivations);
  };
  std::uint64_t kept = 0, kept_selective = 0;
  EXPECT_TRUE(backward_activations(Checkpointing::kNone, kept).empty());
  const auto recomputed = backward_activations(Checkpointing::kSelective, kept_selective);
  // per layer: repeat_kv's copies, the softmax and its cast, the output, as in the forward
  const std::uint64_t t = 128, h = 256, scores = 2 * 4 * 64 * 64;
  const std::vector<std::uint64_t> core = {2 * t * h, 2 * t * h, 4 * scores, 2 * scores, 2 * t * h};
  std::vector<std::uint64_t> layers;
  for (int l = 0; l < 3; ++l) layers.insert(layers.end(), core.begin(), core.end());
  EXPECT_EQ(recomputed, layers);
  // the block keeps the core's inputs (already kept for the projections' backward) instead of
  // what the core saved: the copies and the scores
  EXPECT_EQ(kept - kept_selective, 2 * 2 * t * h + 6 * scores);
}

}  // namespace
}  // namespace fragscope::plan
