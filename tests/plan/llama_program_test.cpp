// LlamaProgram's own part (llama_program.cpp): the model as built, what a micro-step leaves
// (the gradients, added in place over micro-steps, until zero_grad), the eval pass, and what
// the optimizer is handed in each regime.
#include "plan/llama_program.h"

#include <functional>
#include <vector>

#include <gtest/gtest.h>

#include "tape_probe.h"
#include "util/bytes.h"

namespace fragscope::plan {
namespace {

using testing::probe;
using testing::probe_phase;
using testing::tiny_llama;

/// Builds the model, runs `steps` on it; the program and what the optimizer would update.
struct Ran {
  AllocationProgram program;
  std::vector<LlamaProgram::OptimizedTensor> optimized;
};
Ran run(const JobSpec& spec, const std::function<void(LlamaProgram&)>& steps) {
  AllocationTape tape;
  tape.mark(ProgramPhase::kSetup, 0);
  LlamaProgram model(spec, tape);
  model.construct();
  steps(model);
  Ran r;
  r.optimized = model.optimized_tensors();
  r.program = tape.take();
  return r;
}

TEST(LlamaProgram, TheModelIsBuiltAtItsParameterCountInItsPrecision) {
  for (const Precision precision : {Precision::kAmpBf16, Precision::kBf16}) {
    for (const bool tied : {false, true}) {
      JobSpec s = tiny_llama();
      s.training.precision = precision;
      s.model.tied_embeddings = tied;
      const Ran r = run(s, [](LlamaProgram&) {});
      const std::uint64_t element = precision == Precision::kBf16 ? 2 : 4;
      EXPECT_EQ(probe(r.program).live(MemoryRole::kParameters), s.model.parameters() * element);
      EXPECT_EQ(r.program.events.size(), s.model.num_layers * 9 + (tied ? 2 : 3));  // one tensor each
    }
  }
}

TEST(LlamaProgram, MicroStepsLeaveTheGradientsUntilZeroGrad) {
  const JobSpec s = tiny_llama();
  const std::uint64_t gradients = s.model.parameters() * 4;
  const Ran one = run(s, [](LlamaProgram& m) { m.train_micro_step(64, 0); });
  const auto after_one = probe(one.program);
  EXPECT_EQ(after_one.live(MemoryRole::kGradients), gradients);
  EXPECT_EQ(after_one.live(MemoryRole::kWorkspaces), 2 * 32 * kMiB);  // the two threads' cuBLAS handles
  for (const MemoryRole role : {MemoryRole::kActivations, MemoryRole::kTransients, MemoryRole::kLogitsAndLoss,
                                MemoryRole::kKvCache, MemoryRole::kBatch, MemoryRole::kWeightCopies})
    EXPECT_EQ(after_one.live(role), 0u) << role_key(role);
  // A second micro-step adds into .grad in place; zero_grad(set_to_none) frees it.
  const Ran two = run(s, [](LlamaProgram& m) {
    m.train_micro_step(64, 0);
    m.train_micro_step(64, 1);
  });
  EXPECT_EQ(probe(two.program).live(MemoryRole::kGradients), gradients);
  const Ran zeroed = run(s, [](LlamaProgram& m) {
    m.train_micro_step(64, 0);
    m.release_gradients();
  });
  EXPECT_EQ(probe(zeroed.program).live(MemoryRole::kGradients), 0u);
}

TEST(LlamaProgram, TheEvalPassKeepsNothingForABackwardAndUpcastsTheLogits) {
  const JobSpec s = tiny_llama();
  const Ran r = run(s, [](LlamaProgram& m) {
    m.train_micro_step(64, 0);
    m.eval_pass(4, 64, 0);
  });
  ASSERT_EQ(r.program.marks.size(), 4u);
  EXPECT_EQ(r.program.marks[3].phase, ProgramPhase::kEval);
  EXPECT_EQ(r.program.marks[3].micro_step, 0u);
  const auto eval = probe_phase(r.program, 3);
  const auto forward = probe_phase(r.program, 1);
  // no_grad: one block's tensors at a time, against the training forward's every block's, at
  // twice the tokens
  EXPECT_LT(eval.most(MemoryRole::kActivations), forward.most(MemoryRole::kActivations) / 2);
  // logits.float() and log_softmax, both fp32 over the vocabulary, the bf16 logits gone
  const std::uint64_t tokens = 4 * 64;
  EXPECT_EQ(eval.most(MemoryRole::kLogitsAndLoss), 8 * tokens * s.model.vocab_size);
  EXPECT_EQ(eval.live(MemoryRole::kActivations), 0u);
  EXPECT_EQ(eval.live(MemoryRole::kLogitsAndLoss), 0u);
  EXPECT_EQ(eval.live(MemoryRole::kGradients), s.model.parameters() * 4);  // untouched
}

TEST(LlamaProgram, TheOptimizerGetsTheTensorsTheRegimeKeepsOnTheGpu) {
  JobSpec s = tiny_llama();
  const std::uint64_t n = s.model.parameters();
  auto total = [](const std::vector<LlamaProgram::OptimizedTensor>& ts) {
    std::uint64_t elements = 0;
    for (const auto& t : ts) elements += t.elements;
    return elements;
  };
  // every parameter, fp32 master weights
  auto plain = run(s, [](LlamaProgram&) {}).optimized;
  EXPECT_EQ(plain.size(), s.model.num_layers * 9 + 3);
  EXPECT_EQ(total(plain), n);
  EXPECT_EQ(plain.front().element_bytes, 4u);
  // pure bf16: bf16 state
  s.training.precision = Precision::kBf16;
  EXPECT_EQ(run(s, [](LlamaProgram&) {}).optimized.front().element_bytes, 2u);
  // FSDP over 4 ranks: each parameter's shard
  s = tiny_llama();
  s.parallel = {Strategy::kFsdp, 4};
  const auto shards = run(s, [](LlamaProgram&) {}).optimized;
  ASSERT_EQ(shards.size(), plain.size());
  for (std::size_t i = 0; i < shards.size(); ++i) EXPECT_EQ(shards[i].elements, (plain[i].elements + 3) / 4);
  // DeepSpeed: one flat fp32 partition
  s.parallel = {Strategy::kZero2, 4};
  s.training.precision = Precision::kMixedBf16;
  const auto flat = run(s, [](LlamaProgram&) {}).optimized;
  ASSERT_EQ(flat.size(), 1u);
  EXPECT_EQ(flat[0].elements, (n + 3) / 4);
  // the optimizer offloaded: the step runs on the host
  s.training.cpu_offload = CpuOffload::kOptimizer;
  EXPECT_TRUE(run(s, [](LlamaProgram&) {}).optimized.empty());
}

}  // namespace
}  // namespace fragscope::plan
