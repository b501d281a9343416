// lm_head and the loss (llama_loss.cpp): HF's standard loss holds the whole vocabulary's logits
// in fp32; a chunked loss holds one chunk's at a time and recomputes each chunk in the
// backward; Liger's fused loss works in chunks of 2^⌈log2(T / ⌈V/h⌉)⌉ tokens and has its
// gradients by the end of the forward.
#include <vector>

#include <gtest/gtest.h>

#include "plan/llama_program.h"
#include "tape_probe.h"

namespace fragscope::plan {
namespace {

using testing::probe_phase;
using testing::TapeProbe;
using testing::tiny_llama;

constexpr std::uint64_t kVocab = 1000, kHidden = 256;

struct Phases {
  TapeProbe forward, backward;
};

/// One micro-step of 2 × `seq_len` tokens under `loss` (amp-bf16).
Phases one_micro_step(Loss loss, std::uint64_t seq_len, std::uint64_t chunk_tokens = 128) {
  JobSpec s = tiny_llama();
  s.training.loss = loss;
  s.training.loss_chunk_tokens = chunk_tokens;
  AllocationTape tape;
  tape.mark(ProgramPhase::kSetup, 0);
  LlamaProgram model(s, tape);
  model.construct();
  model.train_micro_step(seq_len, 0);
  const AllocationProgram p = tape.take();
  return {probe_phase(p, 1), probe_phase(p, 2)};
}

TEST(LlamaLoss, TheStandardLossHoldsTheWholeVocabularysLogitsInFp32) {
  const std::uint64_t t = 2 * 256;
  const Phases standard = one_micro_step(Loss::kStandard, 256);
  // bf16 logits, logits.float(), log_softmax
  EXPECT_EQ(standard.forward.most(MemoryRole::kLogitsAndLoss), (2 + 4 + 4) * t * kVocab);
  // log_softmax's output kept for the backward, with nll_loss's and log_softmax's gradients
  EXPECT_EQ(standard.backward.most(MemoryRole::kLogitsAndLoss), 3 * 4 * t * kVocab);
  EXPECT_EQ(standard.backward.live(MemoryRole::kLogitsAndLoss), 0u);
}

TEST(LlamaLoss, AChunkedLossHoldsOneChunkAtATimeAndRecomputesEachInTheBackward) {
  const std::uint64_t chunk = 128, fp32_chunk = 4 * chunk * kVocab;
  const Phases at_512 = one_micro_step(Loss::kChunked, 256);  // 4 chunks
  const Phases at_1024 = one_micro_step(Loss::kChunked, 512);
  EXPECT_EQ(at_512.forward.count(MemoryRole::kLogitsAndLoss, fp32_chunk), 2 * 4u);   // .float(), log_softmax
  EXPECT_EQ(at_512.backward.count(MemoryRole::kLogitsAndLoss, fp32_chunk), 4 * 4u);  // and their gradients
  EXPECT_EQ(at_1024.forward.count(MemoryRole::kLogitsAndLoss, fp32_chunk), 2 * 8u);
  // the logits' memory does not grow with the tokens
  EXPECT_EQ(at_1024.forward.most(MemoryRole::kLogitsAndLoss), at_512.forward.most(MemoryRole::kLogitsAndLoss));
  EXPECT_EQ(at_1024.backward.most(MemoryRole::kLogitsAndLoss), at_512.backward.most(MemoryRole::kLogitsAndLoss));
  EXPECT_LT(at_512.backward.most(MemoryRole::kLogitsAndLoss),
            one_micro_step(Loss::kStandard, 256).backward.most(MemoryRole::kLogitsAndLoss) / 2);
}

TEST(LlamaLoss, TheFusedLossHasItsGradientsByTheEndOfTheForward) {
  const std::uint64_t t = 2 * 256;
  const std::uint64_t chunk = 128;  // 512 tokens / ⌈1000 / 256⌉ = 128, a power of two
  const Phases fused = one_micro_step(Loss::kFused, 256);
  const std::vector<std::uint64_t> chunk_logits = {2 * chunk * kVocab, 4 * chunk * kVocab};
  std::vector<std::uint64_t> expected = {4 * t * kHidden, 4 * kVocab * kHidden};  // grad_input, fp32 grad_weight
  for (int c = 0; c < 4; ++c) expected.insert(expected.end(), chunk_logits.begin(), chunk_logits.end());
  EXPECT_EQ(fused.forward.sizes(MemoryRole::kLogitsAndLoss), expected);
  EXPECT_TRUE(fused.backward.sizes(MemoryRole::kLogitsAndLoss).empty());
}

}  // namespace
}  // namespace fragscope::plan
