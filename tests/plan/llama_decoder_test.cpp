// The decoder stack (llama_decoder.cpp): a fully checkpointed block keeps only its input and is
// recomputed at its backward; HF's DynamicCache holds every layer's keys and values until the
// model output goes, unless checkpointing turned it off.
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "plan/llama_program.h"
#include "tape_probe.h"

namespace fragscope::plan {
namespace {

using testing::probe;
using testing::probe_phase;
using testing::TapeProbe;
using testing::tiny_llama;

struct Step {
  AllocationProgram program;
  std::uint64_t block_activation_bytes = 0;
};

Step one_micro_step(const JobSpec& spec) {
  AllocationTape tape;
  tape.mark(ProgramPhase::kSetup, 0);
  LlamaProgram model(spec, tape);
  model.construct();
  model.train_micro_step(64, 0);
  Step s;
  s.block_activation_bytes = model.block_activation_bytes();
  s.program = tape.take();
  return s;
}

JobSpec checkpointed(std::optional<std::uint64_t> layers) {
  JobSpec s = tiny_llama();
  s.training.checkpointing = Checkpointing::kFull;
  s.training.checkpointed_layers = layers;
  return s;
}

TEST(LlamaDecoder, AFullyCheckpointedBlockKeepsOnlyItsInput) {
  const std::uint64_t residual = 4 * 128 * 256;  // fp32 under autocast, 2 × 64 tokens, hidden 256
  EXPECT_EQ(one_micro_step(checkpointed(std::nullopt)).block_activation_bytes, residual);
  EXPECT_GT(one_micro_step(tiny_llama()).block_activation_bytes, 10 * residual);
}

TEST(LlamaDecoder, CheckpointedBlocksAreRecomputedAtTheirBackward) {
  auto recomputed = [](const JobSpec& spec) {
    return probe_phase(one_micro_step(spec).program, 2).sizes(MemoryRole::kActivations).size();
  };
  EXPECT_EQ(recomputed(tiny_llama()), 0u);  // nothing saved is made again
  const std::size_t every = recomputed(checkpointed(std::nullopt));
  EXPECT_GT(every, 0u);
  EXPECT_EQ(recomputed(checkpointed(1)), every / 3);  // the first of the three blocks
}

TEST(LlamaDecoder, TheKvCacheHoldsEveryLayerUntilTheOutputGoes) {
  const std::uint64_t layer = 4 * 128 * 128;  // fp32 keys (after the rotary) of 2 KV heads × 64
  const Step cached = one_micro_step(tiny_llama());
  const TapeProbe forward = probe_phase(cached.program, 1);
  EXPECT_EQ(forward.sizes(MemoryRole::kKvCache), std::vector<std::uint64_t>(2 * 3, layer));
  EXPECT_EQ(forward.most(MemoryRole::kKvCache), 2 * 3 * layer);
  EXPECT_EQ(forward.live(MemoryRole::kKvCache), 0u);
  // HF turns the cache off when training with gradient checkpointing, and use_cache=False does
  EXPECT_TRUE(probe(one_micro_step(checkpointed(std::nullopt)).program).sizes(MemoryRole::kKvCache).empty());
  JobSpec no_cache = tiny_llama();
  no_cache.training.use_cache = false;
  EXPECT_TRUE(probe(one_micro_step(no_cache).program).sizes(MemoryRole::kKvCache).empty());
}

}  // namespace
}  // namespace fragscope::plan
