// Data parallelism in the emulated step (llama_data_parallel.cpp): FSDP2 keeps this rank's shard
// of each parameter, gathers a block's parameters on the all-gather stream and reduce-scatters
// its gradients on a stream of their own; DDP's reducer buckets hold every gradient, the first
// closing at 1 MiB and the others at 25 MiB; DeepSpeed ZeRO flattens the parameters and keeps
// a flat gradient buffer of its stage's size.
#include <vector>

#include <gtest/gtest.h>

#include "plan/llama_program.h"
#include "tape_probe.h"
#include "util/bytes.h"

namespace fragscope::plan {
namespace {

using testing::probe;
using testing::probe_phase;
using testing::tiny_llama;

/// Each parameter's elements in model.parameters() order, and its FSDP group (0 = root).
struct Parameter {
  std::uint64_t elements;
  std::uint64_t group;
};
std::vector<Parameter> parameters(const ModelShape& m) {
  const std::uint64_t h = m.hidden_size, kv = m.kv_dim(), inter = m.intermediate_size;
  std::vector<Parameter> out = {{m.vocab_size * h, 0}};
  for (std::uint64_t l = 0; l < m.num_layers; ++l)
    for (std::uint64_t elements : {h * h, h * kv, h * kv, h * h, h * inter, h * inter, h * inter, h, h})
      out.push_back({elements, 1 + l});
  out.push_back({h, 0});
  if (!m.tied_embeddings) out.push_back({m.vocab_size * h, 0});
  return out;
}

AllocationProgram run(const JobSpec& spec, int micro_steps) {
  AllocationTape tape;
  tape.mark(ProgramPhase::kSetup, 0);
  LlamaProgram model(spec, tape);
  model.construct();
  for (int k = 0; k < micro_steps; ++k) model.train_micro_step(spec.training.seq_len, static_cast<std::uint32_t>(k));
  return tape.take();
}

TEST(LlamaDataParallel, FsdpKeepsThisRanksShardOfEveryParameter) {
  JobSpec s = tiny_llama();
  s.parallel = {Strategy::kFsdp, 4};
  std::uint64_t shards = 0;
  for (const Parameter& p : parameters(s.model)) shards += (p.elements + 3) / 4 * 4;
  const auto built = probe(run(s, 0));
  EXPECT_EQ(built.live(MemoryRole::kParameters), shards);
  s.training.cpu_offload = CpuOffload::kParameters;  // the shards live on the host
  EXPECT_EQ(probe(run(s, 0)).live(MemoryRole::kParameters), 0u);
}

TEST(LlamaDataParallel, FsdpGathersAndReduceScattersOnStreamsOfTheirOwn) {
  JobSpec s = tiny_llama();
  s.parallel = {Strategy::kFsdp, 4};
  const AllocationProgram p = run(s, 1);
  const auto forward = probe_phase(p, 1);
  const auto backward = probe_phase(p, 2);
  // The forward gathers the root and each block: an fp32 input and output on the all-gather
  // stream per group, the output world_size times the input.
  std::vector<std::uint64_t> gathered;
  for (const auto& a : forward.allocated)
    if (a.stream == 2) {
      EXPECT_EQ(a.role, MemoryRole::kCommunication);
      gathered.push_back(a.bytes);
    }
  ASSERT_EQ(gathered.size(), 2 * (s.model.num_layers + 1));
  for (std::size_t i = 0; i < gathered.size(); i += 2) EXPECT_EQ(gathered[i + 1], 4 * gathered[i]);
  // The backward reduce-scatters each group once into its sharded gradient, which stays as .grad.
  std::vector<std::uint64_t> group_elements(s.model.num_layers + 1, 0);
  for (const Parameter& q : parameters(s.model)) group_elements[q.group] += q.elements;
  std::uint64_t sharded_gradients = 0;
  for (std::uint64_t e : group_elements) sharded_gradients += (e + 3) / 4 * 4;
  std::uint64_t reduced = 0, outputs = 0;
  for (const auto& a : backward.allocated)
    if (a.stream == 1) {
      EXPECT_EQ(a.role, MemoryRole::kGradients);
      reduced += a.bytes;
      ++outputs;
    }
  EXPECT_EQ(outputs, s.model.num_layers + 1);
  EXPECT_EQ(reduced, sharded_gradients);
  EXPECT_EQ(backward.live(MemoryRole::kGradients), sharded_gradients);
  // One rank: no all-gather, each shard cast and copied into its unsharded parameter.
  s.parallel.world_size = 1;
  for (const auto& a : probe(run(s, 1)).allocated) EXPECT_NE(a.stream, 2u);
}

TEST(LlamaDataParallel, DdpBucketsHoldEveryGradientFirstAt1MiBThenAt25MiB) {
  JobSpec s = tiny_llama();
  s.model = {"", 2048, 16, 16, 16, 5632, 32000, false};  // plan_p1's shape: many buckets
  s.parallel = {Strategy::kDdp, 2};
  const auto buckets = probe(run(s, 0)).sizes(MemoryRole::kCommunication);
  ASSERT_GT(buckets.size(), 3u);
  std::uint64_t total = 0;
  for (std::uint64_t b : buckets) total += b;
  EXPECT_EQ(total, s.model.parameters() * 4);
  EXPECT_EQ(buckets.front(), 32000ull * 2048 * 4);  // lm_head, the last parameter, alone past 1 MiB
  for (std::size_t i = 1; i + 1 < buckets.size(); ++i) EXPECT_GE(buckets[i], 25 * kMiB);
}

TEST(LlamaDataParallel, ZeroFlattensTheParametersAndKeepsItsStagesGradientBuffer) {
  JobSpec s = tiny_llama();
  s.training.precision = Precision::kMixedBf16;
  const std::uint64_t n = s.model.parameters(), part = (n + 3) / 4;
  struct Expected {
    Strategy stage;
    std::uint64_t parameters, gradients;
  };
  // stage 1: the whole bf16 gradient; stages 2 and 3: this rank's fp32 partition of it;
  // stage 3 also partitions the bf16 parameters
  for (const Expected& e : {Expected{Strategy::kZero1, 2 * n, 2 * n}, Expected{Strategy::kZero2, 2 * n, 4 * part},
                            Expected{Strategy::kZero3, 2 * part, 4 * part}}) {
    s.parallel = {e.stage, 4};
    const auto built = probe(run(s, 1));
    EXPECT_EQ(built.live(MemoryRole::kParameters), e.parameters) << to_string(e.stage);
    EXPECT_EQ(built.live(MemoryRole::kGradients), e.gradients) << to_string(e.stage);
  }
}

}  // namespace
}  // namespace fragscope::plan
